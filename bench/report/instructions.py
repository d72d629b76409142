"""results.md's "Instructions per answered query" section (`instructions`): per server, named's
and the database's instructions per answered query as Valgrind counted them, their total, the
ratio to the memory driver, and how far the repeats are apart."""

from __future__ import annotations

from bench.measure.instructions import AGREEMENT_TARGET, Instructions, ServerInstructions
from bench.measure.results import Results
from bench.report.comparing import (
    Comparison,
    Figure,
    compare_servers,
    figure_rows,
    one_sided,
)
from bench.report.format import NONE, WARN, Notes, fmt_number, fmt_percent, markdown_table
from servers import DLZ_CEILING, report_order


def render_instructions(results: Results) -> list[str]:
    """The section, or nothing for a file without it (every file written before it)."""
    section = results.instructions
    if section is None:
        return []
    lines = ["## Instructions per answered query", ""]
    lines.append(
        f"Counted by {section.valgrind}'s callgrind over a fixed set of {section.queries:,} "
        f"queries (sha256 `{section.queries_sha256[:16]}`) from {section.dataset}, asked one "
        f"at a time after a warm-up pass over the same set; an idle window of "
        f"{section.idle_seconds:g} s is subtracted in proportion to the query window's "
        f"length; each repeat is a fresh named. Instructions do not depend on how fast the "
        f"machine runs at the time: this is the figure to compare across boots and machines "
        f"(docs/method/instructions.md).")
    lines.append("")
    notes = Notes()
    memory = section.server(DLZ_CEILING)
    reference = memory.mean("total") if memory is not None else None
    rows = [_row(entry, reference, notes)
            for entry in sorted(section.servers, key=lambda s: report_order(s.server))]
    lines += markdown_table(
        ["server", "named Ir/query", "database Ir/query", "total Ir/query",
         f"of {DLZ_CEILING}", "repeats differ by", "repeats"], rows)
    lines.append("")
    lines += _database_lines(section)
    lines += notes.render()
    return lines


def _row(entry: ServerInstructions, reference: float | None, notes: Notes) -> list[str]:
    if entry.status != "ok":
        mark = notes.add(f"{entry.server}: failed: {entry.error}")
        return [entry.server, f"FAILED [{mark}]", *[NONE] * 5]
    database = fmt_number(entry.mean("database"), 0) if entry.database_counted else NONE
    return [entry.server, fmt_number(entry.mean("named"), 0), database,
            fmt_number(entry.mean("total"), 0), fmt_percent(entry.mean("total"), reference),
            _agreement(entry, notes), _repeats(entry, notes)]


def _agreement(entry: ServerInstructions, notes: Notes) -> str:
    """The total's (max - min) / min over the repeats; marked above the 1% target."""
    value = entry.agreement("total")
    if value is None:
        return NONE
    text = f"{100 * value:.2f}%"
    if value > AGREEMENT_TARGET:
        mark = notes.add(f"{entry.server}: its repeats differ by more than "
                         f"{100 * AGREEMENT_TARGET:g}%: not a figure to compare")
        text += f" {WARN}[{mark}]"
    return text


def _repeats(entry: ServerInstructions, notes: Notes) -> str:
    """How many repeats, and a mark when a query went unanswered in one."""
    text = str(len(entry.repeats))
    if entry.unanswered:
        mark = notes.add(f"{entry.server}: {entry.unanswered} queries unanswered over its "
                         "repeats (the figure divides by the answered ones)")
        text += f" {WARN}[{mark}]"
    return text


def _database_lines(section: Instructions) -> list[str]:
    """Which database process each figure counts, or why there is none."""
    described = {}
    for entry in sorted(section.servers, key=lambda s: report_order(s.server)):
        described.setdefault(entry.database, []).append(entry.server)
    lines = ["Database process counted: " + "; ".join(
        f"{', '.join(names)}: {what}" for what, names in described.items()) + ".", ""]
    return lines


# ---------------------------------------------------------------- compare

# Instructions do not depend on the boot: none is under the same-boot rule.
FIGURES: list[Figure[ServerInstructions]] = [
    Figure("named Ir/query", lambda s: s.mean("named"), decimals=0),
    Figure("database Ir/query",
           lambda s: s.mean("database") if s.database_counted else None, decimals=0),
    Figure("total Ir/query", lambda s: s.mean("total"), decimals=0),
]


def compare_instructions(a: Results, b: Results) -> Comparison:
    """Servers matched by name, over the same query set (its sha256): instructions per query
    over other queries are another figure."""
    if a.instructions is None or b.instructions is None:
        return Comparison(only=one_sided("the instructions section", a.instructions,
                                         b.instructions))
    if a.instructions.queries_sha256 != b.instructions.queries_sha256:
        return Comparison(only=["- instructions: counted over different query sets (sha256 "
                                f"{a.instructions.queries_sha256[:16]} and "
                                f"{b.instructions.queries_sha256[:16]}): not compared"])
    return compare_servers(
        a, b, "instructions", a.instructions.servers, b.instructions.servers,
        lambda server, old, new, boot: Comparison(
            figure_rows(server, "instructions", FIGURES, old, new, boot)))
