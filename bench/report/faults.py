"""results.md's "Database faults under load" section (`faults`): per server, a table of its
faults (time to the first SERVFAIL, time to recovery, SERVFAIL and lost queries), the steady
state before them, and faults-<server>.png: answered, SERVFAIL and lost queries and the p99
latency per second through the run, each fault's span shaded."""

from __future__ import annotations

from pathlib import Path

from bench.measure.faults import (
    CHANNEL_CUT,
    KINDS,
    RECOVERED_SHARE,
    SETTLED_SHARE,
    FaultResult,
    Faults,
    ServerFaults,
    describe_fault,
)
from bench.measure.results import Results
from bench.report.comparing import (
    Comparison,
    Figure,
    compare_servers,
    figure_rows,
    one_sided,
    pairs,
)
from bench.report.format import (
    NONE,
    WARN,
    Notes,
    fmt_number,
    legend_or_note,
    markdown_table,
    save_figure,
)
from servers import report_order


def render_faults(results: Results) -> list[str]:
    """The section, or nothing for a file without it (every other command's)."""
    section = results.faults
    if section is None:
        return []
    lines = ["## Database faults under load", ""]
    lines.append(
        f"An open-loop load of {section.qps:,.0f} queries per second for {section.duration_s:g} "
        f"s from {section.dataset} (profile {section.profile}); a query is lost when no "
        f"answer came within {section.timeout_s:g} s. Script: "
        f"{', '.join(f'`{line}`' for line in section.script) or 'none'} (AT:KIND[:SECONDS], "
        f"from the load's start). Queries are counted in the second they were sent; a fault "
        f"is recovered at the end of the first whole second, from the one its action ended "
        f"in, with at least {100 * RECOVERED_SHARE:g}% of its queries answered NOERROR or "
        f"NXDOMAIN; it has settled at the end of the first such second with at least "
        f"{100 * SETTLED_SHARE:g}% of its queries answered within the steady p99 (that of "
        f"the answers before the first fault) (docs/method/faults.md).")
    lines.append("")
    for entry in sorted(section.servers, key=lambda s: report_order(s.server)):
        lines += _server_lines(entry)
    lines += ["What each fault does:", ""]
    scripted = {line.split(":")[1] for line in section.script}
    lines += [f"- `{kind}`: {what}" for kind, what in KINDS.items() if kind in scripted]
    lines.append("")
    return lines


def _server_lines(entry: ServerFaults) -> list[str]:
    lines = [f"### {entry.server}", ""]
    if entry.status != "ok":
        return [*lines, f"FAILED: {entry.error}", ""]
    sent = entry.sent
    lines.append(f"{entry.threads} server thread(s) and as many connections; {sent:,} queries "
                 f"sent; before the first fault {_share(entry.baseline_share)} were answered, "
                 f"their p99 {_ms(entry.steady_p99_us)} ms, and "
                 f"{_share(entry.steady_settled_share)} of those seconds count as settled.")
    lines.append("")
    notes = Notes()
    if entry.baseline_share is not None and entry.baseline_share < RECOVERED_SHARE:
        notes.add(f"{WARN} the steady state before the first fault is below "
                  f"{100 * RECOVERED_SHARE:g}%: the load itself is more than the server "
                  "answers, and no second can count as recovered")
    rows = [_fault_row(fault, notes) for fault in entry.faults]
    lines += markdown_table(["fault", "at (s)", "first SERVFAIL after (s)",
                             "recovered after (s)", "settled after (s)", "sent", "SERVFAIL",
                             "lost", "worst p99 (ms)"], rows)
    lines.append("")
    lines += notes.render()
    if notes.lines:
        lines.append("")
    lines += [f"![{entry.server} through its faults]({plot_name(entry.server)})", ""]
    return lines


def _fault_row(fault: FaultResult, notes: Notes) -> list[str]:
    label = describe_fault(fault)
    said = "; ".join(filter(None, [fault.note, _cache_said(fault)]))
    if said:
        label += f" [{notes.add(f'{describe_fault(fault)}: {said}')}]"
    if fault.error:
        mark = notes.add(f"{describe_fault(fault)}: the fault could not be done: {fault.error}")
        return [f"{label} FAILED [{mark}]", fmt_number(fault.at_s, 1), *[NONE] * 7]
    recovered = fmt_number(fault.recovered_s, 1)
    if not fault.recovered:
        recovered = f"not within {fmt_number(_window(fault), 1)}"
    settled = fmt_number(fault.settled_s, 1)
    if fault.settled_s is None:
        settled = f"not within {fmt_number(_window(fault), 1)}"
    return [label, fmt_number(fault.started_s, 2), fmt_number(fault.first_servfail_s, 2),
            recovered, settled, f"{fault.sent:,}", f"{fault.servfail:,}", f"{fault.lost:,}",
            _ms(fault.worst_p99_us)]


def _cache_said(fault: FaultResult) -> str:
    """What the server's log said its cache did after a channel cut ('' for another
    fault, or one not done)."""
    if fault.kind != CHANNEL_CUT or fault.error:
        return ""
    if fault.bypassed_s is None:
        return "the server's log never said its cache was bypassed"
    back = (f"answering from the cache again {fmt_number(fault.cache_back_s, 2)} s after it"
            if fault.cache_back_s is not None else "not answering from the cache again while "
            "watched")
    return (f"the server's log: cache flushed and bypassed {fmt_number(fault.bypassed_s, 2)} "
            f"s after the cut, {back}")


