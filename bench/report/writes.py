"""results.md's "Reads while the store is written" section (`writes`): per server, a table of
its write-rate steps (reads answered per second, loss, read p50/p99/p99.9, writes per second
achieved, the visibility delay of sampled writes, the CPU of the database, the DNS server
and the writer thread, and the server side's CPU per read; in runs with the staleness check,
the sampled writes answered stale past its bound), each figure a median
over the repeats with its 95% interval; writes-reads.png (read p99 and reads answered against
the write rate, every server) and writes-visibility.png (the visibility delays' distribution
per server)."""

from __future__ import annotations

from pathlib import Path

from bench.measure.capacity import UP_TO_THE_TASK
from bench.measure.results import Results
from bench.measure.stats import Interval
from bench.measure.writes import (
    CONFIRM_ASKS,
    VIA_UPDATE,
    VISIBLE_TIMEOUT_S,
    ServerWrites,
    Step,
    Writes,
    rate_text,
    read_split,
)
from bench.report.comparing import (
    Comparison,
    Figure,
    compare_servers,
    figure_rows,
    one_sided,
    pairs,
    scaled,
)
from bench.report.format import NONE, Notes, fmt_number, legend_or_note, markdown_table, save_figure
from bench.report.run import interval_text
from bench.report.style import server_style
from servers import report_order

COLUMNS = ["writes offered", "writes/s achieved", "reads answered/s", "read loss",
           "read p50 (ms)", "read p99 (ms)", "read p99.9 (ms)", "visible p50 (ms)",
           "visible p99 (ms)", "visible max (ms)", "sampled", "database CPU (% of a core)",
           "server CPU (%)", "writer CPU (%)", "server + database CPU per read (us)"]
# The staleness check's column, in runs that made it (older files render as they did).
STALE_COLUMN = "stale past the bound: writes (answers)"


def render_writes(results: Results) -> list[str]:
    """The section, or nothing for a file without it."""
    section = results.writes
    if section is None:
        return []
    title = ("Reads while RFC 2136 updates run" if section.via == VIA_UPDATE else
             "Reads while the store is written")
    lines = [f"## {title}", ""]
    how = ("sends RFC 2136 UPDATE messages (one a change, over TCP) to the server, which "
           "writes its store itself," if section.via == VIA_UPDATE else
           "with its own connection writes into the store")
    kinds = ("cycling through add, change and delete of a record" if section.via == VIA_UPDATE
             else "one transaction a change, cycling through add, change and delete of a "
                  "record and add and delete of a zone")
    lines.append(
        f"Reads offered open-loop at a fixed rate from {section.dataset} (profile "
        f"{section.profile}) while a writer {how} at each step's rate (ceiling: as fast as it "
        f"goes), {section.step_s:g} s a step, {section.repeats} repeat(s), steps in "
        f"alternating order; {kinds}. "
        "Each figure is the median over the repeats with its 95% interval (none under 6 "
        "repeats); a write's visibility is from its commit to the first answer that shows "
        "it, every k-th write sampled, pooled over the repeats (docs/method/writes.md).")
    if section.stale_bound_ms is not None:
        lines.append("")
        lines.append(
            f"Staleness: every answer the sampler got (and {CONFIRM_ASKS} more after the first "
            f"that showed its write) is held to a bound of {section.stale_bound_ms:g} ms, the "
            "same for every server: an answer that misses a write committed more than that "
            "before its query was sent is stale past the bound, and so is the write. The "
            f"column {STALE_COLUMN!r} counts them, over the repeats.")
    lines.append("")
    for entry in sorted(section.servers, key=lambda s: report_order(s.server)):
        lines += render_server(entry, staleness=section.stale_bound_ms is not None)
    return lines


