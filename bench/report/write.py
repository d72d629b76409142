"""results.json -> results.md and the PNG plots: which sections a results file gets, each
rendered by the report module of its measurement (run, capacity, scale, signed, tune,
instructions, faults, writes, updates)."""

from __future__ import annotations

from pathlib import Path

from bench.measure.results import Results
from bench.report.capacity import render_capacity, render_capacity_plots
from bench.report.faults import render_faults, render_faults_plots
from bench.report.flood import render_flood
from bench.report.instructions import render_instructions
from bench.report.run import (
    has_run_tables,
    render_costs,
    render_header,
    render_percentiles,
    render_run_plots,
    render_startup_plot,
    render_startup_scaling,
    render_thread_table,
)
from bench.report.scale import render_scale, render_scale_plot
from bench.report.signed import render_signed, render_signed_plot
from bench.report.tune import render_tune_plots, render_tuning
from bench.report.updates import render_updates, render_updates_plots
from bench.report.writes import render_writes, render_writes_plots


def render_markdown(results: Results) -> str:
    lines = render_header(results)
    if results.tuning is not None:  # a `tune` file: its grid is read by threads x connections
        lines += render_tuning(results)
    elif has_run_tables(results):
        for threads in results.thread_counts():
            lines += render_thread_table(results, threads)
        lines += render_percentiles(results)
        lines += render_costs(results)
    lines += render_flood(results)
    lines += render_capacity(results)
    lines += render_startup_scaling(results)
    lines += render_scale(results)
    lines += render_signed(results)
    lines += render_instructions(results)
    lines += render_faults(results)
    lines += render_writes(results)
    lines += render_updates(results)
    return "\n".join(lines).rstrip() + "\n"


def write_report(results: Results, directory: Path) -> str:
    """Write directory/results.md and the plots; the markdown."""
    markdown = render_markdown(results)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "results.md").write_text(markdown)
    render_plots(results, directory)
    return markdown


def render_plots(results: Results, out_dir: Path) -> list[Path]:
    """qps.png, latency.png, cpu.png and (with startup scaling data) startup.png; for a `tune`
    file, its heat map and curves (bench/report/tune.py)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never needs a display
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if results.tuning is not None:
        written += render_tune_plots(results, out_dir)
    elif has_run_tables(results):
        written += render_run_plots(results, out_dir)
    if results.startup_scaling:
        written.append(render_startup_plot(results, out_dir))
    written += render_capacity_plots(results, out_dir)
    written += render_scale_plot(results, out_dir)
    written += render_signed_plot(results, out_dir)
    written += render_faults_plots(results, out_dir)
    written += render_writes_plots(results, out_dir)
    written += render_updates_plots(results, out_dir)
    return written
