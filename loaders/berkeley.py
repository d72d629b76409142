"""What the file stores (fs, bdb, bdbhpt) share: one zone turned into nodes, and the node format.

A *node* is one owner name of a zone with all its records in one value, so that a driver answers
"records of N in Z" with one read (one file, one DB->get). The value is text, one record per line:

    <TYPE> SP <TTL> SP <rdata> LF

TYPE is the mnemonic (or TYPEnnn), TTL decimal, rdata presentation text with absolute names (it
may be empty, e.g. an APL without items, and never holds a line feed). An empty value is the
empty non-terminal marker: the name exists and owns nothing. Everything is ASCII, because
dnspython writes every byte outside 0x21..0x7e of a name or a string as a \\DDD escape.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import dns.name

from base.errors import UserError
from loaders.loader import DEFAULT_XFR_CLIENTS
from zonedata.model import Record, Zone, empty_nonterminals, name_key


@dataclass(frozen=True)
class Node:
    owner: dns.name.Name
    key: str          # name_key(owner): absolute, lower case, no final dot
    value: bytes      # record lines; b"" for an empty non-terminal


@dataclass(frozen=True)
class PreparedZone:
    origin: dns.name.Name
    key: str
    nodes: list[Node]     # sorted by key; owners and empty non-terminals
    records: int          # records only, markers not counted


def encode_lines(lines: Iterable[str]) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode("ascii")


def decode_lines(value: bytes) -> list[str]:
    return value.decode("ascii").splitlines()


# The ACL value every store writes per zone: one client address per line.
ACL_VALUE = encode_lines(DEFAULT_XFR_CLIENTS)


def record_line(record: Record) -> str:
    return f"{record.rdtype} {record.ttl} {record.rdata}"


def decode_records(owner: dns.name.Name, value: bytes) -> list[Record]:
    records = []
    for line in decode_lines(value):
        rdtype, ttl, rdata = line.split(" ", 2)
        records.append(Record(owner, int(ttl), rdtype, rdata))
    return records


def prepare_zone(zone: Zone) -> PreparedZone:
    """Read the zone's records once and group them into nodes, before any write happens.

    A zone whose record iterator raises therefore raises here, while the store still holds the
    old zone untouched: every loader writes only prepared zones.
    """
    records = list(zone.records)
    lines: dict[str, list[str]] = {}
    owners: dict[str, dns.name.Name] = {}
    for record in records:
        _check_record(zone, record)
        key = name_key(record.owner)
        owners.setdefault(key, record.owner)
        lines.setdefault(key, []).append(record_line(record))
    nodes = [Node(owners[k], k, encode_lines(sorted(v))) for k, v in lines.items()]
    for ent in empty_nonterminals(Zone(zone.origin, records)):
        nodes.append(Node(ent, name_key(ent), b""))
    nodes.sort(key=lambda node: node.key)
    return PreparedZone(zone.origin, zone.key, nodes, len(records))


def _check_record(zone: Zone, record: Record) -> None:
    where = f"record {record.owner} {record.rdtype} in zone {zone.origin}"
    if not record.owner.is_subdomain(zone.origin):
        raise UserError(f"{where}: owner is outside the zone")
    text = record_line(record)
    if "\n" in text or "\r" in text or not text.isascii():
        raise UserError(f"{where}: rdata text holds a line break or a non-ASCII character")
