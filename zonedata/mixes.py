"""Query files over a whole data set, for `scale`: which zones the queries go to.

`generate`'s query file (zonedata/queries.py) samples queries from the zones at random, so at a
million zones most zones are never asked for. `scale` needs to say which part of the data set
a load touches:

  uniform  every zone equally likely. Each zone gets count // zones queries and the remainder
           goes to zones drawn without repetition, so with at least as many queries as zones
           every zone is asked for: the working set is the whole store.
  popular  Zipf-like: the zone of popularity rank r (1 = most popular) is asked for with a
           weight of 1 / r**exponent. With exponent 1.0 and a million zones, the top 1% of
           zones draw about half of the queries: most queries hit a small hot set, and the
           tail is still asked for now and then.

Both keep a mix of query kinds exactly (`generate`'s DEFAULT_QUERY_MIX: hit / nxdomain /
nodata, or the one `scale --nxdomain-share/--unknown-zone-share` gives, queries.traffic_mix):
the kinds are split as split_count does and dealt to the query lines in a seeded shuffle.
Unknown-zone names belong to no zone: they are written once the pass has seen every zone's
top-level label (queries.TopLabels).

Popularity ranks are given to zones in a seeded random order, not in the order they are
generated and loaded: the hot set is then spread over the store's pages and files the way any
set of zones is, instead of being the first zones written, which sit together on disk.

A plan says, for every line of the file, its zone (by position in the data set's stream) and
its kind; one pass over the stream then fills the lines of every plan (MixWriter), in bounded
memory besides the lines themselves. Line order is the plan's shuffled order, so a dnsperf run
that reads only part of the file still sees the mix.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from base.errors import UserError
from zonedata.model import Zone
from zonedata.queries import (
    DEFAULT_QUERY_MIX,
    NODATA_TYPES,
    QUERY_KINDS,
    UNKNOWN,
    QueryFacts,
    TopLabels,
    ZoneWatcher,
    nxdomain_name,
    query_text,
    split_count,
)

MIXES = ("uniform", "popular")
DEFAULT_EXPONENT = 1.0


def check_exponent(exponent: float) -> float:
    """A Zipf exponent: finite and not negative (0 makes every zone equally likely)."""
    if not math.isfinite(exponent) or exponent < 0:
        raise UserError(f"--zipf {exponent:g}: the popularity exponent must be a finite "
                        "number of at least 0 (1.0: the usual Zipf law)")
    return exponent


def parse_mixes(text: str) -> tuple[str, ...]:
    """'uniform,popular' -> the mixes, checked, in the order given, without repeats."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in MIXES]
    if unknown or not names:
        raise UserError(f"--mixes {text!r}: expected a comma list of {', '.join(MIXES)}")
    return names


def popularity_order(zones: int, seed: int) -> list[int]:
    """Zone positions by popularity rank: element 0 is the most popular zone's position."""
    order = list(range(zones))
    random.Random(f"dlzbench-popularity:{seed}").shuffle(order)
    return order


def zipf_weights(zones: int, exponent: float) -> list[float]:
    """Weight of popularity rank 1 .. zones: 1 / rank**exponent."""
    return [1.0 / rank ** exponent for rank in range(1, zones + 1)]


def expected_share(zones: int, exponent: float, top: int) -> float:
    """Share of the popular mix's queries expected to go to its `top` most popular zones."""
    weights = zipf_weights(zones, exponent)
    return math.fsum(weights[:top]) / math.fsum(weights)


@dataclass
class MixPlan:
    """The zone and the kind of every line of one query file."""

    mix: str
    zones: int
    exponent: float | None   # popular only
    line_zones: array        # zone position (in the data set's stream) of each line
    line_kinds: bytes        # index into QUERY_KINDS of each line
    order: list[int]         # popularity order (uniform: the stream's order)

    @property
    def count(self) -> int:
        return len(self.line_zones)

    def kind_counts(self) -> dict[str, int]:
        return {kind: self.line_kinds.count(i) for i, kind in enumerate(QUERY_KINDS)}


def plan_mix(mix: str, zones: int, count: int, *, exponent: float = DEFAULT_EXPONENT,
             seed: int = 1, kinds: Mapping[str, float] = DEFAULT_QUERY_MIX) -> MixPlan:
    """Which zone and which kind each of `count` query lines asks for."""
    if zones < 1:
        raise UserError(f"a query mix needs at least 1 zone, not {zones}")
    if count < 1:
        raise UserError(f"a query file needs at least 1 query, not {count}")
    rng = random.Random(f"dlzbench-mix:{mix}:{seed}")
    if mix == "uniform":
        order = list(range(zones))
        line_zones = _uniform_zones(zones, count, rng)
        kept_exponent = None
    elif mix == "popular":
        order = popularity_order(zones, seed)
        line_zones = _popular_zones(order, count, check_exponent(exponent), rng)
        kept_exponent = exponent
    else:
        raise UserError(f"unknown query mix {mix!r} (known: {', '.join(MIXES)})")
    split = split_count(count, kinds)
    line_kinds = bytearray(itertools.chain.from_iterable(
        itertools.repeat(i, split[kind]) for i, kind in enumerate(QUERY_KINDS)))
    rng.shuffle(line_kinds)
    return MixPlan(mix, zones, kept_exponent, line_zones, bytes(line_kinds), order)