def _ms(us: float | None) -> str:
    return fmt_number(None if us is None else us / 1000)


def _window(fault: FaultResult) -> float | None:
    if fault.window_end_s is None or fault.started_s is None:
        return None
    return fault.window_end_s - fault.started_s


def _share(value: float | None) -> str:
    return NONE if value is None else f"{100 * value:.2f}%"


def plot_name(server: str) -> str:
    return f"faults-{server}.png"


def render_faults_plots(results: Results, out_dir: Path) -> list[Path]:
    """faults-<server>.png for every server that ran."""
    section = results.faults
    if section is None:
        return []
    return [_plot(entry, section, out_dir) for entry in section.servers
            if entry.status == "ok"]


def _plot(entry: ServerFaults, section: Faults, out_dir: Path) -> Path:
    """Queries per second by outcome (top) and the answers' p99 latency (bottom), every
    fault's span shaded and named."""
    import matplotlib.pyplot as plt

    fig, (counts, latency) = plt.subplots(2, 1, figsize=(10, 6), sharex=True,
                                          gridspec_kw={"height_ratios": [3, 1]})
    # Each second drawn over its whole width: the last one closed at its end.
    x = [s.second for s in entry.seconds] + [len(entry.seconds)]
    for label, values, style in (
            ("answered (NOERROR/NXDOMAIN)", [s.answered for s in entry.seconds], "-"),
            ("SERVFAIL", [s.servfail for s in entry.seconds], "-"),
            ("lost", [s.lost for s in entry.seconds], "-"),
            ("other RCODE", [s.other for s in entry.seconds], ":")):
        if any(values):
            counts.step(x, [*values, values[-1]], where="post", linestyle=style, label=label)
    p99 = [s.p99_us / 1000 if s.p99_us is not None else float("nan") for s in entry.seconds]
    if p99:
        latency.step(x, [*p99, p99[-1]], where="post", label="p99 of the answers")
    for fault in entry.faults:
        if fault.started_s is None or fault.ended_s is None:
            continue
        end = max(fault.ended_s, fault.started_s + 0.2)  # an instant fault stays visible
        for ax in (counts, latency):
            ax.axvspan(fault.started_s, end, color="grey", alpha=0.25)
        counts.annotate(describe_fault(fault), (fault.started_s, 1.0),
                        xycoords=("data", "axes fraction"), fontsize=8, va="top",
                        rotation=90)
    counts.set_ylabel("queries per second")
    count = len(entry.faults)
    counts.set_title(f"{entry.server}: {section.qps:,.0f} QPS offered through {count} "
                     f"fault{'s' if count != 1 else ''}")
    legend_or_note(counts, fontsize=8)
    latency.set_yscale("log")
    latency.set_ylabel("p99 (ms)")
    latency.set_xlabel("seconds from the load's start (queries counted when sent)")
    return save_figure(fig, out_dir / plot_name(entry.server))


# ---------------------------------------------------------------- compare

STEADY: list[Figure[ServerFaults]] = [
    Figure("answered before the first fault (%)",
           lambda s: None if s.baseline_share is None else 100 * s.baseline_share, decimals=2),
    Figure("p99 before the first fault (ms)",
           lambda s: None if s.steady_p99_us is None else s.steady_p99_us / 1000),
]
FAULT: list[Figure[FaultResult]] = [
    Figure("first SERVFAIL after (s)", lambda f: f.first_servfail_s),
    Figure("recovered after (s)", lambda f: f.recovered_s),
    Figure("settled after (s)", lambda f: f.settled_s),
    Figure("SERVFAIL", lambda f: f.servfail, decimals=0),
    Figure("lost", lambda f: f.lost, decimals=0),
    Figure("worst p99 (ms)", lambda f: None if f.worst_p99_us is None
           else f.worst_p99_us / 1000),
]


def compare_faults(a: Results, b: Results) -> Comparison:
    """Servers matched by name, each fault by its place in the script (second, kind and
    length): the steady state before the first fault, then what each fault cost. A fault
    never recovered from shows no time to recovery ("–")."""
    if a.faults is None or b.faults is None:
        return Comparison(only=one_sided("the faults section", a.faults, b.faults))
    return compare_servers(a, b, "faults", a.faults.servers, b.faults.servers,
                           _compare_server_faults)


def _compare_server_faults(server: str, old: ServerFaults, new: ServerFaults,
                           boot: bool) -> Comparison:
    """One server's steady state, then each fault both runs made at the same place."""
    faults, only = pairs(old.faults, new.faults, lambda f: (f.at_s, f.kind, f.seconds),
                         lambda key: f"{server}: {_fault_place(*key)}")
    rows = figure_rows(server, "faults: steady", STEADY, old, new, boot)
    rows += [line for key, fa, fb in faults
             for line in figure_rows(server, _fault_place(*key), FAULT, fa, fb, boot)]
    return Comparison(rows, only)


def _fault_place(at_s: float, kind: str, seconds: float) -> str:
    """"sigstop 5 s at 20 s": a fault where its script put it."""
    return f"{describe_fault(FaultResult(at_s, kind, seconds))} at {at_s:g} s"
