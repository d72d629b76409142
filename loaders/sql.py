"""What the PostgreSQL and MariaDB stores share: the same tables, so the same rows.

Both stores keep a zones table, a records table (absolute owner keys, ENT marker rows) and an
xfr_clients table, and both replace zones in batches of whole zones, one transaction each.
This module turns the model into those rows and back; how rows reach each server (COPY,
multi-row INSERTs) stays in loaders/pg.py and loaders/mysql.py.
"""

from __future__ import annotations

import itertools
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import dns.name

from base.errors import UserError
from loaders.writes import (
    ADD_ZONE,
    DELETE_ZONE,
    Change,
    MarkerOps,
    StoreWriter,
    fix_markers,
)
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



# --- record-level writes (loaders/writes.py) --------------------------------------------------


class SqlSession(ABC):
    """One connection of a writer, whatever the client library: statements with %s
    placeholders (psycopg and MySQLdb alike), one transaction per block."""

    @abstractmethod
    def run(self, query: str, params: Sequence[object] = ()) -> tuple[list[tuple], int]:
        """(the rows it returned, text columns as str; the rows it changed)."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[object]:
        """The block's statements committed at its end, rolled back if it raises."""

    @abstractmethod
    def close(self) -> None: ...


@dataclass(frozen=True)
class Layout:
    """What SqlWriter needs to know of a zones/records layout: its statements (%s
    placeholders), how a name is spelled in it, what its data column holds of a record, and
    the values of a marker row after (zone id, name)."""

    zone_id: str  # (zone name) -> its id
    record_rows: str  # (zone id, name) -> (type, data) of its records, markers not
    marker_rows: str  # (zone id, name) -> its marker row, if any
    below: str  # (zone id, "." + name twice) -> a row whose name ends so, if any
    add_marker: str  # (zone id, name, *marker_values)
    drop_marker: str  # (zone id, name)
    drop_record: str  # (zone id, name, type, data); changes 0 rows or 1
    drop_zone: tuple[str, ...]  # each (zone id)
    spell: Callable[[dns.name.Name], str]
    data: Callable[[Record], str]


# What a store's loader does itself: insert a record's row (session, zone id, record), the
# values of a marker row after (zone id, name) (session, zone id, name), a whole new zone.
InsertRecord = Callable[[SqlSession, int, Record], None]
MarkerValues = Callable[[SqlSession, int, dns.name.Name], tuple]
InsertZone = Callable[[SqlSession, Zone], None]


class SqlWriter(StoreWriter):
    """Writes into a zones/records layout, each change one transaction, markers of empty
    non-terminals kept right (loaders/writes.py: fix_markers)."""

    def __init__(self, session: SqlSession, layout: Layout, insert_record: InsertRecord,
                 marker_values: MarkerValues, insert_zone: InsertZone) -> None:
        self.session = session
        self.layout = layout
        self.insert_record = insert_record
        self.marker_values = marker_values
        self.insert_zone = insert_zone

    def apply(self, change: Change) -> None:
        with self.session.transaction():
            zone_id = self._zone_id(change.zone)
            if change.kind == ADD_ZONE:
                if zone_id is not None:
                    raise UserError(f"zone {change.zone} is already there")
                self.insert_zone(self.session, Zone(change.zone, list(change.zone_records)))
                return
            if zone_id is None:
                raise UserError(f"zone {change.zone} is not there")
            if change.kind == DELETE_ZONE:
                for statement in self.layout.drop_zone:
                    self.session.run(statement, (zone_id,))
                return
            self._record_write(change, zone_id)

    def _zone_id(self, origin: dns.name.Name) -> int | None:
        rows, _ = self.session.run(self.layout.zone_id, (self.layout.spell(origin),))
        return int(rows[0][0]) if rows else None

    def _record_write(self, change: Change, zone_id: int) -> None:
        layout, run = self.layout, self.session.run
        removed, added = change.removed, change.added
        if removed is not None:
            _, count = run(layout.drop_record, (zone_id, layout.spell(removed.owner),
                                                removed.rdtype, layout.data(removed)))
            if count != 1:
                raise UserError(f"{change.text()}: no such record")
        if added is not None:
            rows, _ = run(layout.record_rows, (zone_id, layout.spell(added.owner)))
            if (added.rdtype, layout.data(added)) in {(t, d) for t, d in rows}:
                raise UserError(f"{change.text()}: the record is there already")
            self.insert_record(self.session, zone_id, added)
        fix_markers(change.owner, change.zone, self._marker_ops(zone_id))

    def _marker_ops(self, zone_id: int) -> MarkerOps:
        layout, run = self.layout, self.session.run

        def rows(query: str, *params: object) -> bool:
            return bool(run(query, (zone_id, *params))[0])

        def add(name: dns.name.Name) -> None:
            run(layout.add_marker, (zone_id, layout.spell(name),
                                    *self.marker_values(self.session, zone_id, name)))

        def drop(name: dns.name.Name) -> None:
            run(layout.drop_marker, (zone_id, layout.spell(name)))

        def below(name: dns.name.Name) -> bool:
            suffix = "." + layout.spell(name)
            return rows(layout.below, suffix, suffix)

        return MarkerOps(
            has_records=lambda name: rows(layout.record_rows, layout.spell(name)),
            has_marker=lambda name: rows(layout.marker_rows, layout.spell(name)),
            has_below=below, add_marker=add, drop_marker=drop)

    def close(self) -> None:
        self.session.close()


# The DLZ stores' layout (schemas/pg.sql, schemas/mysql.sql): rows of type ENT are markers.
DLZ_LAYOUT = Layout(
    zone_id="SELECT id FROM zones WHERE name = %s",
    record_rows="SELECT type, data FROM records WHERE zone_id = %s AND name = %s "
                f"AND type <> '{ENT_TYPE}'",
    marker_rows=f"SELECT 1 FROM records WHERE zone_id = %s AND name = %s AND type = '{ENT_TYPE}'",
    # A scan of the zone's rows (records_zone_name, records_zone): only when a name's last
    # record goes or a name appears, and only for the names above it.
    below="SELECT 1 FROM records WHERE zone_id = %s AND RIGHT(name, LENGTH(%s)) = %s LIMIT 1",
    add_marker=f"INSERT INTO records (zone_id, name, type, ttl, data) "
               f"VALUES (%s, %s, '{ENT_TYPE}', 0, '')",
    drop_marker=f"DELETE FROM records WHERE zone_id = %s AND name = %s AND type = '{ENT_TYPE}'",
    drop_record="DELETE FROM records WHERE zone_id = %s AND name = %s AND type = %s "
                "AND data = %s",
    drop_zone=("DELETE FROM zones WHERE id = %s",),  # records, xfr_clients: ON DELETE CASCADE
    spell=name_key, data=lambda record: record.rdata)
