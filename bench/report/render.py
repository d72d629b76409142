"""results.json -> results.md and the PNG plots: the header, then every section in the order of
bench/report/sections.py, each rendered by its measurement's report module (a section a file
does not have gives nothing)."""

from __future__ import annotations

from pathlib import Path

from bench.measure.results import Results
from bench.report.run import render_header
from bench.report.sections import REPORTS


def render_markdown(results: Results) -> str:
    lines = render_header(results)
    for report in REPORTS:
        lines += report.render(results)
    return "\n".join(lines).rstrip() + "\n"


def write_report(results: Results, directory: Path) -> str:
    """Write directory/results.md and the plots; the markdown."""
    markdown = render_markdown(results)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "results.md").write_text(markdown)
    render_plots(results, directory)
    return markdown


def render_plots(results: Results, out_dir: Path) -> list[Path]:
    """Every section's plots: a run's qps.png, latency.png and cpu.png, startup.png, a `tune`
    file's heat map and curves, ..."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never needs a display
    out_dir.mkdir(parents=True, exist_ok=True)
    return [path for report in REPORTS for path in report.plots(results, out_dir)]
