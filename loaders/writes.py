"""Record-level writes into a store while a server reads it: what a provisioning system does.

A `Change` is one write of one of five kinds (add, change or delete a record; add or delete a
zone). A store's loader opens a `StoreWriter` (Loader.writer) holding its own connection, and
each `apply` is one transaction of the store's own kind (an SQL transaction, an LDAP modify,
a Berkeley DB transaction, a file renamed into place). A change that cannot be made (the
record is already there, or is not; the zone is missing, or present) raises UserError and
changes nothing.

Empty non-terminals: the stores that keep marker rows for them (the DLZ stores' ENT rows,
PowerDNS's rows of type NULL) keep them right after every write: `fix_markers` walks from the
changed owner up to the apex and adds or drops the marker where the name's standing changed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import dns.name

from base.errors import UserError
from zonedata.model import Record, Zone

ADD, CHANGE, DELETE, ADD_ZONE, DELETE_ZONE = "add", "change", "delete", "add-zone", "delete-zone"
KINDS = (ADD, CHANGE, DELETE, ADD_ZONE, DELETE_ZONE)
RECORD_KINDS = (ADD, CHANGE, DELETE)
ZONE_KINDS = (ADD_ZONE, DELETE_ZONE)


@dataclass(frozen=True)
class Change:
    """One write. add: `record` into `zone`; change: `old` replaced by `record` (the same
    owner); delete: `record` (matched by owner, type and rdata, as DNS deletes it; its TTL
    is ignored); add-zone: `zone_records` as the new zone; delete-zone: the zone, whole."""

    kind: str
    zone: dns.name.Name
    record: Record | None = None
    old: Record | None = None
    zone_records: tuple[Record, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UserError(f"unknown kind of write {self.kind!r} (known: {', '.join(KINDS)})")
        if self.kind in RECORD_KINDS:
            if self.record is None or (self.kind == CHANGE) != (self.old is not None):
                raise UserError(f"a {self.kind} write needs its record"
                                + (" and the record it replaces" if self.kind == CHANGE
                                   else ""))
            for rec in (self.record, self.old):
                if rec is not None and not rec.owner.is_subdomain(self.zone):
                    raise UserError(f"{rec.owner} is outside zone {self.zone}")
            if self.old is not None and self.old.owner != self.record.owner:
                raise UserError("a change keeps the record's owner (delete and add otherwise)")
        if self.kind == ADD_ZONE and not self.zone_records:
            raise UserError(f"zone {self.zone} added without records")

    @property
    def owner(self) -> dns.name.Name:
        """The name whose answers the write changes (the apex for a zone's writes)."""
        return self.record.owner if self.record is not None else self.zone

    @property
    def removed(self) -> Record | None:
        """The record that goes (delete, change)."""
        return self.old if self.kind == CHANGE else self.record if self.kind == DELETE else None

    @property
    def added(self) -> Record | None:
        """The record that comes (add, change)."""
        return self.record if self.kind in (ADD, CHANGE) else None

    def text(self) -> str:
        """"add www.example. 300 A 192.0.2.1": the write in one line."""
        if self.kind in ZONE_KINDS:
            return f"{self.kind} {self.zone}"
        assert self.record is not None
        rec = self.record
        new = f"{rec.owner} {rec.ttl} {rec.rdtype} {rec.rdata}"
        if self.old is not None:
            return f"change {self.old.owner} {self.old.rdtype} {self.old.rdata} -> {new}"
        return f"{self.kind} {new}"

    def applied_to(self, zone: Zone | None) -> Zone | None:
        """The zone after this write (None: no zone); UserError if it cannot be made."""
        if self.kind == ADD_ZONE:
            if zone is not None:
                raise UserError(f"zone {self.zone} is already there")
            return Zone(self.zone, list(self.zone_records))
        if zone is None:
            raise UserError(f"zone {self.zone} is not there")
        if self.kind == DELETE_ZONE:
            return None
        records = list(zone.records)
        removed = self.removed
        if removed is not None:
            index = next((i for i, r in enumerate(records) if same_data(r, removed)), None)
            if index is None:
                raise UserError(f"{self.text()}: no such record")
            del records[index]
        added = self.added
        if added is not None:
            if any(same_data(r, added) for r in records):
                raise UserError(f"{self.text()}: the record is there already")
            records.append(added)
        return Zone(zone.origin, records)


def same_data(a: Record, b: Record) -> bool:
    """The same record to DNS: owner, type and rdata (a TTL is the RRset's, not the record's)."""
    return a.owner == b.owner and a.rdtype == b.rdtype and a.rdata == b.rdata


class StoreWriter(ABC):
    """A store open for writes with a connection of its own; `with` closes it."""

    @abstractmethod
    def apply(self, change: Change) -> None:
        """Make the change, one transaction; UserError (nothing changed) if it cannot be."""

    @abstractmethod
    def close(self) -> None:
        """Let go of the connection (and finish what the store keeps until then)."""

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ZoneRewriter(StoreWriter):
    """A store whose unit of writing is the zone (a file, a generation): each change reads
    the zone, applies the change to it and writes it back whole, or drops it."""

    @abstractmethod
    def read_zone(self, origin: dns.name.Name) -> Zone | None:
        """The zone as the store holds it now (None: no such zone)."""

    @abstractmethod
    def write_zone(self, zone: Zone) -> None:
        """Write the zone, replacing what the store held of it, atomically to a reader."""

    @abstractmethod
    def drop_zone(self, origin: dns.name.Name) -> None:
        """Remove the zone, atomically to a reader."""

    def apply(self, change: Change) -> None:
        after = change.applied_to(self.read_zone(change.zone))
        if after is None:
            self.drop_zone(change.zone)
        else:
            self.write_zone(after)


@dataclass(frozen=True)
class MarkerOps:
    """How one store answers and edits the empty-non-terminal markers of one zone, by name:
    does the name own a record, own a marker, have any row below it; add or drop its marker."""

    has_records: Callable[[dns.name.Name], bool]
    has_marker: Callable[[dns.name.Name], bool]
    has_below: Callable[[dns.name.Name], bool]
    add_marker: Callable[[dns.name.Name], None]
    drop_marker: Callable[[dns.name.Name], None]


def fix_markers(owner: dns.name.Name, origin: dns.name.Name, ops: MarkerOps) -> None:
    """After a record write at owner, the markers from owner up to the apex (not the apex) as
    a fresh load would write them: a name owning no record has a marker exactly when some
    name below it exists. Bottom up, so that each level sees the rows below it already right;
    it stops at the first level above the owner whose standing (a row or none) did not change,
    since nothing above it can have changed either."""
    name = owner
    while name != origin and len(name) > len(origin):
        records = ops.has_records(name)
        marker = ops.has_marker(name)
        wanted = not records and ops.has_below(name)
        if marker and not wanted:
            ops.drop_marker(name)
        elif wanted and not marker:
            ops.add_marker(name)
        if name != owner and (records or marker) == (records or wanted):
            return
        name = name.parent()
