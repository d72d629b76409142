"""The Berkeley DB store: one database file per access method, laid out in schemas/bdb.md.

Both files hold the same keys, in one unnamed database each (ASCII, single spaces):

    Z <zone>            -> b""                       the zone exists (findzonedb: one get)
    D <zone> <owner>    -> record lines, b"" = ENT   (lookup: one get per name)
    A <zone>            -> client address lines      (allowzonexfr: one get)
    X <zone>            -> owner key lines           (hash file only: what allnodes walks;
                                                      the btree file range-scans "D <zone> ")

A load works on copies of the files and renames them into place at its end, so a running named,
which has the old files open, keeps a consistent snapshot until it reopens them. A zone is read
whole before its first write, so a load that raises between zones keeps the zones it finished;
one that raises inside a database write keeps none of them (the copies are dropped).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType

from berkeleydb import db

from databases.database import CacheReading, DirectoryDatabase
from loaders.berkeley import (
    ACL_VALUE,
    PreparedZone,
    decode_lines,
    decode_records,
    encode_lines,
    prepare_zone,
)
from loaders.loader import Loader
from zonedata.model import Zone, key_to_name

# The loader's private cache per file; the access pattern of a load is random across zones.
CACHE_BYTES = 256 * 1024 * 1024

# One file per access method, both always written; a driver reads the one its `access`
# option names (servers/__init__.py: bdb-btree, bdb-hash).
FILES = {"btree": "btree.db", "hash": "hash.db"}
ACCESS_METHODS = {"btree": db.DB_BTREE, "hash": db.DB_HASH}


def zone_key(zone: str) -> bytes:
    return f"Z {zone}".encode("ascii")


def data_key(zone: str, owner: str) -> bytes:
    return f"D {zone} {owner}".encode("ascii")


def acl_key(zone: str) -> bytes:
    return f"A {zone}".encode("ascii")


def xfr_key(zone: str) -> bytes:
    return f"X {zone}".encode("ascii")


def _open(path: Path, method: int, flags: int) -> db.DB:
    handle = db.DB()
    handle.set_cachesize(0, CACHE_BYTES, 1)
    handle.set_get_returns_none(2)  # a miss is None for cursors too, not an exception
    handle.open(str(path), None, method, flags, 0o644)
    return handle


def _prefix_scan(handle: db.DB, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) of a btree whose key starts with prefix, in key order."""
    cursor = handle.cursor()
    try:
        item = cursor.set_range(prefix)
        while item is not None and item[0].startswith(prefix):
            yield item
            item = cursor.next()
    finally:
        cursor.close()


class _File:
    """One store file of one access method, being rewritten as a copy."""

    def __init__(self, path: Path, method: int) -> None:
        self.path = path
        self.method = method
        self.work = path.with_name(f"{path.name}.new-{os.getpid()}")
        if path.exists():
            shutil.copyfile(path, self.work)
        self.handle = _open(self.work, method, db.DB_CREATE)

    def replace_zone(self, zone: PreparedZone) -> None:
        self._delete_zone(zone.key)
        for node in zone.nodes:
            self.handle.put(data_key(zone.key, node.key), node.value)
        if self.method == db.DB_HASH:
            self.handle.put(xfr_key(zone.key), encode_lines(n.key for n in zone.nodes))
        self.handle.put(acl_key(zone.key), ACL_VALUE)
        self.handle.put(zone_key(zone.key), b"")

    def _delete_zone(self, zone: str) -> None:
        if self.method == db.DB_BTREE:
            prefix = data_key(zone, "")
            cursor = self.handle.cursor()
            item = cursor.set_range(prefix)
            while item is not None and item[0].startswith(prefix):
                cursor.delete()
                item = cursor.next()
            cursor.close()
        else:
            owners = self.handle.get(xfr_key(zone))
            for owner in decode_lines(owners or b""):
                self.handle.delete(data_key(zone, owner))
        for key in (xfr_key(zone), acl_key(zone), zone_key(zone)):
            if self.handle.exists(key):
                self.handle.delete(key)

    def finish(self, commit: bool) -> None:
        self.handle.close()
        if commit:
            os.replace(self.work, self.path)
        else:
            self.work.unlink(missing_ok=True)


