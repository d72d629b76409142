"""dnsperf query files: sampled from zones as they stream past, read back for verify and probing.

One pass over a data set both feeds a store and samples queries: `QuerySampler.watch(zones)`
passes every zone through while keeping bounded reservoirs of candidates, so memory does not
grow with the data set. A query file line is `<name> <TYPE>`, the name absolute with its final
dot.

Four kinds of query, by what an authoritative server must answer:
  hit       an existing owner and one of its types (answer records);
  nodata    an existing name (owner or empty non-terminal) and a type it lacks;
  nxdomain  a name that does not exist and that no wildcard covers (a random label right
            under an existing zone's apex);
  unknown   a name under no zone of the data set at all (REFUSED): 1 to 6 labels under a
            random top-level label that no zone of the data set ends in. For each, named asks
            a DLZ driver about every suffix of the name (findzonedb) before refusing it.
`generate`'s default mix has no unknown names; `--nxdomain-share` and `--unknown-zone-share`
(traffic_mix) set those two shares and split the rest between hits and nodata as the default
mix does (docs/method/mixes.md).
Names at or below a zone cut (delegation point, glue) and below a DNAME get referrals or
synthesized answers rather than these three outcomes, so they are never sampled; nor are CNAME
owners for nodata (a CNAME answers every type).

dnsperf 2.10 reads `\\DDD` escapes in names as base-7 numbers (only `\\000` comes out right), so
names holding octets other than printable ASCII and NUL are not sampled: the file means the
same to dnsperf and to dnspython.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import dns.exception
import dns.name

from base.errors import UserError
from zonedata.model import Zone, empty_nonterminals

DEFAULT_QUERY_MIX: dict[str, float] = {"hit": 0.8, "nxdomain": 0.1, "nodata": 0.1}
UNKNOWN = "unknown"  # the kind of names under no zone
QUERY_KINDS = ("hit", "nxdomain", "nodata", UNKNOWN)
# Labels in an unknown-zone name (its top-level label included): every depth from 1 to
# UNKNOWN_MAX_DEPTH in turn, so each is an equal share of the unknown names (to one name).
UNKNOWN_MAX_DEPTH = 6
# Top-level labels of unknown names: this prefix and random hex; one that a zone of the data set
# ends in is drawn again.
UNKNOWN_TLD_PREFIX = "unk-"
# Types asked for in nodata queries: common, and known to dnsperf's type table.
NODATA_TYPES = ("A", "AAAA", "MX", "TXT", "SRV", "CAA", "NAPTR", "SSHFP", "HINFO", "LOC", "PTR")
# nxdomain names are `<prefix><random hex>.<zone>`; a zone with a label under its apex starting
# with this prefix is skipped, which makes every such name certain not to exist.
NXDOMAIN_PREFIX = "nxd-"
_DNSPERF_SAFE_OCTETS = frozenset(range(0x21, 0x7F)) | {0}
# Types of a signed zone that no client asks for by name (a resolver gets them with the DO bit)
# and that a DLZ answer differs on by BIND's own classes (bench/verify/bind_classes.py): not
# sampled as hits.
_SIGNER_ONLY_TYPES = frozenset({"RRSIG", "NSEC", "NSEC3", "NSEC3PARAM"})


def parse_mix(text: str) -> dict[str, float]:
    """'hit=0.8,nxdomain=0.1,nodata=0.1' -> shares that sum to 1 (missing kinds are 0)."""
    mix = dict.fromkeys(QUERY_KINDS, 0.0)
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, sep, value = part.partition("=")
        if not sep or kind.strip() not in mix:
            raise UserError(f"bad query mix entry {part!r}: expected one of "
                            f"{', '.join(QUERY_KINDS)} as kind=share")
        try:
            mix[kind.strip()] = float(value)
        except ValueError as exc:
            raise UserError(f"bad query mix share {value!r} for {kind.strip()}") from exc
    return _normalized_mix(mix)


def _normalized_mix(mix: Mapping[str, float]) -> dict[str, float]:
    unknown = set(mix) - set(QUERY_KINDS)
    if unknown:
        raise UserError(f"unknown query kinds {', '.join(sorted(unknown))} "
                        f"(known: {', '.join(QUERY_KINDS)})")
    if any(share < 0 for share in mix.values()) or sum(mix.values()) <= 0:
        raise UserError("query mix shares must be non-negative and not all zero")
    total = sum(mix.values())
    return {kind: mix.get(kind, 0.0) / total for kind in QUERY_KINDS}


def split_count(count: int, mix: Mapping[str, float]) -> dict[str, int]:
    """Queries per kind: shares of `count`, rounded so that they add up to `count` exactly."""
    exact = {kind: count * mix.get(kind, 0.0) for kind in QUERY_KINDS}
    counts = {kind: int(value) for kind, value in exact.items()}
    by_remainder = sorted(QUERY_KINDS, key=lambda k: (counts[k] - exact[k], QUERY_KINDS.index(k)))
    for kind in by_remainder[: count - sum(counts.values())]:
        counts[kind] += 1
    return counts


@dataclass
class _Reservoir:
    """Uniform sample of at most `size` items from a stream of unknown length (Algorithm R)."""

    size: int
    rng: random.Random
    items: list = field(default_factory=list)
    seen: int = 0

    def offer(self, item: object) -> None:
        self.seen += 1
        if len(self.items) < self.size:
            self.items.append(item)
            return
        slot = self.rng.randrange(self.seen)
        if slot < self.size:
            self.items[slot] = item


class ZoneWatcher(ABC):
    """Sees every zone of a data set as it streams past to a store: watch() passes the zones
    through, observing each on the way, so one pass both feeds a store and fills the
    watcher."""

    def watch(self, zones: Iterable[Zone]) -> Iterator[Zone]:
        """Pass every zone through, observing it on the way."""
        for zone in zones:
            self.observe(zone)
            yield zone

    @abstractmethod
    def observe(self, zone: Zone) -> None:
        """Take what this watcher keeps from one zone."""


class QuerySampler(ZoneWatcher):
    """Samples hit / nxdomain / nodata queries from zones seen once each, in bounded memory."""

    def __init__(self, count: int, mix: Mapping[str, float] = DEFAULT_QUERY_MIX,
                 seed: int = 1) -> None:
        if count < 0:
            raise UserError("query count must not be negative")
        self.count = count
        self.targets = split_count(count, _normalized_mix(mix))
        self.rng = random.Random(f"dlzbench-queries:{seed}")
        # Unknown-zone names are made, not sampled: their kind has no reservoir.
        self.reservoirs = {kind: _Reservoir(self.targets[kind], self.rng)
                           for kind in QUERY_KINDS if kind != UNKNOWN}
        self.tlds = TopLabels()

    def observe(self, zone: Zone) -> None:
        facts = QueryFacts(zone)
        self.tlds.observe(zone.origin)
        if self.targets["hit"]:
            for owner, rdtype in facts.hits():
                self.reservoirs["hit"].offer((owner, rdtype))
        if self.targets["nodata"]:
            for name, present in facts.nodata_names():
                missing = [t for t in NODATA_TYPES if t not in present]
                self.reservoirs["nodata"].offer((name, self.rng.choice(missing)))
        if self.targets["nxdomain"] and facts.nxdomain_eligible():
            self.reservoirs["nxdomain"].offer(zone.origin)

    def queries(self) -> list[tuple[str, str]]:
        """The sampled queries, kinds interleaved; a kind short of candidates repeats its own."""
        out: list[tuple[str, str]] = []
        for kind in QUERY_KINDS:
            wanted = self.targets[kind]
            if kind == UNKNOWN:
                out += [(self.tlds.unknown_name(self.rng, i), "A") for i in range(wanted)]
                continue
            items = self.reservoirs[kind].items
            if wanted and not items:
                raise UserError(f"the zones offer no {kind} queries (asked for {wanted})")
            if kind == "nxdomain":
                out += [(self._nxdomain_name(items[i % len(items)]), "A") for i in range(wanted)]
            else:
                out += [(query_text(name), rdtype)
                        for name, rdtype in (items[i % len(items)] for i in range(wanted))]
        self.rng.shuffle(out)
        return out

    def _nxdomain_name(self, origin: dns.name.Name) -> str:
        return nxdomain_name(origin, self.rng)

    def write(self, path: Path) -> dict[str, int]:
        """Write the query file; return queries per kind."""
        lines = [f"{name} {rdtype}\n" for name, rdtype in self.queries()]
        Path(path).write_text("".join(lines), encoding="ascii")
        return dict(self.targets)


def write_query_file(zones: Iterable[Zone], path: Path, count: int,
                     mix: Mapping[str, float] = DEFAULT_QUERY_MIX,
                     seed: int = 1) -> Iterator[Zone]:
    """Pass zones through; once they are exhausted, write `count` queries sampled from them."""
    sampler = QuerySampler(count, mix, seed)
    yield from sampler.watch(zones)
    sampler.write(path)


def traffic_mix(nxdomain_percent: float | None = None,
                unknown_percent: float | None = None) -> dict[str, float]:
    """The query kinds' shares for `--nxdomain-share` and `--unknown-zone-share` (percent of
    the queries; None: the default mix's nxdomain share, no unknown names); the rest is split
    between hits and nodata in the default mix's proportion (8 to 1)."""
    nxdomain = _percent(nxdomain_percent, "--nxdomain-share", DEFAULT_QUERY_MIX["nxdomain"])
    unknown = _percent(unknown_percent, "--unknown-zone-share", 0.0)
    rest = 1.0 - nxdomain - unknown
    if rest < -1e-9:
        raise UserError(f"--nxdomain-share {100 * nxdomain:g} and --unknown-zone-share "
                        f"{100 * unknown:g} add up to more than 100%")
    rest = max(rest, 0.0)
    answered = DEFAULT_QUERY_MIX["hit"] + DEFAULT_QUERY_MIX["nodata"]
    return {"hit": rest * DEFAULT_QUERY_MIX["hit"] / answered, "nxdomain": nxdomain,
            "nodata": rest * DEFAULT_QUERY_MIX["nodata"] / answered, UNKNOWN: unknown}


