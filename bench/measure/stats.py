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

Runs are not independent, though: the rounds after one fresh start of a server share its
state (the between-start intraclass correlation of the committed bdbhpt rows is 0.23-0.44),
so an interval over runs is too narrow. `start_interval` treats fresh starts as the
independent unit: the geometric mean of a per-run figure from one mean per start, with a t
interval over the starts. Two samples (two runs' figures, or their per-start means) are told
apart by `verdict`: a shift estimate with its interval (Hodges-Lehmann on log values, the
interval from inverting the Mann-Whitney test) says "changed", an equivalence test within
+-margin (two one-sided Mann-Whitney tests) says "the same", and neither says "undecided".
The tests are scipy.stats's; scipy is imported where it is used, since importing it takes
half a second and most of the suite never needs it.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TypeVar

LEVEL = 0.95
DEFAULT_TARGET = 0.05  # the ratios' half-width the rounds continue for (+-5%)
DEFAULT_MARGIN = 0.05  # two samples within +-5% of each other are "the same"
# The rounds end on the target only when two checks in a row meet it: a check after every
# round stops at the first chance dip of a width, which narrows the intervals it reports.
CHECKS_IN_A_ROW = 2

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
    """Do the two intervals share a value? Then these intervals cannot tell the two figures
    apart, which is no evidence that they agree (`verdict` tests that). Without an interval on
    either side, only equal estimates overlap."""
    a_low, a_high = _bounds(a)
    b_low, b_high = _bounds(b)
    return a_low <= b_high and b_low <= a_high


def _bounds(i: Interval) -> tuple[float, float]:
    if i.low is None or i.high is None:
        return i.estimate, i.estimate
    return i.low, i.high


# --- fresh starts as the independent unit ----------------------------------------------------

def start_means(values: Sequence[float], starts: Sequence[int]) -> list[float]:
    """The geometric mean of the (positive) values of each fresh start, in start order:
    values[i] was measured after start starts[i]."""
    if len(values) != len(starts):
        raise ValueError("one start per value")
    logs: dict[int, list[float]] = {}
    for value, start in zip(_logs(values), starts, strict=True):
        logs.setdefault(start, []).append(value)
    return [math.exp(statistics.fmean(logs[start])) for start in sorted(logs)]


def start_interval(values: Sequence[float], starts: Sequence[int],
                   level: float = LEVEL) -> Interval | None:
    """The geometric mean of a per-run figure with its interval, fresh starts as the
    independent unit: the log values' mean per start, then the mean of those with a t interval
    over the starts (n is the number of starts; each start weighs the same, however many runs
    it had). None without values; no interval from a single start."""
    if not values:
        return None
    from scipy import stats as scipy_stats

    logs = [math.log(m) for m in start_means(values, starts)]
    estimate = math.exp(statistics.fmean(logs))
    if len(logs) < 2:
        return Interval(estimate, None, None, len(logs))
    if len(set(logs)) == 1:  # every start alike: the t interval has no width
        return Interval(estimate, estimate, estimate, len(logs))
    bounds = scipy_stats.ttest_1samp(logs, 0.0).confidence_interval(level)
    return Interval(estimate, math.exp(bounds.low), math.exp(bounds.high), len(logs))


# --- two samples: changed, the same, or undecided -------------------------------------------

CHANGED, SAME, UNDECIDED = "changed", "the same", "undecided"


@dataclass(frozen=True)
class Shift:
    """How sample b stands to sample a, as a ratio b/a: the Hodges-Lehmann estimate (the
    median of every pairwise log(b_j) - log(a_i), exponentiated) with the interval of every
    shift the two-sided Mann-Whitney test does not reject at `level`; low/high None when no
    shift can be rejected (samples too small for the level)."""

    ratio: float
    low: float | None
    high: float | None
    n_a: int
    n_b: int

    @property
    def excludes_no_change(self) -> bool:
        return self.low is not None and self.high is not None and not self.low <= 1 <= self.high


def shift_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Shift:
    """b's shift from a on log values (both samples of positive values, one at least each).
    The interval's ends are pairwise differences: between two consecutive ones the
    Mann-Whitney statistic of (log b - d) against log a is constant, and its p-value rises
    towards the estimate and falls after it, so a bisection on each side finds the first and
    the last gap between differences whose shifts the test keeps."""
    from scipy import stats as scipy_stats

    x, y = _logs(a), _logs(b)
    if not x or not y:
        raise ValueError("a shift needs a value in each sample")
    estimate = statistics.median(v - u for u in x for v in y)
    differences = sorted({v - u for u in x for v in y})
    outside = 1.0 + differences[-1] - differences[0]
    edges = [differences[0] - outside, *differences, differences[-1] + outside]
    between = [(lo + hi) / 2 for lo, hi in pairwise(edges)]

    def kept(i: int) -> bool:
        """Does the test keep the shift between[i] (not reject it at `level`)?"""
        shifted = [v - between[i] for v in y]
        return bool(scipy_stats.mannwhitneyu(shifted, x).pvalue >= significance(level))

    centre = min(range(len(between)), key=lambda i: abs(between[i] - estimate))
    if not kept(centre):
        # Every gap is rejected, the estimate's own sides too: the estimate is a difference
        # so many pairs share (samples of tied values) that only it is kept.
        return Shift(math.exp(estimate), math.exp(estimate), math.exp(estimate), len(x), len(y))
    first = bisect_left(range(centre + 1), True, key=kept)
    last = centre - 1 + bisect_left(range(centre, len(between)), True,
                                    key=lambda i: not kept(i))
    if first == 0 or last == len(between) - 1:  # no shift, however large, is rejected
        return Shift(math.exp(estimate), None, None, len(x), len(y))
    return Shift(math.exp(estimate), math.exp(edges[first]), math.exp(edges[last + 1]),
                 len(x), len(y))


def equivalence_p(a: Sequence[float], b: Sequence[float],
                  margin: float = DEFAULT_MARGIN) -> float:
    """TOST: the p-value of "b/a lies outside [1 - margin, 1 + margin]", the larger of two
    one-sided Mann-Whitney tests on log values, b shifted to each bound (under 0.05: the
    two are the same within the margin at 95%)."""
    from scipy import stats as scipy_stats

    x, y = _logs(a), _logs(b)
    low, high = math.log(1 - margin), math.log(1 + margin)
    above_low = scipy_stats.mannwhitneyu([v - low for v in y], x, alternative="greater")
    below_high = scipy_stats.mannwhitneyu([v - high for v in y], x, alternative="less")
    return float(max(above_low.pvalue, below_high.pvalue))


@dataclass(frozen=True)
class Verdict:
    """Two samples judged: CHANGED (the shift's interval excludes no change, and the two are
    not within the margin), SAME (the equivalence test passed: any shift lies within
    +-margin, even one the shift interval detects), or UNDECIDED (neither: too few or too
    noisy values to tell)."""

    outcome: str
    shift: Shift
    p_same: float       # equivalence_p: under 1 - level, the two are the same
    margin: float


def verdict(a: Sequence[float], b: Sequence[float], margin: float = DEFAULT_MARGIN,
            level: float = LEVEL) -> Verdict:
    """Has figure b changed from figure a, given each one's independent values (positive:
    QPS, ratios, CPU per query of separate runs, or per-start means, start_means, where runs
    cluster by fresh start)? The verdict with the shift b/a, its interval and the
    equivalence test's p-value."""
    shift = shift_interval(a, b, level)
    p_same = equivalence_p(a, b, margin)
    if p_same < significance(level):
        outcome = SAME
    elif shift.excludes_no_change:
        outcome = CHANGED
    else:
        outcome = UNDECIDED
    return Verdict(outcome, shift, p_same, margin)


def significance(level: float) -> float:
    """1 - level, rounded: 1 - 0.95 is 0.050000000000000044 in floating point, which an exact
    p-value of 0.05 (the least 3 values a side can give) would pass as under it."""
    return round(1 - level, 12)


def _logs(values: Sequence[float]) -> list[float]:
    if any(v <= 0 for v in values):
        raise ValueError("shifts and geometric means are of positive values only")
    return [math.log(v) for v in values]


# --- when the rounds end ----------------------------------------------------------------------

@dataclass(frozen=True)
class WatchedRatio:
    """A ratio as the stop rule sees it: its name ("pg/native at 1 thread(s)"), its interval (None:
    too few rounds yet), and why the rule does not wait for it (None: it does)."""

    name: str
    interval: Interval | None
    not_waited_because: str | None = None


@dataclass(frozen=True)
class StopRule:
    """When rounds end: at least `min_rounds`; then as soon as every ratio waited for has met
    the `target` half-width in CHECKS_IN_A_ROW checks in a row (one check after every round),
    or when one more round would not fit in `budget_s` (at the mean duration of the rounds so
    far), or after `max_rounds`. With no ratio to wait for, at `min_rounds`, saying why. Every
    reason names the ratios not waited for."""

    min_rounds: int
    max_rounds: int
    budget_s: float
    target: float = DEFAULT_TARGET

    def target_met(self, ratios: Sequence[WatchedRatio]) -> bool:
        """Does every ratio waited for meet the target? Never for none: an empty set meets
        nothing."""
        waited = [r.interval for r in ratios if r.not_waited_because is None]
        return bool(waited) and all(i is not None and i.meets(self.target) for i in waited)

    def reason_to_stop(self, rounds_done: int, checks: Sequence[Sequence[WatchedRatio]],
                       elapsed_s: float) -> str | None:
        """Why the rounds end after `rounds_done` rounds taking `elapsed_s` in all, or None
        to run another; `checks`: the ratios after each round so far, the last one now."""
        if rounds_done < self.min_rounds:
            return None
        ratios = checks[-1] if checks else []
        recent = checks[-CHECKS_IN_A_ROW:]
        if not any(r.not_waited_because is None for r in ratios):
            reason = "no ratio to wait for" + ("" if ratios else " (no two cells to pair)")
        elif len(recent) == CHECKS_IN_A_ROW and all(self.target_met(c) for c in recent):
            reason = (f"every ratio within +-{100 * self.target:g}% in {CHECKS_IN_A_ROW} "
                      "checks in a row")
        elif rounds_done >= self.max_rounds:
            reason = f"{self.max_rounds} rounds, the profile's most"
        elif elapsed_s + elapsed_s / rounds_done > self.budget_s:
            reason = f"time budget ({self.budget_s / 60:g} min of rounds)"
        else:
            return None
        return reason + not_waited_text(ratios)


def not_waited_text(ratios: Sequence[WatchedRatio]) -> str:
    """'; 2 of 5 ratios not waited for (the load generator limits native)', or '' when the
    rule waits for every ratio."""
    skipped = [r for r in ratios if r.not_waited_because is not None]
    if not skipped:
        return ""
    why = "; ".join(dict.fromkeys(r.not_waited_because or "" for r in skipped))
    return f"; {len(skipped)} of {len(ratios)} ratios not waited for ({why})"
