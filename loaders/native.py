"""The `native` store: zone files that BIND loads itself, the baseline every driver is held to.

There is no server: the target is a directory of zone files (one per zone, sharded, each
starting with its `$ORIGIN`), written by zonedata/zonefiles.py; servers/native.py points
named's `zone {}` statements at them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from databases.database import DirectoryDatabase
from loaders.loader import Loader
from zonedata.model import Zone
from zonedata.zonefiles import read_zone_dir, write_zone_dir, zone_files


class NativeLoader(Loader[Path]):
    name = "native"
    database = DirectoryDatabase(name)

    def load(self, zones: Iterable[Zone], target: Path) -> None:
        """Each zone replaces its file atomically (temp file, rename) via write_zone_dir."""
        write_zone_dir(zones, target)

    def read_back(self, target: Path) -> Iterator[Zone]:
        if next(zone_files(target), None) is None:
            return iter(())
        return read_zone_dir(target)


LOADER = NativeLoader()