def _percent(value: float | None, option: str, default: float) -> float:
    if value is None:
        return default
    if not 0 <= value <= 100:
        raise UserError(f"{option} {value:g}: a share in percent, from 0 to 100")
    return value / 100


class TopLabels:
    """The top-level labels the zones of a data set end in (bounded by how many distinct
    ones there are, not by the zone count), and unknown-zone names outside all of them."""

    def __init__(self) -> None:
        self.labels: set[bytes] = set()
        self.root_is_zone = False

    def observe(self, origin: dns.name.Name) -> None:
        if origin == dns.name.root:
            self.root_is_zone = True
        else:
            self.labels.add(origin.labels[-2].lower())

    def unknown_name(self, rng: random.Random, index: int) -> str:
        """The index-th unknown name: depth 1 + index % 6 labels, under a random top-level
        label no zone ends in, so that no suffix of it is a zone."""
        if self.root_is_zone:
            raise UserError("the data set has the root zone: every name is under a zone, "
                            "so it has no unknown-zone names")
        while True:
            top = f"{UNKNOWN_TLD_PREFIX}{rng.getrandbits(32):08x}".encode()
            if top not in self.labels:
                break
        depth = 1 + index % UNKNOWN_MAX_DEPTH
        labels = [f"{rng.getrandbits(32):08x}".encode() for _ in range(depth - 1)]
        return query_text(dns.name.Name([*labels, top, b""]))


