"""The one zone-data model every input produces and every store loads and reads back.

A data set is a stream of `Zone`s; a zone holds its records in memory (zones are small next to
the data set, which is never held whole). Names are dnspython `Name`s, always absolute; rdata is
kept in presentation form with every domain name absolute, so a record means the same thing
whatever origin it is later parsed against.

Stores keep names as *keys*: the lower-case presentation text that BIND hands to a DLZ driver
(`dns_name_totext` with the final dot omitted, then lower-cased by BIND's sdlz layer). Using
BIND's own spelling makes every driver lookup an exact key match, and makes case-insensitive
matching and escaped bytes (`\\.`, `\\000`, `\\"`, and `\\@`, `\\$` which BIND's
dns_name_totext escapes as dnspython does) fall out for free.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype

# Marker type of a row that records an empty non-terminal: a name that exists only because a
# name below it exists. Stores write these rows so that a driver answers such a name NOERROR/
# NODATA with one exact lookup instead of a suffix scan.
ENT_TYPE = "ENT"


@dataclass(frozen=True, order=True)
class Record:
    """One resource record; `owner` is absolute, `rdata` is presentation text, names absolute."""

    owner: dns.name.Name
    ttl: int
    rdtype: str
    rdata: str


@dataclass
class Zone:
    origin: dns.name.Name
    records: list[Record] = field(default_factory=list)

    @property
    def key(self) -> str:
        return name_key(self.origin)

    def canonical(self) -> list[tuple[str, int, str, str]]:
        """Records as sorted (owner key, ttl, type, rdata) tuples: the form compared in tests."""
        return sorted((name_key(r.owner), r.ttl, r.rdtype, r.rdata) for r in self.records)


def name_key(name: dns.name.Name) -> str:
    """BIND's text for an absolute name handed to a DLZ driver: lower case, no final dot."""
    return name.to_text(omit_final_dot=True).lower()


def relative_key(owner: dns.name.Name, origin: dns.name.Name) -> str:
    """BIND's text for an owner inside a zone, as passed to dlz_lookup: relative, '@' at apex."""
    if owner == origin:
        return "@"
    return owner.relativize(origin).to_text().lower()


def key_to_name(key: str) -> dns.name.Name:
    """Inverse of `name_key` (up to case)."""
    return dns.name.from_text(key) if key != "." else dns.name.root


def make_record(owner: dns.name.Name, ttl: int, rdtype: str | int, text: str,
                origin: dns.name.Name | None = None) -> Record:
    """Build a record from presentation rdata, parsed (and so validated) by dnspython."""
    rdt = dns.rdatatype.from_text(rdtype) if isinstance(rdtype, str) else rdtype
    rd = dns.rdata.from_text(dns.rdataclass.IN, rdt, text, origin=origin)
    return from_rdata(owner, ttl, rd)


def from_rdata(owner: dns.name.Name, ttl: int, rd: dns.rdata.Rdata) -> Record:
    return Record(owner, ttl, dns.rdatatype.to_text(rd.rdtype),
                  rd.to_text(origin=None, relativize=False))


def empty_nonterminals(zone: Zone) -> list[dns.name.Name]:
    """Names between the origin and an owner that own no record themselves, sorted."""
    owners = {r.owner for r in zone.records}
    ents: set[dns.name.Name] = set()
    for owner in owners:
        name = owner
        while name != zone.origin and len(name) > len(zone.origin):
            name = name.parent()
            if name not in owners:
                ents.add(name)
    ents.discard(zone.origin)
    return sorted(ents)


def canonical_set(zones: Iterable[Zone]) -> dict[str, list[tuple[str, int, str, str]]]:
    """A whole data set in comparable form: zone key -> canonical records."""
    return {z.key: z.canonical() for z in zones}

