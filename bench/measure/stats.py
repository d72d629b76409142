"""The statistics of a run measured in rounds: medians with 95% confidence intervals, ratios
from round-paired runs, the order of the cells in each round, and when to stop.

One interval everywhere: the distribution-free order-statistic interval for a median. For n
independent runs of one cell, the true median lies between the j-th smallest and the j-th
largest run with probability 1 - 2 P(Binomial(n, 1/2) <= j - 1); j is the largest index for
which that is >= 95%. It needs no assumption about the shape of the runs' distribution (the
runs on this VM are skewed: a slow minute drags a few runs far down), no random numbers (so no
seed to record, and a rerun of the report gives the same figures), and its coverage is known
exactly at any n, where a bootstrap percentile interval's is only approximate at the 6-30
rounds a run affords (the bootstrap distribution of a median takes a handful of values).
It needs n >= 6 (with 5 runs, the widest interval, min to max, covers 93.75%): fewer runs give
no interval, and the report says so.

A ratio (a server's QPS to native BIND's, or to the memory driver's) is never a ratio of two
medians: each round runs every cell once, so round r gives one ratio QPS(cell, r) / QPS(ref, r)
over two runs minutes apart at most, in which the machine's drift largely cancels; the
ratio's estimate is the median of those per-round ratios, with the same order-statistic
interval over them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

LEVEL = 0.95
DEFAULT_TARGET = 0.05  # the ratios' half-width the rounds continue for (+-5%)

T = TypeVar("T")


@dataclass(frozen=True)
class Interval:
    """A median (of runs, or of per-round ratios) with its 95% interval; low/high None when
    there are too few values for one (n < 6)."""

    estimate: float
    low: float | None
    high: float | None
    n: int

    @property
    def half_width(self) -> float | None:
        """The interval's larger side relative to the estimate (an interval of -3%/+6% has a
        half-width of 6%), None without an interval."""
        if self.low is None or self.high is None or self.estimate == 0:
            return None
        return max(self.estimate - self.low, self.high - self.estimate) / abs(self.estimate)

    def meets(self, target: float) -> bool:
        width = self.half_width
        return width is not None and width <= target


def order_statistic_ranks(n: int, level: float = LEVEL) -> tuple[int, int] | None:
    """(j, n + 1 - j), the 1-based ranks bounding the median's interval at `level`, or None
    when even (1, n) covers less."""
    best = None
    for j in range(1, n // 2 + 1):
        below = sum(math.comb(n, i) for i in range(j)) / 2 ** n  # P(Binomial <= j - 1)
        if 1 - 2 * below < level:
            break
        best = (j, n + 1 - j)
    return best


def median_interval(values: Sequence[float], level: float = LEVEL) -> Interval | None:
    """The median of `values` with its order-statistic interval (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    ranks = order_statistic_ranks(len(ordered), level)
    low, high = (None, None) if ranks is None else (ordered[ranks[0] - 1], ordered[ranks[1] - 1])
    return Interval(statistics.median(ordered), low, high, len(ordered))


def paired_ratios(cell: Mapping[int, float], reference: Mapping[int, float]) -> list[float]:
    """QPS(cell, r) / QPS(reference, r) for every round r both ran in (the rounds a cell
    missed, or a reference run that answered nothing, pair with nothing)."""
    return [cell[r] / reference[r] for r in sorted(cell.keys() & reference.keys())
            if reference[r] > 0]


def ratio_interval(cell: Mapping[int, float], reference: Mapping[int, float]) -> Interval | None:
    """The median of the round-paired ratios with its interval; None when no round pairs."""
    return median_interval(paired_ratios(cell, reference))


def round_order(cells: Sequence[T], round_index: int) -> list[T]:
    """The cells in the order round `round_index` runs them: the given order in even rounds,
    reversed in odd ones (ABBA), so that over each pair of rounds every cell has the same
    mean position and a drift of the machine across a round lands on no cell's side."""
    return list(cells) if round_index % 2 == 0 else list(reversed(cells))


def intervals_overlap(a: Interval, b: Interval) -> bool:
    """Do the two intervals share a value? Then the two figures are not distinguishable.
    Without an interval on either side, only equal estimates overlap."""
    a_low, a_high = _bounds(a)
    b_low, b_high = _bounds(b)
    return a_low <= b_high and b_low <= a_high


def _bounds(i: Interval) -> tuple[float, float]:
    if i.low is None or i.high is None:
        return i.estimate, i.estimate
    return i.low, i.high


@dataclass(frozen=True)
class StopRule:
    """When rounds end: at least `min_rounds`; then as soon as every ratio's half-width is
    within `target`, or when one more round would not fit in `budget_s` (at the mean duration
    of the rounds so far), or after `max_rounds`."""

    min_rounds: int
    max_rounds: int
    budget_s: float
    target: float = DEFAULT_TARGET

    def reason_to_stop(self, rounds_done: int, ratios: Sequence[Interval | None],
                       elapsed_s: float) -> str | None:
        """Why the rounds end after `rounds_done` rounds taking `elapsed_s` in all, or None
        to run another."""
        if rounds_done < self.min_rounds:
            return None
        if all(r is not None and r.meets(self.target) for r in ratios):
            return f"every ratio within +-{100 * self.target:g}%"
        if rounds_done >= self.max_rounds:
            return f"{self.max_rounds} rounds, the profile's most"
        if elapsed_s + elapsed_s / rounds_done > self.budget_s:
            return f"time budget ({self.budget_s / 60:g} min of rounds)"
        return None