def write_flood_file(zones: Iterable[Zone], path: Path, count: int, seed: int = 1) -> str:
    """A random-subdomain flood's query file: `count` distinct random labels right under
    one existing zone (the data set's first whose nxdomain names are certain not to exist),
    each a name that does not exist, so no cache of answers can hold them. The zone's
    name."""
    for zone in zones:
        if QueryFacts(zone).nxdomain_eligible():
            rng = random.Random(f"dlzbench-flood:{seed}")
            names = dict.fromkeys(nxdomain_name(zone.origin, rng) for _ in range(count))
            Path(path).write_text("".join(f"{name} A\n" for name in names), encoding="ascii")
            return query_text(zone.origin)
    raise UserError("no zone of the data set can take a random-subdomain flood (each has a "
                    "wildcard or an nxd- label under its apex)")


def nxdomain_name(origin: dns.name.Name, rng: random.Random) -> str:
    """A name under origin that does not exist (origin must be QueryFacts.nxdomain_eligible)."""
    label = f"{NXDOMAIN_PREFIX}{rng.getrandbits(48):012x}"
    return query_text(dns.name.Name([label.encode(), *origin.labels]))


def query_text(name: dns.name.Name) -> str:
    """A name as dnsperf and dnspython both read it: absolute, `\\X` escapes only."""
    return name.to_text()


