"""The capacity sections of results.md and their plots (bench/measure/capacity.py's curves).

Tables: one row per server and thread count (breaking points, latency at fixed shares of each
server's own breaking point and at one absolute rate, reply traffic, resperf's maximum); then
seed 001's layout (NLnet Labs, ../shared/seeds/001_f1f5b6aa78e65a04.txt) for each server: the
offered rate, the share answered and the rate as a multiple of native BIND's breaking point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.measure.capacity import SLOWEST, STRICT, UP_TO_THE_TASK, Curve, Step
from bench.measure.results import Results
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


def render_capacity(results: Results) -> list[str]:
    if not results.capacity:
        return []
    common = results.meta.get("capacity", {}).get("common_rate_qps")
    lines = ["## Capacity under offered load", "",
             "dnsperf offers fixed rates (`-Q`) in steps of each server's closed-loop maximum "
             "(the QPS of `run`); the prober runs beside it (paced, part of the offered load) "
             "and every query it lost counts at the timeout (1 s) in every percentile. "
             f"**Breaking point**: the highest offered rate with at least {UP_TO_THE_TASK:.0%} "
             f"of queries answered (seed 001's criterion), and with at least {STRICT:.0%}. "
             "p99 at 50% / 90% load: the step nearest to that share of the server's own "
             "breaking point. Mbit/s: reply traffic at the breaking point (seed 002). resperf: "
             "its own maximum throughput over one ramp to 1.5x the closed-loop maximum "
             "(seed 004). A step whose responses in some second exceeded its target by more "
             "than 10% is marked burst (dnsperf 2.10's limiter catching up after a stall).", ""]
    header = ["server", "threads", "closed loop (QPS)", "breaking point 5% (QPS)",
              "% of closed loop", "breaking point 1% (QPS)", "p99 at 50% (us)",
              "p99 at 90% (us)", f"p50 / p99 at {fmt_number(common, 0)} QPS (us)",
              "Mbit/s at breaking point", "resperf max (QPS)", "bursts"]
    lines += ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    notes = []
    for curve in _curves(results):
        bp = curve.breaking_point()
        closed = curve.closed_loop_qps
        share = None if bp is None or not closed else 100 * bp / closed
        at_bp = curve.step_near(bp)
        common_step = curve.common_rate_step
        ramp = curve.resperf
        bursts = sum(s.burst for s in curve.steps)
        row = [curve.server, str(curve.threads), fmt_number(curve.closed_loop_qps, 0),
               fmt_number(bp, 0),
               fmt_number(share, 1), fmt_number(curve.breaking_point(STRICT), 0),
               _p(curve.step_near(None if bp is None else 0.5 * bp), "p99"),
               _p(curve.step_near(None if bp is None else 0.9 * bp), "p99"),
               NONE if common_step is None else
               f"{_p(common_step, 'p50')} / {_p(common_step, 'p99')}",
               NONE if at_bp is None else fmt_number(at_bp.reply_mbit_s, 1),
               NONE if ramp is None else fmt_number(ramp.max_qps, 0), str(bursts)]
        lines.append("| " + " | ".join(row) + " |")
        if share is not None and not 90 <= share <= 110:
            notes.append(f"- {curve.server} ({curve.threads} thread(s)): its breaking point "
                         f"is {share:.0f}% of its closed-loop maximum: "
                         + ("it answers fewer queries when they arrive on their own schedule "
                            "than when each waits for an answer (a curve that collapses "
                            "before its closed-loop maximum)." if share < 90 else
                            "it carried more offered load than the closed loop put on it."))
        if curve.error:
            notes.append(f"- {curve.server} ({curve.threads} thread(s)): {curve.error}")
    lines += ["", *notes, ""] if notes else [""]
    return lines + render_seed_001_tables(results)


def render_seed_001_tables(results: Results) -> list[str]:
    """Per server: offered rate, % answered, rate relative to native's breaking point."""
    lines = ["## Offered load against answered share (seed 001's layout)", ""]
    for curve in _curves(results):
        native = _reference_breaking_point(results, curve.threads)
        lines += [f"### {curve.server}, {curve.threads} thread(s)", "",
                  "| offered (QPS) | % of closed loop | % answered | x native's breaking "
                  "point | p50 (us) | p99 (us) | p99.9 (us) | UDP receive-queue drops |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for step in curve.steps:
            relative = NONE if not native else f"{step.offered_qps / native:.2f}"
            lines.append(f"| {fmt_number(step.offered_qps, 0)} | {fmt_number(step.percent, 0)} | "
                         f"{100 * step.answered_fraction:.1f} | {relative} | "
                         f"{_p(step, 'p50')} | {_p(step, 'p99')} | {_p(step, 'p99.9')} | "
                         f"{fmt_number(step.udp_rcvbuf_errors, 0)} |")
        lines.append("")
    return lines


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
        if curve.steps:
            ax.plot([s.offered_qps for s in curve.steps],
                    [100 * s.answered_fraction for s in curve.steps], marker="o",
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
        steps = [s for s in curve.steps if s.latency_us.get("p99") is not None]
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
