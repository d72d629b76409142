"""results.md's "RFC 2136 dynamic updates" section (`updates`): records changed per second and
messages per second by records per message, with and without TSIG, per server, with their
95% intervals, ratios to native BIND and CPU per record; the checks after the rounds; and
updates.png, updates/s against records per message per server."""

from __future__ import annotations

from pathlib import Path

from bench.measure.results import Results
from bench.measure.stats import Interval
from bench.measure.updates import SENDER_BOUND_SHARE, ServerCheck, UpdateCell, Updates
from bench.report.comparing import (
    Comparison,
    Figure,
    figure_rows,
    one_sided,
    pairs,
    same_boot,
    scaled,
    status_row,
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
from bench.report.run import interval_text
from bench.report.style import server_style
from bench.verify.compare import UNEXPLAINED
from servers import REFERENCE, report_order

PLOT = "updates.png"


def render_updates(results: Results) -> list[str]:
    """The section, or nothing for a file without it."""
    section = results.updates
    if section is None:
        return []
    lines = ["## RFC 2136 dynamic updates", ""]
    lines.append(
        f"{section.senders} concurrent senders over TCP; each repeat adds {section.records:,} "
        f"new names (one A record each) in messages of N records, then deletes them: "
        f"records/s = records changed (added and deleted) over the seconds of both phases. "
        f"Without TSIG: zone `{section.open_zone}` (from loopback, no key); with TSIG "
        f"(hmac-sha256): zone `{section.keyed_zone}` (only with the run's key). "
        f"{section.rounds_done} round(s), every cell once a round in ABBA order; median "
        f"[95% interval] over the repeats (an interval from 6); ratios are to native BIND in "
        f"the same rounds. Servers at {section.threads} thread(s). Data: {section.dataset} "
        f"(profile {section.profile}; docs/method/updates-rate.md).")
    lines.append("")
    notes = Notes()
    for tsig in (False, True):
        lines += [f"### {'With' if tsig else 'Without'} TSIG", ""]
        rows = [_row(cell, notes) for cell in _cells(section, tsig)]
        lines += markdown_table(["server", "records/message", "records/s", "messages/s",
                                 "to native", "server CPU µs/record", "database CPU µs/record"],
                                rows)
        lines.append("")
    lines += notes.render()
    if notes.lines:
        lines.append("")
    lines += _checks(section)
    lines += [f"![updates per second against records per message]({PLOT})", ""]
    return lines


def _cells(section: Updates, tsig: bool) -> list[UpdateCell]:
    return sorted((c for c in section.cells if c.tsig == tsig),
                  key=lambda c: (report_order(c.server), c.batch))


def _row(cell: UpdateCell, notes: Notes) -> list[str]:
    label = cell.server
    if cell.status != "ok":
        outcomes = ", ".join(f"{n:,} {o}" for o, n in sorted(cell.outcomes().items()))
        reason = cell.error or f"answers: {outcomes} (a rate needs every answer NOERROR)"
        mark = notes.add(f"{cell.server}, {cell.batch} record(s)/message, "
                         f"{'TSIG' if cell.tsig else 'no TSIG'}: {reason}")
        word = "REFUSED" if cell.status == "refused" else "FAILED"
        return [label, str(cell.batch), f"{word} [{mark}]", NONE, NONE, NONE, NONE]
    if cell.sender_bound:
        mark = notes.add(f"{WARN} {cell.server}, {cell.batch} record(s)/message: in "
                         f"{cell.sender_bound} of {len(cell.repeats)} repeats the senders used "
                         f"{100 * SENDER_BOUND_SHARE:g}% or more of the time in CPU: the rate "
                         "may be the senders' limit, not the server's")
        label += f" [{mark}]"
    ratio = NONE
    if cell.ratio_to_native is not None:
        ratio = interval_text(cell.ratio_to_native, 100, 1, "%")
    elif cell.server == REFERENCE:
        ratio = "100%"
    cpu = cell.cpu_us_per_record
    return [label, str(cell.batch), _interval(cell.records_per_s),
            _interval(cell.messages_per_s), ratio, fmt_number(cpu.get("server")),
            fmt_number(cpu.get("db"))]


def _interval(value: Interval | None) -> str:
    return NONE if value is None else interval_text(value)


def _checks(section: Updates) -> list[str]:
    """The checks after the rounds, one row per server."""
    if not section.checks:
        return []
    lines = ["### After the rounds", "",
             "The same update messages (two of the largest batch, into each zone) went to "
             "every server and to native BIND; the changed names' answers were compared "
             "with native BIND's once added and again once deleted (SOA serials masked: "
             "the serials are in the last column). Then an update signed with a wrong key "
             "and one without a key went to the keyed zone: each must be refused and add "
             "nothing. Each zone must end, serial aside, as it began.", ""]
    rows = [_check_row(check) for check in sorted(section.checks,
                                                    key=lambda c: report_order(c.server))]
    lines += markdown_table(["server", "answers as native's", "known classes",
                             "unexplained", "wrong key", "no key", "names they added",
                             "zones as they began", "SOA serial, before → after the rounds"],
                            rows)
    lines.append("")
    for check in section.checks:
        for difference in check.differences[:5]:
            lines += [f"- {check.server}: {difference}"]
    return [*lines, ""]


def _check_row(check: ServerCheck) -> list[str]:
    if check.status != "ok":
        return [check.server, f"FAILED: {check.error}", *[NONE] * 7]
    known = ", ".join(f"{n} {c}" for c, n in sorted(check.classes.items()) if c != UNEXPLAINED)
    serials = "; ".join(f"{before} → {after}" for before, after in check.serials.values())
    answers = NONE if not check.compared else f"{check.identical}/{check.compared}"
    return [check.server, answers, known or NONE, str(check.unexplained), check.wrong_key,
            check.no_key, ", ".join(check.refused_left) or "none",
            "yes" if check.restored else "NO", serials]


def render_updates_plots(results: Results, out_dir: Path) -> list[Path]:
    """updates.png: records/s against records per message, a line per server and TSIG mode,
    each point's 95% interval (or its repeats' range) as an error bar; a server's colour and
    marker as in every plot, dashed with TSIG."""
    section = results.updates
    if section is None:
        return []
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for server in sorted(section.servers(), key=report_order):
        for tsig, style in ((False, "-"), (True, "--")):
            cells = [c for c in section.cells if c.server == server and c.tsig == tsig
                     and c.status == "ok" and c.records_per_s is not None]
            if not cells:
                continue
            cells.sort(key=lambda c: c.batch)
            xs = [c.batch for c in cells]
            ys, low, high = [], [], []
            for c in cells:
                rate = c.records_per_s
                assert rate is not None
                rates = [r.records_per_s for r in c.repeats if r.records_per_s is not None]
                bottom, top = ((rate.low, rate.high) if rate.low is not None
                               and rate.high is not None else (min(rates), max(rates)))
                ys.append(rate.estimate)
                low.append(rate.estimate - bottom)
                high.append(top - rate.estimate)
            look = {**server_style(server), "linestyle": style,
                    "label": f"{server}{' (TSIG)' if tsig else ''}"}
            ax.errorbar(xs, ys, yerr=[low, high], capsize=3, **look)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("records per update message")
    ax.set_ylabel("records changed per second (median)")
    ax.set_title(f"RFC 2136 updates, {section.senders} senders over TCP")
    ax.grid(which="both", alpha=0.3)
    legend_or_note(ax, fontsize=8)
    return [save_figure(fig, out_dir / PLOT)]


# ---------------------------------------------------------------- compare

CELL: list[Figure[UpdateCell]] = [
    Figure("records/s", lambda c: c.records_per_s, rate=True),
    Figure("messages/s", lambda c: c.messages_per_s, rate=True),
    Figure(f"% of {REFERENCE}", lambda c: scaled(c.ratio_to_native, 100), decimals=1),
    Figure("server CPU µs/record", lambda c: c.cpu_us_per_record.get("server")),
    Figure("database CPU µs/record", lambda c: c.cpu_us_per_record.get("db")),
]
CHECK: list[Figure[ServerCheck]] = [
    Figure("answers as native's", lambda c: c.identical, decimals=0),
    Figure("answers compared", lambda c: c.compared, decimals=0),
    Figure("unexplained differences", lambda c: c.unexplained, decimals=0),
]


def compare_updates(a: Results, b: Results) -> Comparison:
    """Cells matched by (server, records per message, TSIG), the checks after the rounds by
    server. A ratio to native BIND is within its own run: never under the same-boot rule."""
    if a.updates is None or b.updates is None:
        return Comparison(only=one_sided("the updates section", a.updates, b.updates))
    boot = same_boot(a, b)
    cells, only = pairs(a.updates.cells, b.updates.cells, lambda c: (c.server, c.batch, c.tsig),
                        lambda k: f"updates of {k[0]}, {_where(k[1], k[2])}")
    rows: list[str] = []
    for (server, batch, tsig), old, new in cells:
        if old.status != "ok" or new.status != "ok":
            rows.append(status_row(server, _where(batch, tsig), old.status, new.status))
        else:
            rows += figure_rows(server, _where(batch, tsig), CELL, old, new, boot)
    checks, only_checks = pairs(a.updates.checks, b.updates.checks, lambda c: c.server,
                                lambda server: f"the checks of {server} after the updates")
    for server, old, new in checks:
        if old.status != "ok" or new.status != "ok":
            rows.append(status_row(server, "after the updates", old.status, new.status))
        else:
            rows += figure_rows(server, "after the updates", CHECK, old, new, boot)
    return Comparison(rows, only + only_checks)


def _where(batch: int, tsig: bool) -> str:
    return f"{batch} record(s)/message, {'TSIG' if tsig else 'no TSIG'}"