def dnsperf_safe(name: dns.name.Name) -> bool:
    return all(octet in _DNSPERF_SAFE_OCTETS for label in name.labels for octet in label)


def read_query_file(path: Path) -> list[tuple[str, str]]:
    """(name, TYPE) pairs of a dnsperf query file; blank lines and `#`/`;` comments skipped."""
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read query file {path}: {exc}") from exc
    queries = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith(("#", ";")):
            continue
        if len(fields) != 2:
            raise UserError(f"{path}:{number}: expected '<name> <TYPE>', got {line!r}")
        try:
            dns.name.from_text(fields[0])
        except dns.exception.DNSException as exc:
            raise UserError(f"{path}:{number}: bad name {fields[0]!r}: {exc}") from exc
        queries.append((fields[0], fields[1].upper()))
    return queries


class QueryFacts:
    """What one zone answers, as far as sampling needs it (zonedata/mixes.py too)."""

    def __init__(self, zone: Zone) -> None:
        self.origin = zone.origin
        self.types: dict[dns.name.Name, set[str]] = {}
        for record in zone.records:
            self.types.setdefault(record.owner, set()).add(record.rdtype)
        # A signed zone's hashed NSEC3 owners are no names of the zone (native BIND answers
        # them NXDOMAIN, a DLZ driver as existing names): never sampled.
        for owner in [o for o, types in self.types.items()
                      if "NSEC3" in types and types <= _SIGNER_ONLY_TYPES]:
            del self.types[owner]
        self.ents = empty_nonterminals(zone)
        self.cuts = {owner for owner, types in self.types.items()
                     if owner != self.origin and ("NS" in types or "DNAME" in types)}
        self.dnames = {owner for owner, types in self.types.items() if "DNAME" in types}

    def _answerable(self, name: dns.name.Name) -> bool:
        """Not at/below a zone cut nor below a DNAME, and dnsperf can encode it."""
        if not dnsperf_safe(name):
            return False
        ancestor = name
        while len(ancestor) > len(self.origin):
            if ancestor in self.cuts and (ancestor != name or ancestor not in self.dnames):
                return False
            ancestor = ancestor.parent()
        return True

    def hits(self) -> Iterator[tuple[dns.name.Name, str]]:
        for owner in sorted(self.types):
            if self._answerable(owner):
                for rdtype in sorted(self.types[owner] - _SIGNER_ONLY_TYPES):
                    yield owner, rdtype

    def nodata_names(self) -> Iterator[tuple[dns.name.Name, set[str]]]:
        for name in sorted([*self.types, *self.ents]):
            present = self.types.get(name, set())
            if "CNAME" not in present and self._answerable(name):
                yield name, present

    def nxdomain_eligible(self) -> bool:
        """True if every `nxd-…` label right under the apex is certain not to exist."""
        apex_types = self.types.get(self.origin, set())
        if "DNAME" in apex_types or not dnsperf_safe(self.origin):
            return False
        prefix = NXDOMAIN_PREFIX.encode()
        depth = len(self.origin) + 1
        for name in [*self.types, *self.ents]:
            if len(name) >= depth:
                label = name.labels[-depth]
                if label == b"*" or label.lower().startswith(prefix):
                    return False
        return True
