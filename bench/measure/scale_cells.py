"""The cells of `scale` (results.json's "scale"): one server over one data set (zones x
records per zone) under one query mix, with the store's size, load and cache figures."""

from __future__ import annotations

from dataclasses import dataclass

from bench.measure.cells import Cell
from bench.measure.serial import Section


@dataclass
class SizeCell:
    """`scale`: one server over one data set (zones x records per zone) under one query mix:
    the runner's figures (QPS, latency, CPU and RSS of the server and the database) with the store's
    size on disk, its load and its cache figures (CacheReading.since over the QPS runs)."""

    zones: int
    records_per_zone: int
    mix: str                 # "uniform" or "popular" (zonedata/mixes.py)
    cell: Cell
    shape: bool = False      # from --shapes (few large against many small zones)
    not_measured: str | None = None   # why the cell was left out (it would not fit in memory)
    store_bytes: int | None = None
    load_seconds: float | None = None
    records_per_second: float | None = None
    loader_rss_kb: int | None = None
    cache: dict | None = None

    @property
    def server(self) -> str:
        return self.cell.server

    @property
    def key(self) -> tuple[str, int, int, str]:
        return self.server, self.zones, self.records_per_zone, self.mix


SECTION = Section("scale", list[SizeCell], always=True)
