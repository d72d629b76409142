"""Progress on stderr: a redrawn line for long streams (loads), a line per step for runs."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator

from bench.measure.loading import ZoneCounter
from zonedata.model import Zone


class ZoneProgress:
    """Redraws one status line twice a second while zones stream past (on a terminal only)."""

    def __init__(self, label: str, total_zones: int | None = None) -> None:
        self.label = label
        self.total = total_zones
        self.counter = ZoneCounter()
        self.start = time.monotonic()
        self._drawn = 0.0
        self.enabled = sys.stderr.isatty()

    def wrap(self, zones: Iterable[Zone]) -> Iterator[Zone]:
        for zone in self.counter.count(zones):
            self._maybe_draw()
            yield zone
        self.finish()

    def _maybe_draw(self) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._drawn < 0.5:
            return
        self._drawn = now
        elapsed = now - self.start
        zones, records = self.counter.zones, self.counter.records
        rate = records / elapsed if elapsed > 0 else 0.0
        of = f"/{self.total}" if self.total else ""
        left = ""
        if self.total and zones:
            left = f", {elapsed * (self.total - zones) / zones:.0f}s left"
        sys.stderr.write(f"\r{self.label}: {zones}{of} zones, {records} records, "
                         f"{rate:,.0f} rec/s{left}   ")
        sys.stderr.flush()

    def finish(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 100 + "\r")
            sys.stderr.flush()


class StepProgress:
    """One line per step of a known plan: what runs, how far, roughly how long is left.

    The estimate starts from the plan's expected seconds and, once steps have finished, scales
    them by how long the finished ones really took.
    """

    def __init__(self, expected_s: list[float]) -> None:
        self.expected = expected_s
        self.done = 0
        self.start = time.monotonic()

    def step(self, label: str) -> None:
        """Announce the next step (the done-th) and count it."""
        left = self.seconds_left()
        print(f"[{self.done + 1}/{len(self.expected)}] {label} (about {left / 60:.0f} min left)",
              file=sys.stderr, flush=True)
        self.done += 1

    def skip(self, steps: int) -> None:
        """Steps of the plan that will not run (a cell that failed early)."""
        self.done = min(len(self.expected), self.done + steps)

    def seconds_left(self) -> float:
        planned_done = sum(self.expected[:self.done])
        scale = (time.monotonic() - self.start) / planned_done if planned_done > 0 else 1.0
        return scale * sum(self.expected[self.done:])
