"""The queries verify asks, derived from the zones themselves.

A comparison of answers covers only the questions asked, so verify's questions come from the
data rather than from a list: every owner with its types, a type it lacks and ANY, names below
every owner, mixed-case spellings, hostile labels and a name at the 255-octet limit
(`derive_queries`). The same zones and seed give the same queries in the same order, so two
runs ask the same. (zonedata/queries.py, by contrast, samples dnsperf's query files.)
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import dns.name

from zonedata.model import Zone, empty_nonterminals

Query = tuple[dns.name.Name, str]

# Labels a store could take for syntax (quotes, SQL and glob wildcards, statement and comment
# ends, path separators, escapes, NUL, octets outside ASCII), and one at the 63-octet limit.
HOSTILE_LABELS: tuple[bytes, ...] = (
    b"'", b'"', b"%", b"_", b"*x", b"a*b", b"/", b"..", b"\\", b"\x00", b"\xff\x01",
    b"'; DROP TABLE records; --", b"%' OR '1'='1", b"x" * 63, b"(", b";", b" ",
)


def derive_queries(zones: Sequence[Zone], seed: int = 1) -> list[Query]:
    """Queries that exercise every answer kind of a data set (see docs/method/verify.md):
    every owner (empty non-terminals too) with each of its types, a type it lacks and ANY;
    DS and NSEC at delegations, NSEC at CNAMEs; a mixed-case spelling; names below every
    owner (NXDOMAIN, wildcard or referral), below the apex asked SOA too; hostile labels and a
    255-octet name per zone."""
    rng = random.Random(seed)
    queries: dict[Query, None] = {}
    for zone in zones:
        by_owner: dict[dns.name.Name, set[str]] = {n: set() for n in empty_nonterminals(zone)}
        for r in zone.records:
            by_owner.setdefault(r.owner, set()).add(r.rdtype)
        for owner, types in sorted(by_owner.items()):
            for query in _owner_queries(owner, types, zone.origin, rng):
                queries.setdefault(query)
        for query in _hostile(zone.origin):
            queries.setdefault(query)
    return list(queries)


def _owner_queries(owner: dns.name.Name, types: set[str], origin: dns.name.Name,
                   rng: random.Random) -> list[Query]:
    out = [(owner, t) for t in sorted(types)]
    out.append((owner, "HINFO" if "HINFO" not in types else "NAPTR"))  # a type it lacks
    out.append((owner, "ANY"))
    if "NS" in types and owner != origin:
        out += [(owner, "DS"), (owner, "NSEC")]
    if "CNAME" in types:
        out.append((owner, "NSEC"))
    out.append((_mixed_case(owner, rng), min(types) if types else "A"))
    # SOA at a name that does not exist: where a server finds the zone of an arbitrary name
    # (native BIND answers it with the SOA's TTL at 0, zero-no-soa-ttl). Below the apex only:
    # a few per zone ask it of every kind of zone.
    out.extend(_below(owner, rng, ("A", "TXT", "SOA") if owner == origin else ("A", "TXT")))
    return out


def _mixed_case(name: dns.name.Name, rng: random.Random) -> dns.name.Name:
    labels = [bytes(c ^ 0x20 if chr(c).isalpha() and rng.random() < .5 else c for c in label)
              for label in name.labels]
    return dns.name.Name(labels)


def _below(owner: dns.name.Name, rng: random.Random, types: tuple[str, ...]) -> list[Query]:
    """A name that does not exist under an owner (NXDOMAIN, wildcard or referral), and deeper,
    each asked for `types`."""
    out: list[Query] = []
    for depth in (1, 2):
        labels = tuple(b"nx%d" % rng.randrange(10**6) for _ in range(depth))
        try:
            name = dns.name.Name(labels + owner.labels)
        except dns.name.NameTooLong:
            continue
        out += [(name, rdtype) for rdtype in types]
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
