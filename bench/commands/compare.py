"""`python3 -m bench compare A B`: the change of every figure from results A to results B.

First what differs between the two runs (BIND version, CPU, database versions, boot, commit),
then every figure, and each driver's QPS as a percentage of native BIND and of the memory driver
in its own run: the figures that carry over between machines and between BIND 9.18 and 9.20.

Same-run rule: a QPS of A is never divided by a QPS of B measured on another boot (or one not
recorded): its change says "different boot: not divided". Where both sides have 95% intervals
(runs in rounds) that overlap, the change says "not distinguishable" instead of a figure.

Cells are matched by (driver, threads, connections), startup-scaling points by (driver,
zones), capacity curves by (driver, threads), `tune`'s scaling points by (driver, kind,
count). A cell that is not "ok" on either side shows its status instead of a change; a cell
present on one side only is listed as such.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from bench.load.prober import LatencyStats
from bench.measure.capacity import STRICT, UP_TO_THE_TASK, Curve
from bench.measure.catalogue import Catalogue
from bench.measure.catalogue import Figure as CatalogueFigure
from bench.measure.metadata import METADATA_KEYS
from bench.measure.results import Cell, Results, StartupPoint, load_results
from bench.measure.stats import Interval, intervals_overlap
from bench.report.format import fmt_change, fmt_number, markdown_table
from bench.report.run import interval_text
from servers import DLZ_CEILING, REFERENCE

Figure = tuple[str, Callable[[Cell], float | None]]


def _latency(kind: str, attr: str) -> Callable[[Cell], float | None]:
    def figure(cell: Cell) -> float | None:
        stats: LatencyStats | None = getattr(cell, f"latency_{kind}")
        return None if stats is None else getattr(stats, attr)
    return figure


QPS_FIGURES: list[Figure] = [
    ("QPS median", lambda c: c.qps.median),
    ("QPS min", lambda c: c.qps.min),
    ("QPS max", lambda c: c.qps.max),
]
DIFFERENT_BOOT = "different boot: not divided"
NOT_DISTINGUISHABLE = "not distinguishable"

CELL_FIGURES: list[Figure] = [
    *[(f"{kind} latency {attr.removesuffix('_us')} (us)", _latency(kind, attr))
      for kind in ("unloaded", "loaded")
      for attr in ("mean_us", "p50_us", "p90_us", "p99_us", "max_us")],
    ("startup (ms)", lambda c: c.startup_ms),
    ("update visibility (ms)", lambda c: c.update_visibility_ms),
    ("CPU us/query named", lambda c: c.cpu_us_per_query.get("named")),
    ("CPU us/query db", lambda c: c.cpu_us_per_query.get("db")),
    ("CPU us/query dnsperf", lambda c: c.cpu_us_per_query.get("dnsperf")),
    ("peak RSS named (kB)", lambda c: c.peak_rss_kb.get("named")),
    ("peak RSS db (kB)", lambda c: c.peak_rss_kb.get("db")),
]

STARTUP_FIGURES: list[tuple[str, Callable[[StartupPoint], float | None]]] = [
    ("startup (ms)", lambda p: p.startup_ms),
    ("named RSS (kB)", lambda p: p.named_rss_kb),
    ("store size (bytes)", lambda p: p.store_bytes),
]

def _p99_near(share: float) -> Callable[[Curve], float | None]:
    def figure(curve: Curve) -> float | None:
        bp = curve.breaking_point()
        step = curve.step_near(None if bp is None else share * bp)
        return None if step is None else step.latency_us.get("p99")
    return figure


CAPACITY_FIGURES: list[tuple[str, Callable[[Curve], float | None]]] = [
    ("closed-loop QPS", lambda c: c.closed_loop_qps),
    ("breaking point 5% (QPS)", lambda c: c.breaking_point(UP_TO_THE_TASK)),
    ("breaking point 1% (QPS)", lambda c: c.breaking_point(STRICT)),
    ("p99 at 50% load (us)", _p99_near(0.5)),
    ("p99 at 90% load (us)", _p99_near(0.9)),
    ("resperf max (QPS)", lambda c: None if c.resperf is None else c.resperf.max_qps),
]

HEADER = "| server | threads/zones | figure | A | B | change | change % |\n" \
         "|---|---:|---|---:|---:|---:|---:|"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="print the change of every figure between two "
                                       "results directories")
    p.add_argument("a", type=Path, help="results directory (or results.json) A, the base")
    p.add_argument("b", type=Path, help="results directory (or results.json) B")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(compare(load_results(args.a), load_results(args.b), str(args.a), str(args.b)),
          end="")
    return 0


def _row(driver: str, where: object, figure: str, old: float | None,
         new: float | None, decimals: int | None = None, verdict: str | None = None) -> str:
    """A figure's row; `verdict` in place of the change where it may not be computed."""
    change, relative = fmt_change(old, new) if verdict is None else (verdict, verdict)
    return (f"| {driver} | {where} | {figure} | {fmt_number(old, decimals)} "
            f"| {fmt_number(new, decimals)} "
            f"| {change} | {relative} |")


