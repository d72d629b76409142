"""The "cells" section of results.md (`run`): a table per thread count, the latency
percentiles, the cost per query and the flood phase's table, with qps.png, latency.png and
cpu.png (bench/report/run.py and flood.py draw them); and how two runs' cells compare.

Cells are matched by (server, threads, connections). A cell that is not "ok" on either side
shows its status instead of a change. Each server's QPS as a percentage of native BIND and of
the memory driver in its own run are the figures that carry over between machines and
between BIND 9.18 and 9.20.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.load.prober import LatencyStats
from bench.measure.cells import Cell
from bench.measure.results import Results
from bench.measure.stats import Interval
from bench.report.comparing import (
    NOT_DISTINGUISHABLE,
    Comparison,
    Figure,
    figure_rows,
    pairs,
    same_boot,
    scaled,
    status_row,
    verdict,
)
from bench.report.flood import render_flood
from bench.report.format import markdown_table
from bench.report.run import (
    has_run_tables,
    interval_text,
    render_costs,
    render_percentiles,
    render_run_plots,
    render_thread_table,
)
from servers import DLZ_CEILING, REFERENCE


def render_cells(results: Results) -> list[str]:
    """The tables of `run` (none in a `tune` file: its cells are its grid, rendered by
    bench/report/tune.py), then the flood phase's."""
    lines: list[str] = []
    if results.tuning is None and has_run_tables(results):
        for threads in results.thread_counts():
            lines += render_thread_table(results, threads)
        lines += render_percentiles(results)
        lines += render_costs(results)
    return lines + render_flood(results)


def render_cells_plots(results: Results, out_dir: Path) -> list[Path]:
    if results.tuning is not None or not has_run_tables(results):
        return []
    return render_run_plots(results, out_dir)


def _latency(kind: str, attr: str) -> Callable[[Cell], float | None]:
    def figure(cell: Cell) -> float | None:
        stats: LatencyStats | None = getattr(cell, f"latency_{kind}")
        return None if stats is None else getattr(stats, attr)
    return figure


QPS_FIGURES: list[Figure[Cell]] = [
    Figure("QPS median", lambda c: c.qps_interval, rate=True),
    Figure("QPS min", lambda c: c.qps.min, rate=True),
    Figure("QPS max", lambda c: c.qps.max, rate=True),
]

CELL_FIGURES: list[Figure[Cell]] = [
    *[Figure(f"{kind} latency {attr.removesuffix('_us')} (us)", _latency(kind, attr))
      for kind in ("unloaded", "loaded")
      for attr in ("mean_us", "p50_us", "p90_us", "p99_us", "max_us")],
    Figure("startup (ms)", lambda c: c.startup_ms),
    Figure("update visibility (ms)", lambda c: c.update_visibility_ms),
    Figure("CPU us/query named", lambda c: c.cpu_us_per_query.get("named")),
    Figure("CPU us/query db", lambda c: c.cpu_us_per_query.get("db")),
    Figure("CPU us/query dnsperf", lambda c: c.cpu_us_per_query.get("dnsperf")),
    Figure("peak RSS named (kB)", lambda c: c.peak_rss_kb.get("named")),
    Figure("peak RSS db (kB)", lambda c: c.peak_rss_kb.get("db")),
]


def where(cell: Cell) -> str:
    """The thread count, and the connection count when it differs (a `tune` grid)."""
    if cell.connections in (0, cell.threads):
        return str(cell.threads)
    return f"{cell.threads} ({cell.connections} conn.)"


def percent_of(results: Results, cell: Cell, reference: str) -> float | Interval | None:
    """The cell's QPS as a percentage of the reference's in the same run: the median of the
    round-paired ratios with its interval, or (files before rounds) the ratio of the
    medians."""
    if reference in cell.ratios:
        return scaled(cell.ratios[reference], 100)
    ref = results.cell(reference, cell.threads)
    if ref is None or ref.status != "ok" or not ref.qps.median or cell.qps.median is None:
        return None
    return 100 * cell.qps.median / ref.qps.median


def ratio_figures(server: str) -> list[Figure[tuple[Results, Cell]]]:
    """A cell's QPS as a % of each reference's in its own run (none of the reference itself):
    within one run, so never under the same-boot rule."""
    return [Figure(f"QPS % of {reference}",
                   lambda pair, ref=reference: percent_of(pair[0], pair[1], ref))
            for reference in (REFERENCE, DLZ_CEILING) if server != reference]


def compare_cells(a: Results, b: Results) -> Comparison:
    matched, only = pairs(a.cells, b.cells, lambda c: c.key, _describe)
    boot = same_boot(a, b)
    rows: list[str] = []
    for _, old, new in matched:
        if old.status != "ok" or new.status != "ok":
            rows.append(status_row(old.server, where(old), old.status, new.status))
            continue
        rows += figure_rows(old.server, where(old), QPS_FIGURES + CELL_FIGURES, old, new, boot)
        rows += figure_rows(old.server, where(old), ratio_figures(old.server),
                            (a, old), (b, new), boot)
    return Comparison(rows, only, ratio_agreement(a, b))


def _describe(key: tuple[str, int, int]) -> str:
    server, threads, connections = key
    conn = "" if connections in (0, threads) else f", {connections} connection(s)"
    return f"{server} at {threads} thread(s){conn}"


def ratio_agreement(a: Results, b: Results) -> list[str]:
    """Every ratio (to native, to memory) that both runs give with a 95% interval, and whether
    the two intervals overlap: how far a rerun reproduces a run (two runs on one boot should
    agree in 95% of cells). Empty when no ratio has an interval on both sides."""
    cells_b = {c.key: c for c in b.cells}
    rows: list[list[str]] = []
    for cell in a.cells:
        other = cells_b.get(cell.key)
        for reference in (REFERENCE, DLZ_CEILING):
            if other is None or cell.server == reference:
                continue
            ra, rb = cell.ratios.get(reference), other.ratios.get(reference)
            if ra is None or rb is None or ra.half_width is None or rb.half_width is None:
                continue
            rows.append([cell.server, where(cell), f"% of {reference}",
                         interval_text(ra, 100, 1, "%"), interval_text(rb, 100, 1, "%"),
                         "yes" if verdict(ra, rb) == NOT_DISTINGUISHABLE else "no"])
    if not rows:
        return []
    agree = sum(1 for row in rows if row[-1] == "yes")
    return ["", "## Ratios in both runs", "",
            f"{agree} of {len(rows)} ratios ({100 * agree / len(rows):.0f}%) agree: their 95% "
            "intervals overlap.", "",
            *markdown_table(["server", "threads", "ratio", "A", "B", "agree"], rows)]
