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

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import dns.name

from base.errors import UserError
from base.process import run_checked
from loaders.store import DEFAULT_XFR_CLIENTS, CacheReading
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


# Berkeley DB's own statistics tool (Debian's db-util), for environments with shared regions.
DB_STAT = "/usr/bin/db_stat"
# db_stat prints a count of ten million or more as whole millions with an "M" (__db_dl).
_POOL_COUNT = r"^(\d+)(M?)\s+Requested pages {} in the cache"
_FOUND = re.compile(_POOL_COUNT.format("found"), re.M)
_NOT_FOUND = re.compile(_POOL_COUNT.format("not found"), re.M)


def db_stat_reading(home: Path, configured_bytes: int) -> CacheReading:
    """The memory pool of the environment at home, as `db_stat -m` reports it while other
    processes (named's driver) use it: pages found in the cache and not found."""
    text = run_checked([DB_STAT, "-m", "-h", str(home)], f"db_stat -m -h {home}", timeout=60)
    return CacheReading(f"Berkeley DB memory pool: db_stat -m, requested pages found / not "
                        f"found in the cache ({home.name} environment)", configured_bytes,
                        hits=_pool_count(_FOUND, text), misses=_pool_count(_NOT_FOUND, text))


def _pool_count(pattern: re.Pattern[str], text: str) -> int:
    """The first (pool-wide, before the per-file sections) count the pattern matches."""
    match = pattern.search(text)
    if match is None:
        raise UserError(f"db_stat -m printed no line matching {pattern.pattern!r}")
    return int(match.group(1)) * (1_000_000 if match.group(2) else 1)
