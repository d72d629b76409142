"""The `run --signed` part of results.md and its plot: per server (and thread count) one table
"signed vs unsigned" (throughput, CPU per query, reply size and traffic, latency, what the store
holds and what holding it cost), and signed.png: those figures side by side for every server.

Reply size and traffic are dnsperf's own figures (its "Average packet size" of the responses
it received, times the responses it received per second), not estimates.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.measure.results import Results
from bench.measure.signed_cells import SignedCell
from bench.report.comparing import Comparison, Figure, figure_rows, pairs, same_boot, status_row
from bench.report.format import NONE, fmt_number
from servers import report_order

VARIANTS = ("unsigned", "signed")


def _change(unsigned: float | None, signed: float | None) -> str:
    if unsigned is None or signed is None or not unsigned:
        return NONE
    return f"{100 * (signed - unsigned) / unsigned:+.1f}%"


def _ok(point: SignedCell | None) -> bool:
    return point is not None and point.cell.status == "ok"


def reply_bytes(point: SignedCell) -> float | None:
    """dnsperf's mean response size over the QPS runs, weighted by responses received."""
    runs = [r for r in point.cell.qps_runs if r.queries_completed]
    answered = sum(r.queries_completed for r in runs)
    if not answered:
        return None
    return sum(r.response_bytes * r.queries_completed for r in runs) / answered


def reply_mbits(point: SignedCell) -> float | None:
    """Reply traffic over the QPS runs: bytes dnsperf received per second, in Mbit/s."""
    runs = [r for r in point.cell.qps_runs if r.run_time_s > 0]
    seconds = sum(r.run_time_s for r in runs)
    if not seconds:
        return None
    return sum(r.response_bytes * r.queries_completed for r in runs) * 8 / seconds / 1e6


def _dnsperf_latency_us(point: SignedCell) -> float | None:
    runs = [r for r in point.cell.qps_runs if r.queries_completed]
    answered = sum(r.queries_completed for r in runs)
    if not answered:
        return None
    return sum(r.latency_avg_s * r.queries_completed for r in runs) / answered * 1e6


def _stat(point: SignedCell, which: str, field: str) -> float | None:
    stats = point.cell.latency_loaded if which == "loaded" else point.cell.latency_unloaded
    return getattr(stats, field) if stats is not None else None


def _truncated(point: SignedCell) -> str:
    if not point.replies:
        return NONE
    return f"{point.truncated} of {point.replies}"


# Every figure is one a reader compares between the variants, and between two runs.
ROWS: tuple[Figure[SignedCell], ...] = (
    Figure("QPS (median)", lambda p: p.cell.qps.median, rate=True, decimals=0),
    Figure("CPU us/query server", lambda p: p.cell.cpu_us_per_query.get("server"), decimals=1),
    Figure("CPU us/query database", lambda p: p.cell.cpu_us_per_query.get("db"), decimals=1),
    Figure("reply size (bytes, dnsperf)", reply_bytes, decimals=0),
    Figure("replies (Mbit/s, dnsperf)", reply_mbits, rate=True, decimals=2),
    Figure("mean latency under load (us, dnsperf)", _dnsperf_latency_us, decimals=0),
    Figure("unloaded p50 (us, prober)", lambda p: _stat(p, "unloaded", "p50_us"), decimals=0),
    Figure("unloaded p99 (us)", lambda p: _stat(p, "unloaded", "p99_us"), decimals=0),
    Figure("loaded p99 (us, prober)", lambda p: _stat(p, "loaded", "p99_us"), decimals=0),
    Figure("records held", lambda p: float(p.records) if p.records else None, decimals=0),
    Figure("store on disk (MiB)", lambda p: None if p.store_bytes is None
           else p.store_bytes / 1048576, decimals=1),
    Figure("load (s)", lambda p: p.load_seconds, decimals=2),
)


def _table(pair: dict[str, SignedCell]) -> list[str]:
    header = ["figure", *VARIANTS, "signed vs unsigned"]
    lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|---:|"]
    statuses = {v: None if _ok(pair.get(v)) else _status(pair.get(v)) for v in VARIANTS}
    for figure in ROWS:
        values = {v: figure.get(pair[v]) if statuses[v] is None else None for v in VARIANTS}
        cells = [statuses[v] or fmt_number(values[v], figure.decimals) for v in VARIANTS]
        lines.append(f"| {figure.name} | {cells[0]} | {cells[1]} | "
                     f"{_change(values['unsigned'], values['signed'])} |")
    truncated = [statuses[v] or _truncated(pair[v]) for v in VARIANTS]
    lines.append(f"| UDP replies truncated (check queries) | {truncated[0]} | {truncated[1]} "
                 f"| {NONE} |")
    return lines


