"""Loads measured from outside the stores, the same way for every store.

A loader only writes (loaders/loader.py); the clock and the counts are here, as YCSB's DBWrapper
times every binding: the load is timed from the first zone handed to the store until the store
returns, and zones and records are counted as they stream past.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from loaders.loader import Loader
from zonedata.model import Zone


@dataclass
class LoadStats:
    store: str
    zones: int = 0
    records: int = 0
    seconds: float = 0.0
    last_zone: str = ""  # key of the last zone loaded (startup is timed until it answers)

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


class ZoneCounter:
    """Passes zones through, counting zones and records and keeping the last zone's key."""

    def __init__(self) -> None:
        self.zones = 0
        self.records = 0
        self.last_key = ""

    def count(self, zones: Iterable[Zone]) -> Iterator[Zone]:
        for zone in zones:
            self.zones += 1
            self.records += len(zone.records)
            self.last_key = zone.key
            yield zone


def timed_load(loader: Loader[Any], zones: Iterable[Zone], target: Any) -> LoadStats:
    """loader.load(zones, target), timed and counted."""
    counter = ZoneCounter()
    start = time.monotonic()
    loader.load(counter.count(zones), target)
    return LoadStats(loader.name, counter.zones, counter.records, time.monotonic() - start,
                     counter.last_key)