def render_server(entry: ServerWrites, *, staleness: bool) -> list[str]:
    """One server's part of the section: its reads asked (and sent, where the prober fell
    short), its table of steps and its notes."""
    lines = [f"### {entry.server}", ""]
    if entry.status == "n/a":
        return [*lines, f"n/a: {entry.error}", ""]
    if entry.status != "ok":
        return [*lines, f"FAILED: {entry.error}", ""]
    lines.append(f"Reads offered: {entry.read_qps:,.0f} per second{_read_split(entry)}."
                 f"{_prober_short(entry)}")
    lines.append("")
    notes = Notes()
    steps = entry.steps()
    columns = [*COLUMNS, STALE_COLUMN] if staleness else COLUMNS
    rows = [[*_row(step, notes), *([_stale(step)] if staleness else [])] for step in steps]
    lines += markdown_table(columns, rows)
    repeats = {s.qps.n for s in steps if s.qps is not None}
    if any(s.qps is not None and s.qps.low is None for s in steps):
        notes.add(f"{', '.join(map(str, sorted(repeats)))} repeat(s) a step: medians without "
                  "a 95% interval (it needs 6)")
    lines.append("")
    if entry.checked:
        verdict = (f"all {entry.checked} answers the same" if not entry.differing else
                   f"{len(entry.differing)} of {entry.checked} answers differ")
        lines.append(f"After the run, every changed name asked of it and of native BIND given "
                     f"the same changes: {verdict}.")
        lines += [f"- {line}" for line in entry.differing[:10]]
        lines.append("")
    lines += notes.render()
    if notes.lines:
        lines.append("")
    return lines


def _read_split(entry: ServerWrites) -> str:
    """Who sent the reads, when dnsperf offered some beside the prober."""
    if not entry.bulk_reads():
        return ""
    probing, _ = read_split(entry.read_qps)
    return (f" (the prober {probing:,.0f} of them, every one recorded: the latency columns are "
            "its; dnsperf -Q the rest, its answers and losses counted with the prober's)")


def _prober_short(entry: ServerWrites) -> str:
    """What the load generators sent when they fell short of the reads asked (a load
    generator's row says so); "" when they kept up."""
    sent = entry.reads_sent()
    if sent is None or not entry.prober_short():
        return ""
    who = "The prober and dnsperf" if entry.bulk_reads() else "The prober"
    short = (f" **{who} sent {sent:,.0f} per second** ({100 * sent / entry.read_qps:.0f}% of "
             "it, median over the steps' runs)")
    lost = entry.read_loss()
    if lost is not None and lost > 1 - UP_TO_THE_TASK:
        return (f"{short}, and the server lost {100 * lost:.0f}% of them (median): past its "
                "breaking point beside the writer and the sampler, it set the pace too, not "
                "the load generators alone.")
    return (f"{short}: the load generator's limit, not the server's; the reads answered "
            "below are its pace.")


def _row(step: Step, notes: Notes) -> list[str]:
    offered = rate_text(step.rate)
    if step.write_errors:
        offered += f" [{notes.add(f'{offered}: {step.write_errors} writes failed')}]"
    if step.not_seen:
        notes.add(f"{rate_text(step.rate)}: {step.not_seen} sampled writes not seen within "
                  f"{VISIBLE_TIMEOUT_S:g} s")
    return [offered, _interval(step.write_rate, decimals=1), _interval(step.qps),
            _interval(step.loss, scale=100, decimals=2, unit="%"),
            _interval(step.p50_us, scale=1e-3, decimals=2),
            _interval(step.p99_us, scale=1e-3, decimals=2),
            _interval(step.p999_us, scale=1e-3, decimals=2),
            fmt_number(step.visible_p50_ms, 1), fmt_number(step.visible_p99_ms, 1),
            fmt_number(step.visible_max_ms, 1),
            f"{step.sampled}" + (f" (+{step.skipped} skipped)" if step.skipped else ""),
            _interval(step.db_cpu_share, scale=100, decimals=0),
            _interval(step.server_cpu_share, scale=100, decimals=0),
            _interval(step.writer_cpu_share, scale=100, decimals=0),
            _interval(step.cpu_us_per_read, decimals=0)]


def _stale(step: Step) -> str:
    """Sampled writes answered stale past the bound, and the stale answers, of all checked."""
    return (f"{step.stale_writes} of {step.sampled + step.not_seen} ({step.stale_answers} of "
            f"{step.answers_checked:,})")


def _interval(value: Interval | None, scale: float = 1.0, decimals: int = 0,
              unit: str = "") -> str:
    """The median with its interval; without one (under 6 repeats: a note says so) the
    median alone."""
    if value is None:
        return NONE
    if value.low is None:
        return fmt_number(scale * value.estimate, decimals) + unit
    return interval_text(value, scale, decimals, unit)


def render_writes_plots(results: Results, out_dir: Path) -> list[Path]:
    section = results.writes
    if section is None or not any(s.status == "ok" for s in section.servers):
        return []
    return [_reads_plot(section, out_dir), _visibility_plot(section, out_dir)]


def _x(step: Step) -> float:
    """Where a step sits on the write-rate axis (symmetric log: 0 has its place): the rate
    its writer achieved."""
    if step.rate == 0 or step.write_rate is None:
        return 0.0
    return step.write_rate.estimate


