"""Measured figures in the prose of README.md and docs/: each carries a reference the results
catalogue resolves, right after it, invisible in the rendered page:

    memory answered 53.2% [50.3–57.6]<!--fig quick-2026-11-26 ratio.native server=memory-->

A reference is `<!--fig RUN METRIC KEY=VALUE ...-->`: the run (its directory under
docs/results/), the metric and the coordinates of bench/measure/catalogue.py. A value may list
several (`server=pg,mysql,ldap`; runs and metrics too, a run also as a pattern:
`cold-start-*-2026-11-26`), and a coordinate left out matches every
value, so one reference can name many figures; the printed figure before it then says what of
them:
a range "976-993" their lowest and highest, a single number needs `agg=min` or `agg=max`.
Three more keys:
- `per.KEY=VALUE`: the figure over the same figure with KEY set to VALUE ("5.6x": memory's
  instructions `per.server=native`; "87%": CPU per read at 0 writes/s `per.rate=100`; `per.run`
  takes the other figure from another run);
- `part=low|high|hw`: the interval's low or high end, or its half-width in % (the larger side,
  as the stop rule reads it);
- `agg=min|max|sum|count`: one number for many figures.

The printed figure is the number (or "a-b" range) right before the reference, with its unit
and its interval ("53.2% [50.3–57.6]"); it must equal the catalogue's to the decimals printed.
`check` lists every reference whose figure differs, does not resolve, or has no figure before
it; `unsourced` every number in a stretch of prose that is neither referenced nor a kind of
number that is no measurement (a date, a version, a parameter of the run).
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from base.errors import UserError
from bench.measure.catalogue import Catalogue, Figure

REFERENCE = re.compile(r"<!--\s*fig\s+(?P<body>.*?)\s*-->")
_CODE = re.compile(r"`[^`\n]*`")
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_UNITS = r"%|x| ?(?:ms|us|s|MiB|GiB|MB|GB|QPS|q/s|min)"
# The printed figure, ending right where the reference starts.
_PRINTED = re.compile(
    rf"(?<![\d.,])(?P<a>{_NUMBER})(?:(?P<range>[–-]|-| to )(?P<b>{_NUMBER}))?(?P<unit>{_UNITS})?"
    rf"(?: ?\[(?P<lo>{_NUMBER})[–-](?P<hi>{_NUMBER})%?\])?[*`]*$")
_SPECIAL = ("agg", "part")
_TIME_UNITS = {"s": "_s", "ms": "_ms", "us": "_us"}


@dataclass(frozen=True)
class Reference:
    """One `<!--fig ...-->` and where it is in its text."""

    runs: list[str]
    metrics: list[str]
    where: dict[str, list[str]]
    per: dict[str, str]
    agg: str | None
    part: str | None
    start: int
    end: int

    @classmethod
    def parse(cls, body: str, start: int, end: int) -> Reference:
        words = body.split()
        if len(words) < 2:
            raise UserError(f"figure reference {body!r}: expected RUN METRIC KEY=VALUE ...")
        pairs = []
        for word in words[2:]:
            key, sep, value = word.partition("=")
            if not sep or not value:
                raise UserError(f"figure reference {body!r}: {word!r} is not KEY=VALUE")
            pairs.append((key, value))
        where = {k: v.split(",") for k, v in pairs if k not in _SPECIAL and "." not in k}
        per = {k.removeprefix("per."): v for k, v in pairs if k.startswith("per.")}
        special = {k: v for k, v in pairs if k in _SPECIAL}
        return cls(words[0].split(","), words[1].split(","), where, per, special.get("agg"),
                   special.get("part"), start, end)

    @property
    def text(self) -> str:
        return " ".join([",".join(self.runs), ",".join(self.metrics), *(f"{k}={','.join(v)}"
                                                  for k, v in self.where.items()),
                         *(f"per.{k}={v}" for k, v in self.per.items()),
                         *(f"{k}={v}" for k, v in (("agg", self.agg), ("part", self.part))
                           if v)])


@dataclass(frozen=True)
class Printed:
    """The figure as printed before a reference: a number or a range, a unit, an interval."""

    text: str
    start: int
    first: str
    last: str | None
    unit: str
    low: str | None
    high: str | None


def _reference_matches(text: str) -> Iterator[re.Match[str]]:
    """Every `<!--fig ...-->` in text but the form shown in a code span."""
    code = [m.span() for m in _CODE.finditer(text)]
    for match in REFERENCE.finditer(text):
        if not any(start <= match.start() < end for start, end in code):
            yield match


def references(text: str) -> Iterator[Reference]:
    for match in _reference_matches(text):
        yield Reference.parse(match.group("body"), match.start(), match.end())


def printed_before(text: str, position: int) -> Printed | None:
    """The figure printed right before `position` (the reference's start)."""
    match = _PRINTED.search(text, max(0, position - 80), position)
    if match is None:
        return None
    return Printed(match.group(0), match.start(), match.group("a"), match.group("b"),
                   (match.group("unit") or "").strip(), match.group("lo"), match.group("hi"))


def _decimals(printed: str) -> int:
    return len(printed.split(".")[1]) if "." in printed else 0


def _agrees(value: float | None, printed: str) -> bool:
    """value rounds to the printed number at the printed number of decimals."""
    if value is None:
        return False
    shown = float(printed.replace(",", ""))
    return abs(value - shown) <= 0.5 * 10 ** -_decimals(printed) * (1 + 1e-9) + 1e-12


def resolve(catalogue: Catalogue, ref: Reference) -> list[Figure]:
    """Every figure of every run and metric the reference names, at its coordinates."""
    found = []
    for run, patterned in _runs(catalogue, ref.runs):
        for metric in ref.metrics:
            here = catalogue.find(run, metric, **ref.where)
            if not here and not patterned:
                catalogue.one(run, metric, **ref.where)  # raises, saying what the run holds
            found += here
    if not found:
        raise UserError(f"figure {ref.text}: no run the patterns match holds it")
    return found


def _runs(catalogue: Catalogue, patterns: list[str]) -> list[tuple[str, bool]]:
    """The runs named, each with whether a pattern named it (`*` stands for every run it
    matches; such a run may lack the figure, a run named outright may not)."""
    runs = []
    for pattern in patterns:
        if "*" not in pattern:
            runs.append((pattern, False))
            continue
        matched = fnmatch.filter(catalogue.runs(), pattern)
        if not matched:
            raise UserError(f"no results run matches {pattern!r}")
        runs += [(run, True) for run in matched]
    return runs


def values(catalogue: Catalogue, ref: Reference, percent: bool) -> list[float]:
    """The numbers the reference names, after `per` and `part` (percent: a `per` quotient
    printed as a percentage). Among several figures, one without an interval has no `part`
    and is left out (memory's 100% of itself)."""
    figures = resolve(catalogue, ref)
    numbers = []
    for figure in figures:
        number = _part(figure, ref.part)
        if ref.per:
            other = _per(catalogue, ref, figure)
            number = None if number is None or not other else number / other
            if number is not None and percent:
                number *= 100
        if number is None and ref.part is not None and len(figures) > 1:
            continue
        if number is None:
            raise UserError(f"figure {ref.text}: {_place(figure)} has no value")
        numbers.append(number)
    if not numbers:
        raise UserError(f"figure {ref.text}: no figure has a {ref.part}")
    return numbers


def _part(figure: Figure, part: str | None) -> float | None:
    if part is None:
        return figure.number
    if part in ("low", "high"):
        return getattr(figure, part)
    if part == "hw":
        if figure.number is None or figure.low is None or figure.high is None:
            return None
        return 100 * max(figure.number - figure.low, figure.high - figure.number) / figure.number
    raise UserError(f"part={part}: expected low, high or hw")


def _per(catalogue: Catalogue, ref: Reference, figure: Figure) -> float | None:
    """The figure `per.KEY=VALUE` divides by: the same coordinates, KEY set to VALUE."""
    coordinates = {"server": figure.server, "threads": figure.threads, **dict(figure.where)}
    coordinates = {k: str(v) for k, v in coordinates.items() if v is not None}
    run = ref.per.get("run", figure.run)
    metric = ref.per.get("metric", figure.metric)
    coordinates.update({k: v for k, v in ref.per.items() if k not in ("run", "metric")})
    return _part(catalogue.one(run, metric, **coordinates), ref.part)


def _place(figure: Figure) -> str:
    return " ".join(filter(None, [figure.server, figure.threads and f"threads={figure.threads}",
                                  *(f"{k}={v}" for k, v in figure.where)]))


def problem(catalogue: Catalogue, text: str, ref: Reference) -> str | None:
    """What is wrong with one reference in text, or None."""
    printed = printed_before(text, ref.start)
    if printed is None:
        return f"{ref.text}: no figure printed right before it"
    unit = _TIME_UNITS.get(printed.unit)
    if unit is not None and not ref.per and not all(m.endswith(unit) for m in ref.metrics):
        return f"{ref.text}: printed in {printed.unit}, the metric is not"
    try:
        numbers = values(catalogue, ref, percent=printed.unit == "%")
        figures = resolve(catalogue, ref)
    except UserError as exc:
        return str(exc)
    return _mismatch(ref, printed, numbers, figures)


def _mismatch(ref: Reference, printed: Printed, numbers: list[float],
              figures: list[Figure]) -> str | None:
    says = f"{ref.text}: printed {printed.text!r}"
    if printed.last is not None:
        low, high = min(numbers), max(numbers)
        if _agrees(low, printed.first) and _agrees(high, printed.last):
            return None
        return f"{says}, the figures range {low:,.6g}-{high:,.6g}"
    number = _aggregate(ref, numbers)
    if number is None:
        return f"{says}: {len(numbers)} figures for one number (agg=min, max, sum or count)"
    if not _agrees(number, printed.first):
        return f"{says}, the catalogue has {number:,.6g}"
    if printed.low is not None:
        if len(figures) != 1 or ref.per or ref.part:
            return f"{says}: an interval printed for a figure without one"
        figure = figures[0]
        if not (_agrees(figure.low, printed.low) and _agrees(figure.high, printed.high)):
            return f"{says}, the catalogue's interval is {figure.low:,.6g}-{figure.high:,.6g}"
    return None


def _aggregate(ref: Reference, numbers: list[float]) -> float | None:
    if ref.agg is None:
        return numbers[0] if len(numbers) == 1 else None
    return {"min": min, "max": max, "sum": math.fsum, "count": len}[ref.agg](numbers)


def check(catalogue: Catalogue, text: str) -> list[str]:
    """Every problem of every reference in text, each with its line number."""
    problems = []
    for match in _reference_matches(text):
        try:
            ref = Reference.parse(match.group("body"), match.start(), match.end())
            found = problem(catalogue, text, ref)
        except UserError as exc:
            found = str(exc)
        if found is not None:
            problems.append(f"line {text.count(chr(10), 0, match.start()) + 1}: {found}")
    return problems


# ---------------------------------------------------------------- numbers without a source

# Numbers that are no measurement: a date or a time, a version, a commit's digits, an issue or
# an RFC, a seed document, a machine's size.
_NOT_MEASURED = [
    r"\d{4}-\d{2}-\d{2}", r"\d{1,2}:\d{2}", r"\d+(?:\.\d+)+(?=\.\d)",
    r"(?:BIND|named|PowerDNS|Knot|NSD|PostgreSQL|MariaDB|slapd|OpenLDAP|Berkeley DB|dnsperf|"
    r"Debian|Python|Go|toxiproxy|RFC|seed|seeds|issue|issues|schema|ABI|version|vCPU|x86)"
    r" \d[\d.]*",
]
# Spans of prose that are no prose: inline code, link targets, comments, generated blocks.
_SKIPPED = re.compile(r"<!-- \[\[\[cog.*?\[\[\[end\]\]\] -->|`[^`]*`|\]\([^)]*\)|<!--.*?-->",
                      re.S)
# A number: digits with separators; a token with letters in it (p99, 2.3k, 849c71b6) is none.
_ANY_NUMBER = re.compile(r"(?<![\w.\-/])\d[\d,.]*(?![\w.,]*[A-Za-z_])(?<![.,])")


def unsourced(text: str, parameters: list[str]) -> list[str]:
    """Each number in text that is not a referenced figure, nor inside code, a link target, a
    comment or a generated block, nor one of the kinds above, nor a parameter (`parameters`:
    patterns of the page's parameter phrases, such as "at 2,000 QPS"): "line N: context"."""
    covered = [False] * len(text)
    for span in _spans_to_skip(text, parameters):
        for i in range(*span):
            covered[i] = True
    found = []
    for match in _ANY_NUMBER.finditer(text):
        if not any(covered[match.start():match.end()]):
            line = text.count("\n", 0, match.start()) + 1
            context = text[max(0, match.start() - 30):match.end() + 20].replace("\n", " ")
            found.append(f"line {line}: {match.group(0)!r} in ...{context}...")
    return found


def _spans_to_skip(text: str, parameters: list[str]) -> Iterator[tuple[int, int]]:
    for ref in references(text):
        printed = printed_before(text, ref.start)
        if printed is not None:
            yield printed.start, ref.start
    for match in _SKIPPED.finditer(text):
        yield match.span()
    for pattern in [*_NOT_MEASURED, *parameters]:
        # a phrase may break across lines: its spaces match any whitespace
        for match in re.finditer(pattern.replace(" ", r"\s+"), text):
            yield match.span()