def _status(point: SignedCell | None) -> str:
    return "not measured" if point is None else point.cell.status.upper()


def _pairs(results: Results) -> dict[tuple[str, int], dict[str, SignedCell]]:
    pairs: dict[tuple[str, int], dict[str, SignedCell]] = {}
    for point in results.signed:
        pairs.setdefault((point.server, point.cell.threads), {})[point.variant] = point
    return dict(sorted(pairs.items(), key=lambda item: (report_order(item[0][0]), item[0][1])))


def render_signed(results: Results) -> list[str]:
    if not results.signed:
        return []
    meta = results.meta.get("signed", {})
    lines = ["## Signed vs unsigned (run --signed)", "",
             f"The same zones unsigned and signed ({meta.get('algorithm', '?')}, "
             f"{meta.get('chain', '?')}), every query with the DO bit (dnsperf -D: EDNS0 "
             f"advertising {meta.get('dnsperf_edns_payload', '?')} octets; the prober the "
             "same), the same query file for both. QPS, CPU per answered query, reply size "
             "and reply traffic are over the QPS runs; reply size is dnsperf's mean response "
             "size and Mbit/s its received bytes per second. A UDP reply larger than named's "
             "max-udp-size (1232 in BIND 9.18) comes back truncated and dnsperf counts it at "
             "its truncated size without retrying over TCP: the last row counts truncated "
             "replies among the check queries asked the same way. Store on disk: the store's "
             "files right after its load (the zone files for native BIND).", ""]
    reasons = []
    for (server, threads), pair in _pairs(results).items():
        lines += [f"### {server}, {threads} thread{'s' if threads != 1 else ''}", ""]
        lines += _table(pair) + [""]
        reasons += [f"- {server} ({v}, {threads} thread(s)): {p.cell.status.upper()}: "
                    f"{(p.cell.error or 'no reason recorded').splitlines()[0]}"
                    for v, p in pair.items() if not _ok(p)]
    if reasons:
        lines += ["Cells without figures:", "", *reasons, ""]
    return lines


# Panels of signed.png: (title, figure).
PLOTTED: tuple[tuple[str, Callable[[SignedCell], float | None]], ...] = (
    ("queries per second", lambda p: p.cell.qps.median),
    ("server CPU us/query (server + database)",
     lambda p: None if p.cell.cpu_us_per_query.get("server") is None
     else p.cell.cpu_us_per_query["server"] + (p.cell.cpu_us_per_query.get("db") or 0.0)),
    ("reply size (bytes)", reply_bytes),
    ("replies (Mbit/s)", reply_mbits),
)


def render_signed_plot(results: Results, out_dir: Path) -> list[Path]:
    """signed.png: per figure, unsigned and signed bars side by side for every server."""
    pairs = {key: pair for key, pair in _pairs(results).items()
             if any(_ok(p) for p in pair.values())}
    if not pairs:
        return []
    import matplotlib.pyplot as plt

    labels = [server if threads == 1 else f"{server}/{threads}" for server, threads in pairs]
    fig, axes = plt.subplots(2, 2, figsize=(max(9, 1.2 * len(labels) + 4), 8))
    width = 0.4
    for ax, (title, figure) in zip(axes.flat, PLOTTED, strict=True):
        for i, variant in enumerate(VARIANTS):
            xs, heights = [], []
            for x, pair in enumerate(pairs.values()):
                point = pair.get(variant)
                value = figure(point) if point is not None and _ok(point) else None
                if value is not None:
                    xs.append(x + (i - 0.5) * width)
                    heights.append(value)
            ax.bar(xs, heights, width, label=variant,
                   color="tab:blue" if variant == "signed" else "0.7")
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Signed vs unsigned, every query with the DO bit")
    fig.tight_layout()
    path = out_dir / "signed.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


# ---------------------------------------------------------------- compare

TRUNCATED: Figure[SignedCell] = Figure(
    "UDP replies truncated (check queries)", lambda p: p.truncated if p.replies else None,
    decimals=0)


def compare_signed(a: Results, b: Results) -> Comparison:
    """Cells matched by (server, threads, variant), each with the figures of its table."""
    matched, only = pairs(a.signed, b.signed, lambda p: p.key,
                          lambda k: f"{k[0]} {k[2]} at {k[1]} thread(s)")
    boot = same_boot(a, b)
    rows: list[str] = []
    for (server, threads, variant), old, new in matched:
        place = f"{variant}, {threads} thread(s)"
        if not (_ok(old) and _ok(new)):
            rows.append(status_row(server, place, old.cell.status, new.cell.status))
        else:
            rows += figure_rows(server, place, [*ROWS, TRUNCATED], old, new, boot)
    return Comparison(rows, only)
