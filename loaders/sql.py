"""What the PostgreSQL and MariaDB stores share: the same tables, so the same rows.

Both stores keep a zones table, a records table (absolute owner keys, ENT marker rows) and an
xfr_clients table, and both replace zones in batches of whole zones, one transaction each.
This module turns the model into those rows and back; how rows reach each server (COPY,
multi-row INSERTs) stays in loaders/pg.py and loaders/mysql.py.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from zonedata.model import ENT_TYPE, Record, Zone, empty_nonterminals, key_to_name, name_key

# Records per transaction: large enough that per-transaction costs vanish, small enough that
# a batch is a few megabytes of memory whatever the size of the data set.
BATCH_RECORDS = 5000

# One row of the records table without its zone id: (owner key, type, ttl, rdata text).
RecordRow = tuple[str, str, int, str]
# One row of the read-back statement: zone key, then owner key, ttl, type, rdata, all None
# for a zone without records.
ReadBackRow = tuple[str, str | None, int | None, str | None, str | None]


def schema_statements(path: Path) -> list[str]:
    """The statements of a schema file: `--` comment lines dropped, split at a final ';'."""
    lines = [line for line in path.read_text().splitlines()
             if not line.lstrip().startswith("--")]
    statements = re.split(r";[ \t]*$", "\n".join(lines), flags=re.MULTILINE)
    return [s.strip() for s in statements if s.strip()]


def zone_batches(zones: Iterable[Zone], max_records: int = BATCH_RECORDS) -> Iterator[list[Zone]]:
    """Consecutive zones grouped into batches of about max_records records.

    A zone that comes again in the stream closes the batch first, so that one transaction
    never replaces the same zone twice (the later copy wins, as it would zone by zone).
    """
    batch: list[Zone] = []
    keys: set[str] = set()
    size = 0
    for zone in zones:
        if zone.key in keys:
            yield batch
            batch, keys, size = [], set(), 0
        batch.append(zone)
        keys.add(zone.key)
        size += len(zone.records)
        if size >= max_records:
            yield batch
            batch, keys, size = [], set(), 0
    if batch:
        yield batch


def zone_rows(zone: Zone) -> Iterator[RecordRow]:
    """The zone's records, then one ENT marker row (ttl 0, no data) per empty non-terminal."""
    for record in zone.records:
        yield name_key(record.owner), record.rdtype, record.ttl, record.rdata
    for name in empty_nonterminals(zone):
        yield name_key(name), ENT_TYPE, 0, ""


# Every zone with its records (ENT markers are not records), grouped by zone for streaming;
# the same text for both servers (psycopg and MySQLdb both take %s placeholders).
READ_BACK = """
SELECT z.name, r.name, r.ttl, r.type, r.data
  FROM zones z LEFT JOIN records r ON r.zone_id = z.id AND r.type <> %s
 ORDER BY z.id
"""


def zones_from_rows(rows: Iterable[ReadBackRow]) -> Iterator[Zone]:
    """Read-back rows, grouped by zone (ordered so), back into the model's Zones."""
    for zone_key, group in itertools.groupby(rows, key=lambda row: row[0]):
        records = [Record(key_to_name(owner), ttl, rdtype, data)
                   for _, owner, ttl, rdtype, data in group if owner is not None]
        yield Zone(key_to_name(zone_key), records)


def zone_keys(batch: list[Zone]) -> list[str]:
    return [zone.key for zone in batch]