def _where(cell: Cell) -> str:
    """The thread count, and the connection count when it differs (a `tune` grid)."""
    if cell.connections in (0, cell.threads):
        return str(cell.threads)
    return f"{cell.threads} ({cell.connections} conn.)"


def compare_cells(a: Cell, b: Cell, ra: Results, rb: Results) -> list[str]:
    if a.status != "ok" or b.status != "ok":
        return [f"| {a.server} | {_where(a)} | status | {a.status.upper()} | "
                f"{b.status.upper()} | – | – |"]
    boot = None if same_boot(ra, rb) else DIFFERENT_BOOT
    qps_verdicts = {"QPS median": boot or _overlap(a.qps_interval, b.qps_interval)}
    rows = [_row(a.server, _where(a), name, get(a), get(b),
                 verdict=qps_verdicts.get(name, boot)) for name, get in QPS_FIGURES]
    rows += [_row(a.server, _where(a), name, get(a), get(b)) for name, get in CELL_FIGURES]
    # Ratios within each run are what carries over between machines and BIND versions.
    for reference in (REFERENCE, DLZ_CEILING):
        if a.server != reference:
            rows.append(_row(a.server, _where(a), f"QPS % of {reference}",
                             _percent_of(ra, a, reference), _percent_of(rb, b, reference),
                             verdict=_overlap(a.ratios.get(reference),
                                              b.ratios.get(reference))))
    return rows


def same_boot(a: Results, b: Results) -> bool:
    """Were both runs measured on one boot (both recorded it, and it is the same)?"""
    boot = a.meta.get("boot_id")
    return boot is not None and boot != "unknown" and boot == b.meta.get("boot_id")


def _overlap(a: Interval | None, b: Interval | None) -> str | None:
    """NOT_DISTINGUISHABLE where both sides have intervals and they overlap."""
    if a is None or b is None or None in (a.low, a.high, b.low, b.high):
        return None
    return NOT_DISTINGUISHABLE if intervals_overlap(a, b) else None


def _percent_of(results: Results, cell: Cell, reference: str) -> float | None:
    """The cell's QPS as a percentage of the reference's in the same run: the median of the
    round-paired ratios, or (files before rounds) the ratio of the medians."""
    if reference in cell.ratios:
        return 100 * cell.ratios[reference].estimate
    ref = results.cell(reference, cell.threads)
    if ref is None or ref.status != "ok" or not ref.qps.median or cell.qps.median is None:
        return None
    return 100 * cell.qps.median / ref.qps.median


def what_differs(a: Results, b: Results) -> list[str]:
    """The software, machine and repository facts that differ between the two runs."""
    rows = [f"| {key} | {a.meta.get(key, '–')} | {b.meta.get(key, '–')} |"
            for key in METADATA_KEYS if key != "date" and a.meta.get(key) != b.meta.get(key)]
    if not rows:
        return ["Same software, machine and commit in both runs.", ""]
    return ["| what differs | A | B |", "|---|---|---|", *rows, ""]


def compare_tuning(a: Results, b: Results) -> tuple[list[str], list[str]]:
    """Rows for `tune`'s scaling points and recommendations, and what only one side has."""
    if a.tuning is None or b.tuning is None:
        return [], []
    rows: list[str] = []
    points_a = {(p.server, p.kind, p.count): p for p in a.tuning.scaling}
    points_b = {(p.server, p.kind, p.count): p for p in b.tuning.scaling}
    for key in sorted(points_a.keys() & points_b.keys()):
        rows.append(_row(key[0], f"{key[2]} {key[1]}", "QPS", points_a[key].qps,
                         points_b[key].qps))
    recs_a = {r.server: r for r in a.tuning.recommendations}
    recs_b = {r.server: r for r in b.tuning.recommendations}
    for driver in sorted(recs_a.keys() & recs_b.keys()):
        ra, rb = recs_a[driver], recs_b[driver]
        rows += [_row(driver, "recommended", "threads", ra.threads, rb.threads, 0),
                 _row(driver, "recommended", "connections", ra.connections, rb.connections, 0),
                 _row(driver, "recommended", "QPS", ra.qps, rb.qps),
                 _row(driver, "recommended", "p99 under load (us)", ra.p99_us, rb.p99_us)]
    only = [f"- {key[0]} with {key[2]} {key[1]}: only in {'A' if key in points_a else 'B'}"
            for key in sorted(points_a.keys() ^ points_b.keys())]
    return rows, only


