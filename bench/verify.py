"""Ask native BIND, the memory driver and each driver the same queries; compare the answers.

Responses are compared on rcode, the AA and TC flags, and the answer, authority and additional
sections as sets of RRs with TTLs. A truncated UDP answer is compared over TCP.

A few differences come from BIND's own DLZ path (lib/dns/sdlz.c), not from any driver: they are
seen between native BIND and a perfect in-memory DLZ module. `classify` names them; every other
difference belongs to the driver. Drivers are compared with the memory driver, which must itself
match native BIND apart from those named classes.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.rrset

from bench.servers.named import Named
from loaders.model import Zone

Query = tuple[dns.name.Name, str]

# The classes of difference that BIND's sdlz layer causes with a perfect driver.
BIND_CLASSES = {
    "ds-at-delegation": "DS/NSEC query at a delegation point: DLZ answers with the referral, "
                        "native BIND with the parent-side data",
    "negative-soa-ttl": "negative answer to an SOA query: DLZ keeps the SOA's TTL in the "
                        "authority section, native BIND sets it to 0",
    "root-zone": "query inside the root zone: BIND never asks a DLZ driver for the root zone",
}

HOSTILE_LABELS: tuple[bytes, ...] = (
    b"'", b'"', b"%", b"_", b"*x", b"a*b", b"/", b"..", b"\\", b"\x00", b"\xff\x01",
    b"'; DROP TABLE records; --", b"%' OR '1'='1", b"x" * 63, b"(", b";", b" ",
)


@dataclass(frozen=True)
class Answer:
    """A response reduced to what is compared."""

    rcode: str
    aa: bool
    tc: bool
    answer: frozenset[tuple[str, int, str, str]]
    authority: frozenset[tuple[str, int, str, str]]
    additional: frozenset[tuple[str, int, str, str]]

    def describe(self) -> str:
        def rrs(s: frozenset[tuple[str, int, str, str]]) -> str:
            return "; ".join(" ".join(map(str, rr)) for rr in sorted(s)) or "-"
        return (f"{self.rcode} aa={int(self.aa)} tc={int(self.tc)} | ANSWER {rrs(self.answer)}"
                f" | AUTHORITY {rrs(self.authority)} | ADDITIONAL {rrs(self.additional)}")


def _section(rrsets: Iterable[dns.rrset.RRset]) -> frozenset[tuple[str, int, str, str]]:
    out = set()
    for rrset in rrsets:
        if rrset.rdtype == dns.rdatatype.OPT:
            continue
        name = rrset.name.to_text().lower()
        rdtype = dns.rdatatype.to_text(rrset.rdtype)
        for rd in rrset:
            out.add((name, rrset.ttl, rdtype, rd.to_text()))
    return frozenset(out)


def reduce(msg: dns.message.Message) -> Answer:
    return Answer(dns.rcode.to_text(msg.rcode()), bool(msg.flags & dns.flags.AA),
                  bool(msg.flags & dns.flags.TC), _section(msg.answer),
                  _section(msg.authority), _section(msg.additional))


@dataclass
class Comparison:
    """What one driver answered differently, by class."""

    driver: str
    total: int = 0
    identical: int = 0
    classes: dict[str, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)

    @property
    def driver_differences(self) -> int:
        return self.classes.get("driver", 0)

    def add(self, cls: str | None, detail: str) -> None:
        self.total += 1
        if cls is None:
            self.identical += 1
            return
        self.classes[cls] = self.classes.get(cls, 0) + 1
        if cls == "driver" and len(self.differences) < 200:
            self.differences.append(detail)

    def summary(self) -> str:
        extra = ", ".join(f"{n} {c}" for c, n in sorted(self.classes.items()) if c != "driver")
        line = f"{self.driver}: {self.identical}/{self.total} identical"
        if self.driver_differences:
            line += f", {self.driver_differences} DRIVER DIFFERENCES"
        return line + (f" (BIND DLZ-path classes: {extra})" if extra else "")


@dataclass
class ZoneFacts:
    """What classification needs to know about the data set."""

    zones: set[dns.name.Name] = field(default_factory=set)
    delegations: set[dns.name.Name] = field(default_factory=set)

    @classmethod
    def of(cls, zones: Iterable[Zone]) -> ZoneFacts:
        facts = cls()
        for zone in zones:
            facts.zones.add(zone.origin)
            facts.delegations.update(r.owner for r in zone.records
                                     if r.rdtype == "NS" and r.owner != zone.origin)
        return facts

    def zone_of(self, name: dns.name.Name) -> dns.name.Name | None:
        while True:
            if name in self.zones:
                return name
            if name == dns.name.root:
                return None
            name = name.parent()


def classify(query: Query, native: Answer, dlz: Answer, facts: ZoneFacts) -> str:
    """Which named BIND DLZ-path class explains a native-vs-memory difference, else 'driver'."""
    qname, qtype = query
    if facts.zone_of(qname) == dns.name.root:
        return "root-zone"
    if qtype in ("DS", "NSEC") and qname in facts.delegations and not dlz.aa:
        return "ds-at-delegation"
    if qtype == "SOA" and not native.answer and _same_but_soa_ttl(native, dlz):
        return "negative-soa-ttl"
    return "driver"


def _same_but_soa_ttl(native: Answer, dlz: Answer) -> bool:
    def zero_soa(rrs: frozenset[tuple[str, int, str, str]]) -> frozenset[tuple[str, int, str, str]]:
        return frozenset((n, 0 if t == "SOA" else ttl, t, d) for n, ttl, t, d in rrs)
    return (native.rcode, native.aa, native.tc, native.additional) == \
        (dlz.rcode, dlz.aa, dlz.tc, dlz.additional) and \
        zero_soa(native.authority) == zero_soa(dlz.authority)


def derive_queries(zones: Sequence[Zone], seed: int = 1) -> list[Query]:
    """Queries that exercise every answer kind of a data set (see the README's verify section)."""
    rng = random.Random(seed)
    queries: list[Query] = []
    for zone in zones:
        by_owner: dict[dns.name.Name, set[str]] = {}
        for r in zone.records:
            by_owner.setdefault(r.owner, set()).add(r.rdtype)
        for owner, types in sorted(by_owner.items()):
            queries.extend((owner, t) for t in sorted(types))
            queries.append((owner, "HINFO" if "HINFO" not in types else "NAPTR"))  # wrong type
            queries.append((_mixed_case(owner, rng), sorted(types)[0]))
            queries.extend(_below(owner, zone.origin, rng))
        queries.extend(_hostile(zone.origin))
    return queries


def _mixed_case(name: dns.name.Name, rng: random.Random) -> dns.name.Name:
    labels = [bytes(c ^ 0x20 if chr(c).isalpha() and rng.random() < .5 else c for c in label)
              for label in name.labels]
    return dns.name.Name(labels)


def _below(owner: dns.name.Name, origin: dns.name.Name, rng: random.Random) -> list[Query]:
    """A name that does not exist under an owner (NXDOMAIN, wildcard or referral), and deeper."""
    out: list[Query] = []
    for depth in (1, 2):
        labels = tuple(b"nx%d" % rng.randrange(10**6) for _ in range(depth))
        try:
            name = dns.name.Name(labels + owner.labels)
        except dns.name.NameTooLong:
            continue
        out += [(name, "A"), (name, "TXT")]
    return out


def _hostile(origin: dns.name.Name) -> list[Query]:
    out: list[Query] = []
    for label in HOSTILE_LABELS:
        try:
            out.append((dns.name.Name((label,) + origin.labels), "A"))
        except dns.name.NameTooLong:
            pass
    # The longest legal name under the origin: 255 octets on the wire.
    room = 255 - len(origin.to_wire())
    labels: list[bytes] = []
    while room > 2:
        size = min(63, room - 1)
        labels.append(b"h" * size)
        room -= size + 1
    if labels:
        out.append((dns.name.Name(tuple(labels) + origin.labels), "A"))
    return out


def ask(named: Named, query: Query) -> tuple[Answer, Answer | None]:
    """The UDP answer, and the TCP answer when the UDP one was truncated."""
    udp = reduce(named.query(query[0], query[1]))
    return udp, reduce(named.query(query[0], query[1], tcp=True)) if udp.tc else None


def compare_answers(query: Query, reference: tuple[Answer, Answer | None],
                    other: tuple[Answer, Answer | None]) -> tuple[Answer, Answer] | None:
    """None when identical, else the first pair that differs (UDP, then TCP)."""
    for ref, got in zip(reference, other, strict=True):
        if ref != got:
            return ref or _EMPTY, got or _EMPTY
    return None


_EMPTY = Answer("(no answer)", False, False, frozenset(), frozenset(), frozenset())


def transfer(named: Named, zone: dns.name.Name) -> Answer:
    """A full zone transfer reduced to its set of RRs (rcode REFUSED/failed when it fails)."""
    try:
        messages = list(dns.query.xfr("127.0.0.1", zone, port=named.port, timeout=30,
                                      lifetime=120))
    except (dns.exception.DNSException, OSError, EOFError) as exc:
        return Answer(f"failed: {type(exc).__name__}", False, False, frozenset(), frozenset(),
                      frozenset())
    rrs = frozenset().union(*(_section(m.answer) for m in messages))
    return Answer("NOERROR", True, False, rrs, frozenset(), frozenset())