def _uniform_zones(zones: int, count: int, rng: random.Random) -> array:
    """Every zone count // zones times, the remainder on distinct random zones; shuffled."""
    line_zones = array("l", itertools.chain.from_iterable(
        itertools.repeat(range(zones), count // zones)))
    line_zones.extend(rng.sample(range(zones), count % zones))
    rng.shuffle(line_zones)
    return line_zones


def _popular_zones(order: list[int], count: int, exponent: float,
                   rng: random.Random) -> array:
    """Draws of ranks by Zipf weight (bisect over the cumulative weights), as zone positions."""
    cumulative = list(itertools.accumulate(zipf_weights(len(order), exponent)))
    total = cumulative[-1]
    last = len(order) - 1
    return array("l", (order[min(last, bisect.bisect_right(cumulative, rng.random() * total))]
                       for _ in range(count)))


class MixWriter(ZoneWatcher):
    """Fills the lines of several plans over one data set in one pass over its zones."""

    def __init__(self, plans: Mapping[Path, MixPlan], seed: int = 1) -> None:
        zones = {plan.zones for plan in plans.values()}
        if len(zones) > 1:
            raise ValueError("every plan of one pass must be over the same data set")
        self.plans = dict(plans)
        self.rng = random.Random(f"dlzbench-mix-lines:{seed}")
        self.lines: dict[Path, list[str]] = {path: [""] * plan.count
                                             for path, plan in self.plans.items()}
        # Per plan: its lines sorted by zone, and how far the pass has got in that list.
        self._by_zone = {path: sorted(range(plan.count), key=plan.line_zones.__getitem__)
                         for path, plan in self.plans.items()}
        self._next = dict.fromkeys(self.plans, 0)
        self._position = 0
        self.tlds = TopLabels()

    def observe(self, zone: Zone) -> None:
        """Fill the lines of every plan that ask for a fact of this zone."""
        self.tlds.observe(zone.origin)
        facts: _Choices | None = None
        for path, plan in self.plans.items():
            lines, by_zone = self.lines[path], self._by_zone[path]
            i = self._next[path]
            while i < len(by_zone) and plan.line_zones[by_zone[i]] == self._position:
                facts = facts or _Choices(zone)
                line = by_zone[i]
                kind = QUERY_KINDS[plan.line_kinds[line]]
                if kind != UNKNOWN:  # written once every zone is seen (fill_unknown)
                    lines[line] = facts.pick(kind, self.rng)
                i += 1
            self._next[path] = i
        self._position += 1

    def write(self) -> dict[Path, dict[str, int]]:
        """Write every file; per file, its queries per kind."""
        if self._position != next(iter(self.plans.values())).zones:
            raise UserError(f"the data set had {self._position} zones, the query plans "
                            f"expected {next(iter(self.plans.values())).zones}")
        written = {}
        for path, plan in self.plans.items():
            self.fill_unknown(path, plan)
            Path(path).write_text("".join(f"{line}\n" for line in self.lines[path]),
                                  encoding="ascii")
            written[path] = plan.kind_counts()
        return written


    def fill_unknown(self, path: Path, plan: MixPlan) -> None:
        """The plan's unknown-zone lines, under top-level labels no zone of the pass ends in."""
        unknown = QUERY_KINDS.index(UNKNOWN)
        lines = self.lines[path]
        at = (line for line in range(plan.count) if plan.line_kinds[line] == unknown)
        for index, line in enumerate(at):
            lines[line] = f"{self.tlds.unknown_name(self.rng, index)} A"


class _Choices:
    """One zone's candidate queries of each kind, gathered once however many lines ask."""

    def __init__(self, zone: Zone) -> None:
        facts = QueryFacts(zone)
        self.zone = zone
        self.hits = list(facts.hits())
        self.nodata = list(facts.nodata_names())
        self.nxdomain = facts.nxdomain_eligible()

    def pick(self, kind: str, rng: random.Random) -> str:
        """One query line of the kind; a zone without one is refused, not silently swapped
        for another kind (every generated zone has all three)."""
        if kind == "hit" and self.hits:
            owner, rdtype = rng.choice(self.hits)
            return f"{query_text(owner)} {rdtype}"
        if kind == "nodata" and self.nodata:
            name, present = rng.choice(self.nodata)
            missing = [t for t in NODATA_TYPES if t not in present]
            return f"{query_text(name)} {rng.choice(missing)}"
        if kind == "nxdomain" and self.nxdomain:
            return f"{nxdomain_name(self.zone.origin, rng)} A"
        raise UserError(f"zone {self.zone.origin} offers no {kind} query for the query mix")
