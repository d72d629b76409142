"""What every section's comparison (`compare A B`) shares: its rows in one table, the entries
only one run has, the same-boot rule and what two intervals can say.

Each section compares its own entries in its report module, beside its rendering
(bench/report/sections.py lists them): the comparison reads the figures the section shows
(signed's ROWS, capacity's breaking points), so a figure added to a section's table is one
line from being compared, and a module of its own per comparison would double the report
modules for functions of a dozen lines.

Same-boot rule: a throughput of A (a QPS, records per second: Figure.rate) is never divided by
one of B measured on another boot (or one not recorded): its change says "different boot: not
divided". Where both sides have 95% intervals that overlap, verdict() says the comparison
is undecided in place of a change: overlapping intervals are no evidence that two figures
agree (two 95% intervals may overlap while a test of the difference rejects it), and no test
of equivalence can be made from two intervals alone. Where the per-run values are kept, a
section judges them with stats.verdict instead (cells: bench/report/cost.py).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from bench.measure.results import Results
from bench.measure.stats import Interval, intervals_overlap
from bench.report.format import NONE, fmt_change, fmt_number

DIFFERENT_BOOT = "different boot: not divided"
UNDECIDED_OVERLAP = "undecided: intervals overlap"
HEADER = ["| server | where | figure | A | B | change | change % |",
          "|---|---:|---|---:|---:|---:|---:|"]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


class ServerEntry(Protocol):
    """A section's entry for one server: its name and whether it was measured ("ok")."""

    @property
    def server(self) -> str: ...

    @property
    def status(self) -> str: ...


E = TypeVar("E", bound=ServerEntry)
# A figure: a number, a median with its interval, or None (not measured).
Value = float | Interval | None


@dataclass
class Comparison:
    """A section's part of the comparison: its rows of the table, a line per entry only one
    run has, any table of its own printed after the figures, and any line on the whole
    section printed before them."""

    rows: list[str] = field(default_factory=list)
    only: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)  # lines printed before the table


@dataclass(frozen=True)
class Figure(Generic[T]):
    """One compared figure of an entry: its name, how it is read, whether it is a throughput
    (the same-boot rule), and its decimals (None: fmt_number's)."""

    name: str
    get: Callable[[T], Value]
    rate: bool = False
    decimals: int | None = None


def verdict(a: Interval | None, b: Interval | None) -> str | None:
    """What replaces the change of two figures that both have a 95% interval: undecided when
    the intervals overlap (module docstring); None (the change is shown: intervals apart)
    otherwise, or when either side has no interval."""
    if a is None or b is None or None in (a.low, a.high, b.low, b.high):
        return None
    return UNDECIDED_OVERLAP if intervals_overlap(a, b) else None


def same_boot(a: Results, b: Results) -> bool:
    """Were both runs measured on one boot (both recorded it, and it is the same)?"""
    boot = a.meta.get("boot_id")
    return boot is not None and boot != "unknown" and boot == b.meta.get("boot_id")


def row(server: str, where: object, figure: str, old: float | None, new: float | None,
        decimals: int | None = None, instead: str | None = None) -> str:
    """A figure's row; `instead` in place of the change where it may not be computed."""
    change, relative = fmt_change(old, new) if instead is None else (instead, instead)
    return (f"| {server} | {where} | {figure} | {fmt_number(old, decimals)} "
            f"| {fmt_number(new, decimals)} | {change} | {relative} |")


def status_row(server: str, where: object, a: str, b: str) -> str:
    """An entry that is not "ok" on either side: its statuses instead of its figures."""
    return f"| {server} | {where} | status | {a.upper()} | {b.upper()} | {NONE} | {NONE} |"


def figure_rows(server: str, where: object, figures: Sequence[Figure[T]], a: T, b: T,
                boot: bool) -> list[str]:
    """Every figure of a matched pair of entries that either has; `boot`: the runs share a
    boot."""
    rows = []
    for figure in figures:
        old, new = figure.get(a), figure.get(b)
        if old is None and new is None:
            continue
        instead = (DIFFERENT_BOOT if figure.rate and not boot
                   else verdict(_interval(old), _interval(new)))
        rows.append(row(server, where, figure.name, _estimate(old), _estimate(new),
                        figure.decimals, instead))
    return rows


def _interval(value: Value) -> Interval | None:
    return value if isinstance(value, Interval) else None


def _estimate(value: Value) -> float | None:
    return value.estimate if isinstance(value, Interval) else value


def scaled(value: Interval | None, factor: float) -> Interval | None:
    """An interval in other units (a ratio as a percentage)."""
    if value is None:
        return None
    return Interval(value.estimate * factor,
                    None if value.low is None else value.low * factor,
                    None if value.high is None else value.high * factor, value.n)


def pairs(a: Iterable[T], b: Iterable[T], key: Callable[[T], K],
          describe: Callable[[K], str]) -> tuple[list[tuple[K, T, T]], list[str]]:
    """The entries of both runs matched by key, in key order, and a line for each entry
    only one run has ("- <describe(key)>: only in A")."""
    mine: Mapping[K, T] = {key(entry): entry for entry in a}
    theirs: Mapping[K, T] = {key(entry): entry for entry in b}
    matched = [(k, mine[k], theirs[k]) for k in sorted(mine.keys() & theirs.keys())]
    only = [f"- {describe(k)}: only in {'A' if k in mine else 'B'}"
            for k in sorted(mine.keys() ^ theirs.keys())]
    return matched, only


def one_sided(what: str, a: object | None, b: object | None) -> list[str]:
    """A section one run has and the other has not: its line; nothing when both or neither
    have it."""
    if (a is None) == (b is None):
        return []
    return [f"- {what}: only in {'A' if a is not None else 'B'}"]


def compare_servers(a: Results, b: Results, what: str, old: Iterable[E], new: Iterable[E],
                    compare_ok: Callable[[str, E, E, bool], Comparison]) -> Comparison:
    """A section's entries matched by server ("- <what> of <server>: only in A" for the
    rest): a pair not "ok" on either side gives its status row (`what` its place), any other
    pair compare_ok's rows and lines (its arguments: the server, both entries, whether the
    runs share a boot)."""
    matched, only = pairs(old, new, lambda s: s.server, lambda server: f"{what} of {server}")
    boot = same_boot(a, b)
    comparison = Comparison(only=only)
    for server, entry_a, entry_b in matched:
        if entry_a.status != "ok" or entry_b.status != "ok":
            comparison.rows.append(status_row(server, what, entry_a.status, entry_b.status))
            continue
        part = compare_ok(server, entry_a, entry_b, boot)
        comparison.rows += part.rows
        comparison.only += part.only
    return comparison
