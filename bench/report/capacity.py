"""The capacity sections of results.md and their plots (bench/measure/capacity.py's curves).

Tables: one row per server and thread count (breaking points, reply traffic, resperf's
maximum, the receive buffer); open-loop latency at fixed shares of each server's own breaking
point and at one absolute rate, with the prober's floor; then seed 001's layout (NLnet Labs,
../shared/seeds/001_f1f5b6aa78e65a04.txt) for each server and offered load: the share
answered with its spread over the repeats, "not offered" where the load generator fell short,
the drops per socket, and the rate as a multiple of native BIND's breaking point.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.measure.capacity import (
    LATENCY_SHARES,
    OFFERED_SHARE,
    SLOWEST,
    STEP_REPEATS,
    STRICT,
    UP_TO_THE_TASK,
    BreakingPoint,
    Curve,
    Level,
    Step,
)
from bench.measure.results import Results
from bench.report.comparing import Comparison, Figure, figure_rows, pairs, same_boot
from bench.report.format import NONE, fmt_number, legend_or_note, save_figure
from servers import REFERENCE, report_order


def _curves(results: Results) -> list[Curve]:
    return sorted(results.capacity, key=lambda c: (report_order(c.server), c.threads))


def _p(step: Step | None, key: str) -> str:
    return NONE if step is None else fmt_number(step.latency_us.get(key), 0)


def _reference_breaking_point(results: Results, threads: int) -> float | None:
    for curve in results.capacity:
        if curve.server == REFERENCE and curve.threads == threads:
            return curve.breaking_point()
    return None


def bracket_text(point: BreakingPoint) -> str:
    """The breaking point's bracket in offered QPS, "held–failed"; ">= N" when the walk
    ended without a failing load (the load generator's limit, or every step held): the
    server's own is at least that; "< N" when the lowest load failed."""
    if point.qps is None:
        return NONE if point.failed_qps is None else f"< {fmt_number(point.failed_qps, 0)}"
    if point.failed_qps is None:
        return f">= {fmt_number(point.qps, 0)}"
    return f"{fmt_number(point.qps, 0)}–{fmt_number(point.failed_qps, 0)}"


def _latencies(step: Step | None) -> str:
    if step is None:
        return NONE
    return " / ".join(_p(step, key) for key in ("p50", "p99", "p99.9"))


def _receive_buffer(curve: Curve) -> str:
    record = curve.receive_buffer or {}
    option, size = record.get("option"), record.get("bytes")
    if option is None:
        return "no setting"
    return f"{option} {fmt_number(size, 0)}"


def render_capacity(results: Results) -> list[str]:
    if not results.capacity:
        return []
    common = results.meta.get("capacity", {}).get("common_rate_qps")
    lines = ["## Capacity under offered load", "",
             "dnsperf offers fixed rates (`-Q`) in steps of each server's closed-loop maximum "
             f"(the QPS of `run`), each step {STEP_REPEATS} times (up the steps, then down); "
             "the prober runs beside it (open loop, part of the offered load) and every query "
             "it lost counts at the timeout (1 s) in every percentile. "
             "Rates are queries over the step's nominal length (dnsperf's `-l`, the "
             "prober's schedule), not over dnsperf's run time, which also holds its wait for "
             "the last answers. **Breaking point**: a bracket in offered QPS, held–failed: "
             "the last step that held and the first whose median answered share is under "
             f"{UP_TO_THE_TASK:.0%} (seed 001's criterion), and under {STRICT:.0%}; a higher "
             "step that held after a failing one does not count. A step that offered under "
             f"{OFFERED_SHARE:.0%} of its target is **not offered** (the load generator's "
             "limit, not the server's) and ends the walk, printed \">= N\" as is a walk whose "
             "every step held, unless the server dropped queries at its own sockets in it: "
             "then it is judged on what it answered of what was offered, like any other. "
             "\"< N\": the lowest step failed. Mbit/s: reply traffic at the bracket's lower "
             "end (seed 002). resperf: its own maximum throughput over one "
             "ramp to 1.5x the closed-loop maximum (seed 004). A step whose responses in some "
             "second exceeded its target by more than 10% is counted in bursts. Receive "
             "buffer: the server's UDP receive-buffer setting (sized to the kernel's "
             "net.core.rmem_max); a server with no such setting keeps the kernel's default.",
             ""]
    header = ["server", "threads", "closed loop (QPS)", "breaking point 5% (QPS)",
              "% of closed loop", "breaking point 1% (QPS)", "Mbit/s at breaking point",
              "resperf max (QPS)", "bursts", "receive buffer"]
    lines += ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 2) + "---|"]
    notes = []
    for curve in _curves(results):
        point = curve.breaking()
        bp = point.qps
        closed = curve.closed_loop_qps
        share = None if bp is None or not closed else 100 * bp / closed
        at_bp = curve.step_near(bp)
        ramp = curve.resperf
        bursts = sum(s.burst for s in curve.steps)
        row = [curve.server, str(curve.threads), fmt_number(curve.closed_loop_qps, 0),
               bracket_text(point), fmt_number(share, 1), bracket_text(curve.breaking(STRICT)),
               NONE if at_bp is None else fmt_number(at_bp.reply_mbit_s, 1),
               NONE if ramp is None else fmt_number(ramp.max_qps, 0), str(bursts),
               _receive_buffer(curve)]
        lines.append("| " + " | ".join(row) + " |")
        note = breaking_note(curve, point, share)
        if note is not None:
            notes.append(note)
        if curve.error:
            notes.append(f"- {curve.server} ({curve.threads} thread(s)): {curve.error}")
    lines += ["", *notes, ""] if notes else [""]
    return (lines + render_loaded_latency(results, common) + render_seed_001_tables(results))


