"""The `native` store: zone files that BIND loads itself, the baseline every driver is held to.

There is no server: the target is a directory of zone files (one per zone, sharded, each
starting with its `$ORIGIN`), written by zonedata/zonefiles.py; servers/native.py points
named's `zone {}` statements at them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import dns.name

from databases.database import DirectoryDatabase
from loaders.loader import Loader
from loaders.writes import StoreWriter, ZoneRewriter
from zonedata.model import Zone, name_key
from zonedata.zonefiles import (
    read_zone_dir,
    read_zone_file,
    write_zone_dir,
    write_zone_file,
    zone_file_path,
    zone_files,
)


class NativeLoader(Loader[Path]):
    name = "native"
    database = DirectoryDatabase(name)
    read_at_start = True  # native BIND, NSD, Knot, PowerDNS's bind backend hold the zones

    def load(self, zones: Iterable[Zone], target: Path) -> None:
        """Each zone replaces its file atomically (temp file, rename) via write_zone_dir."""
        write_zone_dir(zones, target)

    def read_back(self, target: Path) -> Iterator[Zone]:
        if next(zone_files(target), None) is None:
            return iter(())
        return read_zone_dir(target)

    def writer(self, target: Path) -> StoreWriter:
        """Each change rewrites its zone's file (temp file, rename); the server must then be
        told to load it (ServerKind.tell_of_write: rndc reload of the zone, nsd-control,
        knotc)."""
        return NativeWriter(target)


class NativeWriter(ZoneRewriter):
    """Zone files replaced atomically, one per change, as a provisioning system that
    renders zone files does."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def read_zone(self, origin: dns.name.Name) -> Zone | None:
        path = zone_file_path(self.root, name_key(origin))
        return read_zone_file(path, origin) if path.exists() else None

    def write_zone(self, zone: Zone) -> None:
        path = zone_file_path(self.root, zone.key)
        path.parent.mkdir(exist_ok=True)
        write_zone_file(zone, path)

    def drop_zone(self, origin: dns.name.Name) -> None:
        zone_file_path(self.root, name_key(origin)).unlink()

    def close(self) -> None:
        pass  # nothing held open between writes


LOADER = NativeLoader()
