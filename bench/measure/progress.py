"""Progress on stderr: a redrawn line for long streams (loads), a line per step for runs."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator

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

    The estimate is the plan's expected seconds for the steps not yet run, scaled by how long
    the finished steps really took against their own expected seconds. Time outside any step
    and steps that will not run (skipped, or replaced when a plan changes) do not enter that
    scale: when they did (elapsed time since the start over the expected seconds of every
    step passed, skipped ones too), a run of 399 steps said "about 15 min left" from step 8
    to step 97.
    """

    def __init__(self, expected_s: list[float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.expected = list(expected_s)
        self.done = 0
        self.clock = clock
        self._ran_expected = 0.0   # of the finished steps
        self._ran_actual = 0.0
        self._current: tuple[float, float] | None = None  # (start, expected) of the step running

    def step(self, label: str) -> None:
        """Announce the next step (the done-th) and count it."""
        self._finish_current()
        left = self.seconds_left()
        print(f"[{self.done + 1}/{max(len(self.expected), self.done + 1)}] {label} "
              f"(about {left / 60:.0f} min left)", file=sys.stderr, flush=True)
        expected = self.expected[self.done] if self.done < len(self.expected) else 0.0
        self._current = (self.clock(), expected)
        self.done += 1

    def _finish_current(self) -> None:
        if self._current is not None:
            start, expected = self._current
            self._ran_actual += self.clock() - start
            self._ran_expected += expected
            self._current = None

    def skip(self, steps: int) -> None:
        """The next `steps` steps of the plan will not run (a cell that failed early): they
        leave the plan."""
        self.replace_next(steps, [])

    def replace_next(self, steps: int, expected_s: list[float]) -> None:
        """The next `steps` steps of the plan become `expected_s` (the rounds still ahead,
        re-planned at the pace so far)."""
        self._finish_current()
        self.expected[self.done:self.done + steps] = expected_s

    def seconds_left(self) -> float:
        scale = self._ran_actual / self._ran_expected if self._ran_expected > 0 else 1.0
        return scale * sum(self.expected[self.done:])