class _Writer:
    """Both files of a store, renamed into place together unless a zone was left half-written."""

    def __init__(self, target: Path) -> None:
        self.files: list[_File] = []
        self.dirty = False
        try:
            for access, name in FILES.items():
                self.files.append(_File(target / name, ACCESS_METHODS[access]))
        except BaseException:
            self.dirty = True
            self.__exit__(None, None, None)
            raise

    def replace_zone(self, zone: PreparedZone) -> None:
        self.dirty = True
        for file in self.files:
            file.replace_zone(zone)
        self.dirty = False

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for file in self.files:
            file.finish(commit=not self.dirty)


def read_zones(path: Path) -> Iterator[Zone]:
    """Every zone of one store file, read the way the driver's allnodes reads it."""
    handle = _open(path, db.DB_UNKNOWN, db.DB_RDONLY)
    try:
        is_btree = handle.get_type() == db.DB_BTREE
        for zone in _zone_keys(handle, is_btree):
            origin = key_to_name(zone)
            nodes = (_btree_nodes(handle, zone) if is_btree else _hash_nodes(handle, zone))
            records = [r for owner, value in nodes
                       for r in decode_records(key_to_name(owner), value)]
            yield Zone(origin, records)
    finally:
        handle.close()


def _zone_keys(handle: db.DB, is_btree: bool) -> list[str]:
    if is_btree:
        keys = [key for key, _ in _prefix_scan(handle, b"Z ")]
    else:
        # A hash has no order: only read-back walks every key to find the zones.
        keys = [key for key in handle.keys() if key.startswith(b"Z ")]
    return sorted(key[2:].decode("ascii") for key in keys)


def _btree_nodes(handle: db.DB, zone: str) -> list[tuple[str, bytes]]:
    prefix = data_key(zone, "")
    return [(key[len(prefix):].decode("ascii"), value)
            for key, value in _prefix_scan(handle, prefix)]


def _hash_nodes(handle: db.DB, zone: str) -> list[tuple[str, bytes]]:
    owners = decode_lines(handle.get(xfr_key(zone)) or b"")
    return [(owner, handle.get(data_key(zone, owner))) for owner in owners]


def _cache_reading(target: Path, options: Mapping[str, str]) -> CacheReading:
    # drivers/bdb opens the file with no environment: each connection's cache is private
    # to named (set to the loader's size there), with no region another process could read.
    return CacheReading("Berkeley DB without an environment: one private cache per driver "
                        "connection inside named, not readable from outside; the size is "
                        "per connection", CACHE_BYTES)


class BdbLoader(Loader[Path]):
    name = "bdb"
    no_writes = ("the bdb driver keeps the file it opened; a write "
                 "lands in a copy renamed in, seen only after rndc reload")
    database = DirectoryDatabase(name, _cache_reading)

    def load(self, zones: Iterable[Zone], target: Path) -> None:
        with _Writer(target) as writer:
            for zone in zones:
                writer.replace_zone(prepare_zone(zone))

    def read_back(self, target: Path) -> Iterator[Zone]:
        """The btree file's zones, each checked against the hash file's copy (none before a
        first load has renamed its files into place: an interrupted first load leaves none)."""
        if not any((target / name).exists() for name in FILES.values()):
            return
        hashed = {z.key: z.canonical() for z in read_zones(target / FILES["hash"])}
        for zone in read_zones(target / FILES["btree"]):
            if hashed.pop(zone.key, None) != zone.canonical():
                raise RuntimeError(f"bdb files disagree on zone {zone.key}")
            yield zone
        if hashed:
            raise RuntimeError(f"zones only in the hash file: {', '.join(sorted(hashed))}")

    def dlz_args(self, target: Path, options: Mapping[str, str]) -> dict[str, str]:
        return {"file": str((Path(target) / FILES[options["access"]]).resolve())}


LOADER = BdbLoader()