def compare_startup(a: StartupPoint, b: StartupPoint) -> list[str]:
    if a.status != "ok" or b.status != "ok":
        return [f"| {a.server} | {a.zones} zones | status | {a.status.upper()} | "
                f"{b.status.upper()} | – | – |"]
    return [_row(a.server, f"{a.zones} zones", name, get(a), get(b))
            for name, get in STARTUP_FIGURES]


def compare(a: Results, b: Results, a_name: str = "A", b_name: str = "B") -> str:
    """A markdown report of every figure's change from `a` to `b`."""
    lines = [f"# Changes from A = {a_name} to B = {b_name}", "", *what_differs(a, b), HEADER]
    if a.prober_floor is not None and b.prober_floor is not None:
        for attr in ("mean_us", "p50_us", "p99_us"):
            lines.append(_row("prober floor", "–", attr, getattr(a.prober_floor, attr),
                              getattr(b.prober_floor, attr)))
    cells_a = {c.key: c for c in a.cells}
    cells_b = {c.key: c for c in b.cells}
    only: list[str] = []
    for key in sorted(cells_a.keys() | cells_b.keys()):
        if key in cells_a and key in cells_b:
            lines += compare_cells(cells_a[key], cells_b[key], a, b)
        else:
            conn = "" if key[2] in (0, key[1]) else f", {key[2]} connection(s)"
            only.append(f"- {key[0]} at {key[1]} thread(s){conn}: only in "
                        f"{'A' if key in cells_a else 'B'}")
    points_a = {(p.server, p.zones): p for p in a.startup_scaling}
    points_b = {(p.server, p.zones): p for p in b.startup_scaling}
    for key in sorted(points_a.keys() | points_b.keys()):
        if key in points_a and key in points_b:
            lines += compare_startup(points_a[key], points_b[key])
        else:
            only.append(f"- startup of {key[0]} with {key[1]} zones: only in "
                        f"{'A' if key in points_a else 'B'}")
    curves_a = {(c.server, c.threads): c for c in a.capacity}
    curves_b = {(c.server, c.threads): c for c in b.capacity}
    for key in sorted(curves_a.keys() & curves_b.keys()):
        lines += [_row(key[0], key[1], f"capacity: {name}", get(curves_a[key]),
                       get(curves_b[key])) for name, get in CAPACITY_FIGURES]
    only += [f"- capacity of {d} at {t} thread(s): only in {'A' if (d, t) in curves_a else 'B'}"
             for d, t in sorted(curves_a.keys() ^ curves_b.keys())]
    tuning_rows, tuning_only = compare_tuning(a, b)
    lines += tuning_rows
    only += tuning_only
    if only:
        lines += ["", "Not compared:", *only]
    lines += ratio_agreement(a, b)
    return "\n".join(lines) + "\n"


def ratio_agreement(a: Results, b: Results) -> list[str]:
    """Every ratio (to native, to memory) that both runs give with a 95% interval, and whether
    the two intervals overlap: how far a rerun reproduces a run (two runs on one boot should
    agree in 95% of cells), read through the results catalogue. Empty when no ratio has an
    interval on both sides."""
    catalogue = Catalogue({})
    catalogue.add_results("A", a)
    catalogue.add_results("B", b)
    rows = [[mine.server or "", _threads(mine), mine.metric.replace("ratio.", "% of "),
             _ratio_text(mine), _ratio_text(other), "yes" if overlap else "no"]
            for mine, other, overlap in catalogue.agreement("A", "B")]
    if not rows:
        return []
    agree = sum(1 for row in rows if row[-1] == "yes")
    return ["", "## Ratios in both runs", "",
            f"{agree} of {len(rows)} ratios ({100 * agree / len(rows):.0f}%) agree: their 95% "
            "intervals overlap.", "",
            *markdown_table(["server", "threads", "ratio", "A", "B", "agree"], rows)]


def _threads(figure: CatalogueFigure) -> str:
    """The thread count, and the connection count when it differs (as _where)."""
    connections = figure.coordinate("connections")
    if connections in (None, "0", str(figure.threads)):
        return str(figure.threads)
    return f"{figure.threads} ({connections} conn.)"


def _ratio_text(figure: CatalogueFigure) -> str:
    return interval_text(Interval(figure.number or 0.0, figure.low, figure.high, 0), 1.0, 1,
                         "%")
