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

    The estimate is the plan's expected seconds for the steps not yet run, each scaled by how
    long the finished steps *of its kind* really took against their own expected seconds (a
    kind not yet run keeps the plan's seconds). Time outside any step and steps that will not
    run (skipped, or replaced when a plan changes) do not enter that scale: when they did, a
    run of 399 steps said "about 15 min left" from step 8 to step 97. One scale for every kind
    was wrong too: `make bench` loads its stores in seconds against about a minute planned, and
    that pace, applied to 20 minutes of rounds (whose length is a time budget, not a pace),
    said "about 3 min left" at step 9 of a run that took 23 minutes (2026-11-26).
    """

    def __init__(self, expected_s: list[float],
                 clock: Callable[[], float] = time.monotonic,
                 kinds: list[str] | None = None) -> None:
        self.expected = list(expected_s)
        # One kind for every step unless told: the pace of any step then scales every other.
        self.kinds = list(kinds) if kinds is not None else [""] * len(self.expected)
        if len(self.kinds) != len(self.expected):
            raise ValueError("a kind per expected step")
        self.done = 0
        self.clock = clock
        self._pace: dict[str, tuple[float, float]] = {}  # kind -> (actual, expected) finished
        # (start, expected, kind) of the step running
        self._current: tuple[float, float, str] | None = None

    def step(self, label: str) -> None:
        """Announce the next step (the done-th) and count it."""
        self._finish_current()
        left = self.seconds_left()
        print(f"[{self.done + 1}/{max(len(self.expected), self.done + 1)}] {label} "
              f"(about {left / 60:.0f} min left)", file=sys.stderr, flush=True)
        planned = self.done < len(self.expected)
        self._current = (self.clock(), self.expected[self.done] if planned else 0.0,
                         self.kinds[self.done] if planned else "")
        self.done += 1

    def _finish_current(self) -> None:
        if self._current is not None:
            start, expected, kind = self._current
            actual, planned = self._pace.get(kind, (0.0, 0.0))
            self._pace[kind] = (actual + self.clock() - start, planned + expected)
            self._current = None

    def skip(self, steps: int) -> None:
        """The next `steps` steps of the plan will not run (a cell that failed early): they
        leave the plan."""
        self.replace_next(steps, [])

    def replace_next(self, steps: int, expected_s: list[float]) -> None:
        """The next `steps` steps of the plan become `expected_s` (the rounds still ahead,
        re-planned at the pace so far), of the kind of the first step they replace."""
        self._finish_current()
        kind = self.kinds[self.done] if self.done < len(self.kinds) else ""
        self.expected[self.done:self.done + steps] = expected_s
        self.kinds[self.done:self.done + steps] = [kind] * len(expected_s)

    def seconds_left(self) -> float:
        return sum(seconds * self._scale(kind)
                   for seconds, kind in zip(self.expected[self.done:], self.kinds[self.done:],
                                             strict=True))

    def _scale(self, kind: str) -> float:
        """How long this kind's finished steps took over their plan (1 before any finished)."""
        actual, planned = self._pace.get(kind, (0.0, 0.0))
        return actual / planned if planned > 0 else 1.0