def breaking_note(curve: Curve, point: BreakingPoint, share: float | None) -> str | None:
    """What a reader must know of a breaking point: a lower bound, none at all, or one far
    from the closed-loop maximum."""
    who = f"- {curve.server} ({curve.threads} thread(s)): "
    if point.ended_by == "not offered":
        if point.qps is None:
            return who + ("its first step was not offered (the load generator fell short): "
                          "no breaking point was measured.")
        return who + ("the step after its breaking point was not offered (the load generator "
                      "fell short): the server's own breaking point is at least this.")
    if share is None or 90 <= share <= 110:
        return None
    return who + (f"its breaking point is {share:.0f}% of its closed-loop maximum: "
                  + ("it answers fewer queries when they arrive on their own schedule than "
                     "when each waits for an answer (a curve that collapses before its "
                     "closed-loop maximum)." if share < 90 else
                     "it carried more offered load than the closed loop put on it."))


def render_loaded_latency(results: Results, common: float | None) -> list[str]:
    """Open-loop latency at fixed offered loads, with the run's prober floor beside it."""
    floor = results.prober_floor
    floor_text = NONE if floor is None else (f"{fmt_number(floor.p50_us, 0)} / "
                                             f"{fmt_number(floor.p99_us, 0)}")
    shares = " and ".join(f"{100 * s:g}%" for s in LATENCY_SHARES)
    lines = ["### Latency at fixed offered loads (open loop)", "",
             f"p50 / p99 / p99.9 in us at {shares} of each server's own 5% breaking point "
             f"and at {fmt_number(common, 0)} queries per second for every server: dnsperf "
             "offers the load (`-Q`) and the prober sends on a fixed schedule beside it, "
             "whether or not earlier probes were answered; each point from at least the "
             "profile's probe count, lost probes at the 1 s timeout. The prober's own floor "
             f"(p50 / p99 against an echo responder on loopback, this run): {floor_text} us.",
             ""]
    header = ["server", "threads",
              *[f"at {100 * s:g}% of breaking point (QPS)" for s in LATENCY_SHARES],
              *[f"p50 / p99 / p99.9 at {100 * s:g}%" for s in LATENCY_SHARES],
              f"p50 / p99 / p99.9 at {fmt_number(common, 0)} QPS", "probes per point"]
    lines += ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for curve in _curves(results):
        points = {p.share: p.step for p in curve.latency_points}
        steps = [points.get(s) for s in LATENCY_SHARES]
        probes = [s.probes for s in (*steps, curve.common_rate_step) if s is not None]
        lines.append("| " + " | ".join([
            curve.server, str(curve.threads),
            *[NONE if s is None else fmt_number(s.offered_qps, 0) for s in steps],
            *[_latencies(s) for s in steps], _latencies(curve.common_rate_step),
            NONE if not probes else fmt_number(min(probes), 0)]) + " |")
    return [*lines, ""]