def _reads_plot(section: Writes, out_dir: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, (p99, qps) = plt.subplots(1, 2, figsize=(11, 4.5))
    for entry in section.servers:
        if entry.status != "ok":
            continue
        steps = sorted(entry.steps(), key=_x)
        x = [_x(s) for s in steps]
        style = server_style(entry.server)
        p99.plot(x, [s.p99_us.estimate / 1000 if s.p99_us else float("nan") for s in steps],
                 **style)
        qps.plot(x, [s.qps.estimate if s.qps else float("nan") for s in steps], **style)
    for ax, label in ((p99, "read p99 (ms)"), (qps, "reads answered per second")):
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("writes per second achieved")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        legend_or_note(ax, fontsize=8)
    fig.suptitle("Reads while the store is written (medians over the repeats)")
    return save_figure(fig, out_dir / "writes-reads.png")


def _visibility_plot(section: Writes, out_dir: Path) -> Path:
    """Each server's visibility delays, every step pooled, as an empirical CDF."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for entry in section.servers:
        delays = sorted(ms for run in entry.runs for ms in run.visibility_ms)
        if entry.status != "ok" or not delays:
            continue
        style = {**server_style(entry.server), "marker": None}
        ax.step(delays, [(i + 1) / len(delays) for i in range(len(delays))], where="post",
                **style)
    ax.set_xscale("log")
    ax.set_xlabel("commit to first answer showing the write (ms)")
    ax.set_ylabel("share of sampled writes")
    ax.grid(True, alpha=0.3)
    legend_or_note(ax, fontsize=8)
    return save_figure(fig, out_dir / "writes-visibility.png")


# ---------------------------------------------------------------- compare

STEP: list[Figure[Step]] = [
    Figure("writes/s achieved", lambda s: s.write_rate, rate=True, decimals=1),
    Figure("reads answered/s", lambda s: s.qps, rate=True),
    Figure("read loss (%)", lambda s: scaled(s.loss, 100), decimals=2),
    Figure("read p50 (ms)", lambda s: scaled(s.p50_us, 1e-3), decimals=2),
    Figure("read p99 (ms)", lambda s: scaled(s.p99_us, 1e-3), decimals=2),
    Figure("read p99.9 (ms)", lambda s: scaled(s.p999_us, 1e-3), decimals=2),
    Figure("visible p50 (ms)", lambda s: s.visible_p50_ms, decimals=1),
    Figure("visible p99 (ms)", lambda s: s.visible_p99_ms, decimals=1),
    Figure("visible max (ms)", lambda s: s.visible_max_ms, decimals=1),
    Figure("database CPU (% of a core)", lambda s: scaled(s.db_cpu_share, 100), decimals=0),
    Figure("server CPU (%)", lambda s: scaled(s.server_cpu_share, 100), decimals=0),
    Figure("writer CPU (%)", lambda s: scaled(s.writer_cpu_share, 100), decimals=0),
    Figure("server + database CPU per read (us)", lambda s: s.cpu_us_per_read, decimals=0),
]


def compare_writes(a: Results, b: Results) -> Comparison:
    """Servers matched by name, their steps by write rate offered, when both runs wrote the
    same way (into the store, or by RFC 2136 updates) at the same read rate: each figure the
    median over the repeats, undecided where both 95% intervals overlap."""
    if a.writes is None or b.writes is None:
        return Comparison(only=one_sided("the writes section", a.writes, b.writes))
    if a.writes.via != b.writes.via:
        return Comparison(only=[f"- writes: A wrote via {a.writes.via}, B via {b.writes.via}: "
                                "not compared"])
    return compare_servers(a, b, "writes", a.writes.servers, b.writes.servers,
                           _compare_server_writes)


def _compare_server_writes(server: str, old: ServerWrites, new: ServerWrites,
                           boot: bool) -> Comparison:
    """One server's steps matched by write rate, when both read at the same rate."""
    if old.read_qps != new.read_qps:
        return Comparison(only=[f"- writes of {server}: reads offered at {old.read_qps:,.0f}/s "
                                f"in A, {new.read_qps:,.0f}/s in B: not compared"])
    steps, only = pairs(old.steps(), new.steps(), lambda s: s.rate,
                        lambda rate: f"{server} writing {rate_text(rate)}")
    rows = [line for rate, sa, sb in steps
            for line in figure_rows(server, f"writes {rate_text(rate)}", STEP, sa, sb, boot)]
    return Comparison(rows, only)
