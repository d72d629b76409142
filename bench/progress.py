"""A one-line progress display for long streams (loads, runs), on stderr."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator

from zonedata.model import Zone


class ZoneProgress:
    """Counts zones and records as they stream past and redraws one status line twice a second."""

    def __init__(self, label: str, total_zones: int | None = None) -> None:
        self.label = label
        self.total = total_zones
        self.zones = 0
        self.records = 0
        self.start = time.monotonic()
        self._drawn = 0.0
        self.enabled = sys.stderr.isatty()

    def wrap(self, zones: Iterable[Zone]) -> Iterator[Zone]:
        for zone in zones:
            self.zones += 1
            self.records += len(zone.records)
            self._maybe_draw()
            yield zone
        self.finish()

    def _maybe_draw(self) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._drawn < 0.5:
            return
        self._drawn = now
        elapsed = now - self.start
        rate = self.records / elapsed if elapsed > 0 else 0.0
        of = f"/{self.total}" if self.total else ""
        left = ""
        if self.total and self.zones:
            left = f", {elapsed * (self.total - self.zones) / self.zones:.0f}s left"
        sys.stderr.write(f"\r{self.label}: {self.zones}{of} zones, {self.records} records, "
                         f"{rate:,.0f} rec/s{left}   ")
        sys.stderr.flush()

    def finish(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 100 + "\r")
            sys.stderr.flush()