def render_seed_001_tables(results: Results) -> list[str]:
    """Per server and offered load: the repeats' median answered share and its spread, the
    outcome, where datagrams were dropped, and the rate relative to native's breaking
    point."""
    lines = ["## Offered load against answered share (seed 001's layout)", "",
             "Per offered load: the median of its repeats (lowest-highest answered share in "
             "brackets); drops are the datagrams the kernel dropped for full receive queues, "
             "summed over the repeats, at the server's sockets, at the load generator's "
             "(dnsperf's) and elsewhere (the rest of the machine-wide count: the prober's "
             "one-query sockets, other processes).", ""]
    for curve in _curves(results):
        native = _reference_breaking_point(results, curve.threads)
        lines += [f"### {curve.server}, {curve.threads} thread(s)", "",
                  "| % of closed loop | target (QPS) | offered (QPS) | % answered | outcome | "
                  "x native's breaking point | p50 (us) | p99 (us) | p99.9 (us) | drops: "
                  "server / load generator / elsewhere |",
                  "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
        for level in curve.levels():
            low, high = level.spread
            relative = NONE if not native else f"{level.offered_qps / native:.2f}"
            middle = sorted(level.steps, key=lambda s: s.answered_fraction)[
                (len(level.steps) - 1) // 2]
            lines.append(
                f"| {fmt_number(level.percent, 0)} | {fmt_number(level.target_qps, 0)} | "
                f"{fmt_number(level.offered_qps, 0)} | {100 * level.answered_fraction:.1f} "
                f"({100 * low:.1f}-{100 * high:.1f}) | {_outcome(level)} | {relative} | "
                f"{_p(middle, 'p50')} | {_p(middle, 'p99')} | {_p(middle, 'p99.9')} | "
                f"{_drops(level.steps)} |")
        lines.append("")
    return lines


def _outcome(level: Level) -> str:
    """The load's outcome; one judged although not all of it was offered (the server
    dropped queries at its sockets) says how much was."""
    outcome = level.outcome()
    if level.offered or outcome == "not offered":
        return outcome
    return f"{outcome} (offered {100 * level.offered_qps / level.target_qps:.0f}%)"


def _drops(steps: list[Step]) -> str:
    split = [s.socket_drops for s in steps]
    if any(d is None for d in split):
        machine = [s.udp_rcvbuf_errors for s in steps]
        return NONE if any(m is None for m in machine) else \
            f"{fmt_number(sum(m or 0 for m in machine), 0)} (machine-wide only)"
    elsewhere = [d.elsewhere for d in split if d is not None]
    return (f"{fmt_number(sum(d.server for d in split if d is not None), 0)} / "
            f"{fmt_number(sum(d.load_generator for d in split if d is not None), 0)} / "
            + (NONE if None in elsewhere else fmt_number(sum(e or 0 for e in elsewhere), 0)))


# ---------------------------------------------------------------- plots

def render_capacity_plots(results: Results, out_dir: Path) -> list[Path]:
    if not results.capacity:
        return []
    return [_plot_answered(results, out_dir / "capacity-answered.png"),
            _plot_latency(results, out_dir / "capacity-latency.png"),
            _plot_resperf(results, out_dir / "capacity-resperf.png"),
            _plot_slowest(results, out_dir / "capacity-percentiles.png")]


def _label(curve: Curve) -> str:
    return f"{curve.server} ({curve.threads}t)"


def _figure() -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(8, 5))


def _finish(fig: Any, ax: Any, path: Path) -> Path:
    legend_or_note(ax, fontsize=8)
    return save_figure(fig, path)


def _plot_answered(results: Results, path: Path) -> Path:
    fig, ax = _figure()
    for curve in _curves(results):
        levels = curve.levels()
        if levels:
            ax.plot([v.offered_qps for v in levels],
                    [100 * v.answered_fraction for v in levels], marker="o",
                    label=_label(curve))
    ax.axhline(100 * UP_TO_THE_TASK, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("offered queries per second")
    ax.set_ylabel("% answered")
    ax.set_title("Answered share against offered load")
    return _finish(fig, ax, path)


def _plot_latency(results: Results, path: Path) -> Path:
    fig, ax = _figure()
    for curve in _curves(results):
        steps = sorted((s for s in curve.steps if s.latency_us.get("p99") is not None),
                       key=lambda s: s.offered_qps)
        if not steps:
            continue
        line = ax.plot([s.offered_qps for s in steps], [s.latency_us["p99"] for s in steps],
                       marker="o", label=f"{_label(curve)} p99")[0]
        ax.plot([s.offered_qps for s in steps], [s.latency_us["p50"] for s in steps],
                linestyle="--", color=line.get_color(), label=f"{_label(curve)} p50")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered queries per second")
    ax.set_ylabel("latency (us); a lost query counts as the 1 s timeout")
    ax.set_title("Latency against offered load")
    return _finish(fig, ax, path)


def _plot_resperf(results: Results, path: Path) -> Path:
    fig, ax = _figure()
    for curve in _curves(results):
        if curve.resperf is not None and curve.resperf.ramp:
            ax.plot([p.target_qps for p in curve.resperf.ramp],
                    [p.responses_qps for p in curve.resperf.ramp], label=_label(curve))
    ax.set_xlabel("resperf's offered queries per second (ramp)")
    ax.set_ylabel("responses per second")
    ax.set_title("resperf ramp")
    return _finish(fig, ax, path)


def _plot_slowest(results: Results, path: Path) -> Path:
    """Latency against 'slowest percentile' at each server's breaking point, log axes."""
    fig, ax = _figure()
    for curve in _curves(results):
        step = curve.step_near(curve.breaking_point())
        if step is None:
            continue
        points = [(p, step.slowest_us.get(f"{p:g}")) for p in SLOWEST]
        points = [(p, v) for p, v in points if v is not None]
        if points:
            ax.plot([p for p, _ in points], [v for _, v in points], marker="o",
                    label=f"{_label(curve)} at {step.offered_qps:,.0f} QPS")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("slowest percentile (%)")
    ax.set_ylabel("latency (us)")
    ax.set_title("Latency of the slowest queries at the breaking point")
    return _finish(fig, ax, path)


# ---------------------------------------------------------------- compare

def _p99_near(share: float) -> Callable[[Curve], float | None]:
    """p99 of the step nearest `share` of the curve's 95% breaking point."""
    def figure(curve: Curve) -> float | None:
        bp = curve.breaking_point()
        step = curve.step_near(None if bp is None else share * bp)
        return None if step is None else step.latency_us.get("p99")
    return figure


FIGURES: list[Figure[Curve]] = [
    Figure("capacity: closed-loop QPS", lambda c: c.closed_loop_qps, rate=True),
    Figure("capacity: breaking point 5% (QPS)", lambda c: c.breaking_point(UP_TO_THE_TASK),
           rate=True),
    Figure("capacity: breaking point 1% (QPS)", lambda c: c.breaking_point(STRICT),
           rate=True),
    Figure("capacity: p99 at 50% load (us)", _p99_near(0.5)),
    Figure("capacity: p99 at 90% load (us)", _p99_near(0.9)),
    Figure("capacity: resperf max (QPS)",
           lambda c: None if c.resperf is None else c.resperf.max_qps, rate=True),
]


def compare_capacity(a: Results, b: Results) -> Comparison:
    """Curves matched by (server, threads)."""
    matched, only = pairs(a.capacity, b.capacity, lambda c: (c.server, c.threads),
                          lambda k: f"capacity of {k[0]} at {k[1]} thread(s)")
    boot = same_boot(a, b)
    rows = [line for (server, threads), old, new in matched
            for line in figure_rows(server, threads, FIGURES, old, new, boot)]
    return Comparison(rows, only)
