"""The `tune` part of results.md and its plots: the threads x connections grid (QPS, p99 under
load, CPU per query), the recommendation, processes against threads, and QPS against CPUs.

The grid reads rows as named thread counts and columns as DLZ driver connection counts; a cell
that answered wrongly or failed shows WRONG or FAILED, never a number.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.measure.cells import Cell
from bench.measure.results import Results
from bench.measure.tune import qps_over_starts
from bench.measure.tuning import Recommendation, ScalePoint, Tuning
from bench.report.comparing import (
    Comparison,
    Figure,
    figure_rows,
    one_sided,
    pairs,
    same_boot,
    status_row,
)
from bench.report.cost import cost_text
from bench.report.format import (
    NONE,
    Notes,
    fmt_number,
    interval_text,
    markdown_table,
    save_figure,
    status_text,
)

HEATMAP = "tune-heatmap.png"
CURVES = "tune-curves.png"


def _grid(results: Results, server: str) -> dict[tuple[int, int], Cell]:
    return {(c.threads, c.connections): c for c in results.cells if c.server == server}


def _axes(grid: dict[tuple[int, int], Cell]) -> tuple[list[int], list[int]]:
    return sorted({t for t, _ in grid}), sorted({c for _, c in grid})


def render_grid(results: Results, server: str, title: str,
                figure: Callable[[Cell], str]) -> list[str]:
    grid = _grid(results, server)
    threads, connections = _axes(grid)
    notes = Notes()
    rows = []
    for t in threads:
        row = [str(t)]
        for c in connections:
            cell = grid.get((t, c))
            if cell is None:
                row.append(NONE)
            else:
                row.append(status_text(cell, notes) or figure(cell))
        rows.append(row)
    header = ["threads \\ connections", *map(str, connections)]
    return [f"### {server}: {title}", ""] + markdown_table(header, rows) + [""] + notes.render()


def _p99(cell: Cell) -> str:
    return fmt_number(cell.latency_loaded.p99_us if cell.latency_loaded else None)


def _qps_over_starts(cell: Cell) -> str:
    """The QPS over the fresh starts with its interval; the runs' median for a setting of one
    start."""
    interval = qps_over_starts(cell)
    if interval is None:
        return fmt_number(cell.qps.median)
    return interval_text(interval, of="starts")


def _most_starts(results: Results, server: str) -> int:
    return max((len(c.starts) for c in results.cells if c.server == server), default=0)


def _cpu(cell: Cell) -> str:
    server, db = cell.cpu_us_per_query.get("server"), cell.cpu_us_per_query.get("db")
    return f"{fmt_number(server, 1)} / {fmt_number(db, 1)}"


def render_database(tuning: Tuning) -> list[str]:
    where = "on this host" if tuning.db_host == "local" else \
        f"in network namespace {tuning.db_namespace}, at {tuning.db_address} over a veth pair"
    lines = [f"- Database: {where}."]
    if not tuning.db_rtt_ms:
        lines.append("- Added round trip: none (no proxy).")
    else:
        added = tuning.added_rtt or {}
        lines.append(f"- Added round trip: {tuning.db_rtt_ms} ms requested from "
                     f"{added.get('tool', 'the proxy')}; measured "
                     f"{fmt_number(added.get('measured_added_ms'), 3)} ms (median of "
                     f"{added.get('samples', NONE)} trivial requests through the proxy, "
                     f"{fmt_number(added.get('proxied_ms'), 3)} ms, minus straight to the "
                     f"database, {fmt_number(added.get('direct_ms'), 3)} ms).")
    return lines


def render_recommendations(tuning: Tuning) -> list[str]:
    if not tuning.recommendations:
        return ["No recommendation: no setting answered correctly with a QPS figure.", ""]
    lines = []
    for r in tuning.recommendations:
        best = (f"{fmt_number(r.best_qps)} at {r.best_threads} threads, {r.best_connections} "
                "connections")
        rule = (f"The smallest setting within {r.tolerance:.0%} of the best QPS ({best})."
                if r.p_below is None else
                f"The smallest setting the fresh starts do not show more than "
                f"{r.tolerance:.0%} below the best QPS ({best}; one-sided Welch t test on the "
                f"per-start means, p = {r.p_below:.2f}).")
        lines.append(f"**Recommended for {r.server}: {r.threads} threads, {r.connections} "
                     f"connections**: {fmt_number(r.qps)} QPS, p99 under load "
                     f"{fmt_number(r.p99_us)} us. {rule}")
    return lines + [""]


def _point_qps(point: ScalePoint | None) -> str:
    if point is None:
        return NONE
    if point.status != "ok":
        return point.status.upper()
    return fmt_number(point.qps)


def render_processes(tuning: Tuning) -> list[str]:
    points = {(p.kind, p.count): p for p in tuning.scaling}
    counts = sorted({p.count for p in tuning.scaling if p.kind == "processes"})
    if not counts:
        return []
    rows = []
    for n in counts:
        processes = points.get(("processes", n))
        spread = " / ".join(map(str, processes.requests)) if processes else NONE
        rows.append([str(n), _point_qps(points.get(("threads", n))), _point_qps(processes),
                     spread or NONE])
    header = ["N", "one N-thread process: QPS", "N one-thread processes, one port: QPS",
              "requests each process received"]
    return ["### Processes against threads", "",
            "N one-thread named processes share one address and port (SO_REUSEPORT), each "
            "pinned to its own server CPU (in turn when there are fewer CPUs than processes), "
            "against one N-thread process; one dnsperf load each.", ""] + \
        markdown_table(header, rows) + [""]


def render_cpus(tuning: Tuning) -> list[str]:
    points = sorted((p for p in tuning.scaling if p.kind == "cpus"), key=lambda p: p.count)
    if not points:
        return []
    rows = [[str(p.count), p.server_cpus or NONE, p.load_cpus or NONE,
             f"{p.threads} / {p.connections}", _point_qps(p)] for p in points]
    header = ["server CPUs", "server (taskset)", "dnsperf (taskset)", "threads / connections",
              "QPS"]
    return ["### QPS against server CPUs", ""] + markdown_table(header, rows) + [""]


def render_tuning(results: Results) -> list[str]:
    """The section, or nothing for a file of another command."""
    tuning = results.tuning
    if tuning is None:
        return []
    lines = ["## Tuning threads and connections", "", *render_database(tuning), ""]
    lines += render_recommendations(tuning)
    for server in results.servers():
        starts = _most_starts(results, server)
        if starts > 1:
            lines += render_grid(results, server, f"QPS over {starts} fresh starts (geometric "
                                 "mean, 95% interval over the starts)", _qps_over_starts)
            lines += render_grid(results, server, "cost per query, server + database (CPU "
                                 "us, 95% interval over the starts)", cost_text)
        else:
            lines += render_grid(results, server, "QPS (median of the runs)",
                                 lambda c: fmt_number(c.qps.median))
        lines += render_grid(results, server, "p99 latency under load (us"
                             + (", after the first start)" if starts > 1 else ")"), _p99)
        lines += render_grid(results, server, "CPU us per query, named / database", _cpu)
    lines += render_processes(tuning) + render_cpus(tuning)
    lines += [f"Plots: {HEATMAP} (QPS over the grid), {CURVES} (QPS against threads, one "
              "curve per connection count).", ""]
    return lines


# ---------------------------------------------------------------- plots

def render_tune_plots(results: Results, out_dir: Path) -> list[Path]:
    if results.tuning is None:
        return []
    return [_plot_heatmap(results, out_dir / HEATMAP), _plot_curves(results, out_dir / CURVES)]


def _qps(cell: Cell | None) -> float | None:
    if cell is None or cell.status != "ok":
        return None
    return cell.qps.median


def _plot_heatmap(results: Results, path: Path) -> Path:
    import matplotlib.pyplot as plt
    import numpy as np

    servers = results.servers()
    fig, axes = plt.subplots(1, max(1, len(servers)), squeeze=False,
                             figsize=(5.5 * max(1, len(servers)), 4.5))
    for ax, server in zip(axes[0], servers, strict=False):
        grid = _grid(results, server)
        threads, connections = _axes(grid)
        values = np.array([[_qps(grid.get((t, c))) or np.nan for c in connections]
                           for t in threads], dtype=float)
        image = ax.imshow(values, origin="lower", aspect="auto", cmap="viridis")
        for i, row in enumerate(values):
            for j, value in enumerate(row):
                text = "–" if np.isnan(value) else f"{value:,.0f}"
                # Dark text on the bright (high) end of viridis, light text on the dark end.
                bright = not np.isnan(value) and image.norm(value) > 0.6
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="black" if bright else "white")
        ax.set_xticks(range(len(connections)), [str(c) for c in connections])
        ax.set_yticks(range(len(threads)), [str(t) for t in threads])
        ax.set_xlabel("DLZ driver connections")
        ax.set_ylabel("named threads")
        ax.set_title(f"{server}: QPS")
        fig.colorbar(image, ax=ax, label="queries per second (median)")
    return save_figure(fig, path)


def _plot_curves(results: Results, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for server in results.servers():
        grid = _grid(results, server)
        threads, connections = _axes(grid)
        for c in connections:
            points = [(t, q) for t in threads if (q := _qps(grid.get((t, c)))) is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", label=f"{server}, {c} connection"
                                                  f"{'s' if c != 1 else ''}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("named threads")
    ax.set_ylabel("queries per second (median)")
    ax.set_title("QPS against threads, per connection count")
    ax.grid(which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    return save_figure(fig, path)


# ---------------------------------------------------------------- compare

POINT: list[Figure[ScalePoint]] = [Figure("QPS", lambda p: p.qps, rate=True)]
RECOMMENDED: list[Figure[Recommendation]] = [
    Figure("threads", lambda r: r.threads, decimals=0),
    Figure("connections", lambda r: r.connections, decimals=0),
    Figure("QPS", lambda r: r.qps, rate=True),
    Figure("p99 under load (us)", lambda r: r.p99_us),
]


def compare_tuning(a: Results, b: Results) -> Comparison:
    """`tune`'s scaling points, matched by (server, kind, count), and its recommendations by
    server (its grid is cells: bench/report/cells.py compares them)."""
    if a.tuning is None or b.tuning is None:
        return Comparison(only=one_sided("tune's scaling and recommendations", a.tuning,
                                         b.tuning))
    boot = same_boot(a, b)
    points, only = pairs(a.tuning.scaling, b.tuning.scaling,
                         lambda p: (p.server, p.kind, p.count),
                         lambda k: f"{k[0]} with {k[2]} {k[1]}")
    rows = [line for (server, kind, count), old, new in points
            for line in (figure_rows(server, f"{count} {kind}", POINT, old, new, boot)
                         if old.status == new.status == "ok" else
                         [status_row(server, f"{count} {kind}", old.status, new.status)])]
    recommended, only_recommended = pairs(a.tuning.recommendations,
                                          b.tuning.recommendations, lambda r: r.server,
                                          lambda server: f"a recommendation for {server}")
    rows += [line for server, old, new in recommended
             for line in figure_rows(server, "recommended", RECOMMENDED, old, new, boot)]
    return Comparison(rows, only + only_recommended)
