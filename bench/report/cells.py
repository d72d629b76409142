"""The "cells" section of results.md (`run`): a table per thread count, the latency
percentiles, the cost per query and the flood phase's table, with qps.png, latency.png and
cpu.png (bench/report/run.py and flood.py draw them); and how two runs' cells compare.

Cells are matched by (server, threads, connections). A cell that is not "ok" on either side
shows its status instead of a change. Cost per query, its ratio, QPS and the QPS ratios are
judged "changed", "the same" or "undecided" (bench/report/cost.py), with a line on the cost
per query of every server first; the other figures show their change. Every one of them
belongs to the machine that measured it; instructions per query carry between machines.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.load.prober import LatencyStats
from bench.measure.cells import Cell
from bench.measure.results import Results
from bench.measure.stats import Interval
from bench.report.comparing import (
    Comparison,
    Figure,
    figure_rows,
    pairs,
    same_boot,
    scaled,
    status_row,
)
from bench.report.cost import (
    compare_cell,
    cost_summary,
    judge,
    judged_row,
    other_cpu,
    qps_ratios,
)
from bench.report.flood import render_flood
from bench.report.run import (
    has_run_tables,
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
    Figure("QPS min", lambda c: c.qps.min, rate=True),
    Figure("QPS max", lambda c: c.qps.max, rate=True),
]

CELL_FIGURES: list[Figure[Cell]] = [
    *[Figure(f"{kind} latency {attr.removesuffix('_us')} (us)", _latency(kind, attr))
      for kind in ("unloaded", "loaded")
      for attr in ("mean_us", "p50_us", "p90_us", "p99_us", "max_us")],
    Figure("startup (ms)", lambda c: c.startup_ms),
    Figure("update visibility (ms)", lambda c: c.update_visibility_ms),
    Figure("CPU us/query server", lambda c: c.cpu_us_per_query.get("server")),
    Figure("CPU us/query db", lambda c: c.cpu_us_per_query.get("db")),
    Figure("CPU us/query dnsperf", lambda c: c.cpu_us_per_query.get("dnsperf")),
    Figure("peak RSS server (kB)", lambda c: c.peak_rss_kb.get("server")),
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


def compare_cells(a: Results, b: Results) -> Comparison:
    matched, only = pairs(a.cells, b.cells, lambda c: c.key, _describe)
    boot = same_boot(a, b)
    rows: list[str] = []
    for _, old, new in matched:
        if old.status != "ok" or new.status != "ok":
            rows.append(status_row(old.server, where(old), old.status, new.status))
            continue
        rows += compare_cell(a, b, old, new, where(old), boot)
        rows += qps_ratio_rows(a, b, old, new)
        rows += figure_rows(old.server, where(old), QPS_FIGURES + CELL_FIGURES, old, new, boot)
    return Comparison(rows, only, summary=cost_summary(a, b))


def qps_ratio_rows(a: Results, b: Results, old: Cell, new: Cell) -> list[str]:
    """The cell's QPS as a % of each reference's in its own run (none of the reference
    itself), judged on the round-paired ratios: each run's own, so compared across boots."""
    rows = []
    for reference in (REFERENCE, DLZ_CEILING):
        if old.server == reference:
            continue
        mine, theirs = percent_of(a, old, reference), percent_of(b, new, reference)
        if mine is None and theirs is None:
            continue
        a_values, a_starts = qps_ratios(old, _ok(a, reference, old.threads))
        b_values, b_starts = qps_ratios(new, _ok(b, reference, new.threads))
        rows.append(judged_row(old.server, where(old), f"QPS % of {reference}",
                               _estimate(mine), _estimate(theirs),
                               judge(a_values, a_starts, b_values, b_starts), 1, other_cpu(a, b)))
    return rows


def _ok(results: Results, server: str, threads: int) -> Cell | None:
    cell = results.cell(server, threads)
    return cell if cell is not None and cell.status == "ok" else None


def _estimate(value: float | Interval | None) -> float | None:
    return value.estimate if isinstance(value, Interval) else value


def _describe(key: tuple[str, int, int]) -> str:
    server, threads, connections = key
    conn = "" if connections in (0, threads) else f", {connections} connection(s)"
    return f"{server} at {threads} thread(s){conn}"
