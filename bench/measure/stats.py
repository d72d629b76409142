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
interval over the starts. How many runs a start is worth depends on where the variance
lies: `variance_components` estimates it between starts and within one, `runs_per_start`
turns that into the classic optimal cluster size (bench/measure/starts.py). Two samples (two
runs' figures, or their per-start means) are told apart by `verdict`: a shift estimate with
its interval (Hodges-Lehmann on log values, the interval from inverting the Mann-Whitney
test) says "changed", an equivalence test within +-margin (two one-sided Mann-Whitney tests)
says "the same", and neither says "undecided".
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


# --- fresh starts or more rounds: where the variance is ---------------------------------------

@dataclass(frozen=True)
class VarianceComponents:
    """The variance of a per-run (log) figure between fresh starts (sigma_b^2: how far one
    start's true level stands from another's) and within one start (sigma_w^2: how far a run
    stands from its start's level), estimated from `runs` runs after `starts` starts (counted
    per cell: a start of every server of a run of 11 cells counts 11 times)."""

    between: float
    within: float
    starts: int
    runs: int

    @property
    def between_share(self) -> float | None:
        """The intraclass correlation, sigma_b^2 / (sigma_b^2 + sigma_w^2); None when both
        are 0."""
        total = self.between + self.within
        return self.between / total if total > 0 else None


@dataclass(frozen=True)
class _Squares:
    """One-way ANOVA's sums of one cell's runs grouped by start: the squares around each
    start's mean (within), and of the starts' means around the cell's mean with each run
    counted (between); the cell's runs and starts; and the coefficient of sigma_b^2 in the
    between-start sum's expectation, N - sum(n_s^2) / N (N runs, n_s after start s)."""

    within: float
    between: float
    runs: int
    starts: int
    between_weight: float


def _squares(groups: Sequence[Sequence[float]]) -> _Squares:
    groups = [g for g in groups if g]
    runs = sum(len(g) for g in groups)
    mean = statistics.fmean(v for g in groups for v in g)
    means = [statistics.fmean(g) for g in groups]
    return _Squares(
        within=sum((v - m) ** 2 for g, m in zip(groups, means, strict=True) for v in g),
        between=sum(len(g) * (m - mean) ** 2 for g, m in zip(groups, means, strict=True)),
        runs=runs, starts=len(groups),
        between_weight=runs - sum(len(g) ** 2 for g in groups) / runs)


def variance_components(cells: Sequence[Sequence[Sequence[float]]]) -> VarianceComponents | None:
    """sigma_b^2 and sigma_w^2 by the method of moments of the one-way random-effects ANOVA,
    pooled over cells that share them but not their levels: cells[c][s] holds the values of
    cell c's runs after its start s (any number each). sigma_w^2 is the pooled within-start
    mean square (N_c - k_c degrees of freedom a cell, k_c its starts); the between-start sum of
    squares around each cell's own mean has expectation sum(k_c - 1) sigma_w^2 +
    sum(N_c - sum_s n_cs^2 / N_c) sigma_b^2 (unequal starts included), which gives sigma_b^2,
    0 where chance puts it below (a negative variance is none). None without two runs after
    one start (no sigma_w^2) or two starts of one cell (no sigma_b^2)."""
    sums = [_squares(groups) for groups in cells if any(groups)]
    runs, starts = sum(s.runs for s in sums), sum(s.starts for s in sums)
    weight = sum(s.between_weight for s in sums)
    if runs == starts or weight <= 0:
        return None
    within = sum(s.within for s in sums) / (runs - starts)
    between = (sum(s.between for s in sums) - within * (starts - len(sums))) / weight
    return VarianceComponents(max(0.0, between), within, starts, runs)


def runs_per_start(start_s: float, run_s: float, components: VarianceComponents,
                   most: int) -> tuple[float | None, int]:
    """How many runs to take after each fresh start, for a mean whose unit is the start: n
    starts of m runs each leave it a variance of (sigma_b^2 + sigma_w^2 / m) / n at a cost of
    n (start_s + m run_s), and for a given budget their product is least at the classic
    optimal cluster size m* = sqrt((start_s / run_s) (sigma_w^2 / sigma_b^2)). Returns m*
    (None without variance between starts: no start is worth its cost) and the whole number of
    runs in [1, most] to take: of the whole numbers either side of m*, the one with the smaller
    product (that product falls up to m* and rises after it)."""
    if components.between <= 0:
        return None, most
    best = math.sqrt(start_s / run_s * components.within / components.between)

    def product(m: int) -> float:
        return (components.between + components.within / m) * (start_s + m * run_s)

    whole = sorted({min(most, max(1, math.floor(best))), min(most, max(1, math.ceil(best)))})
    return best, min(whole, key=product)


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

RATIO, COST = "ratio", "cost per query"  # the figures the stop rule watches


@dataclass(frozen=True)
class Watched:
    """A figure as the stop rule sees it: its name ("pg/native at 1 thread(s)"), its interval
    (None: too few rounds yet), why the rule does not wait for it (None: it does), and what it
    is: a QPS ratio (RATIO) or a cell's cost per query (COST)."""

    name: str
    interval: Interval | None
    not_waited_because: str | None = None
    figure: str = RATIO


@dataclass(frozen=True)
class StopRule:
    """When rounds end: at least `min_rounds`; then as soon as every figure waited for (the QPS
    ratios, and each cell's cost per query, whose interval is over its fresh starts) has met
    the `target` half-width in CHECKS_IN_A_ROW checks in a row (one check after every round),
    or when one more round would not fit in `budget_s`, or after `max_rounds`. With no figure
    to wait for, at `min_rounds`, saying why. Every reason names the figures not waited for."""

    min_rounds: int
    max_rounds: int
    budget_s: float
    target: float = DEFAULT_TARGET

    def target_met(self, watched: Sequence[Watched]) -> bool:
        """Does every figure waited for meet the target? Never for none: an empty set meets
        nothing."""
        waited = [w.interval for w in watched if w.not_waited_because is None]
        return bool(waited) and all(i is not None and i.meets(self.target) for i in waited)

    def reason_to_stop(self, rounds_done: int, checks: Sequence[Sequence[Watched]],
                       elapsed_s: float, next_round_s: float | None = None) -> str | None:
        """Why the rounds end after `rounds_done` rounds taking `elapsed_s` in all, or None
        to run another; `checks`: the figures after each round so far, the last one now;
        `next_round_s`: how long the next round is expected to take (None: the mean of the
        rounds so far; a round after a fresh start takes longer than one without)."""
        if rounds_done < self.min_rounds:
            return None
        watched = checks[-1] if checks else []
        recent = checks[-CHECKS_IN_A_ROW:]
        waited = [w for w in watched if w.not_waited_because is None]
        if next_round_s is None:
            next_round_s = elapsed_s / rounds_done
        if not waited:
            reason = (f"no {_noun(watched)} to wait for"
                      + ("" if watched else " (no two cells to pair)"))
        elif len(recent) == CHECKS_IN_A_ROW and all(self.target_met(c) for c in recent):
            figures = " and ".join(dict.fromkeys(w.figure for w in waited))
            reason = (f"every {figures} within +-{100 * self.target:g}% in {CHECKS_IN_A_ROW} "
                      "checks in a row")
        elif rounds_done >= self.max_rounds:
            reason = f"{self.max_rounds} rounds, the profile's most"
        elif elapsed_s + next_round_s > self.budget_s:
            reason = f"time budget ({self.budget_s / 60:g} min of rounds)"
        else:
            return None
        return reason + not_waited_text(watched)


def _noun(watched: Sequence[Watched]) -> str:
    """What the watched figures are called together: "ratio" while they are QPS ratios only
    (as before the rule watched costs), else "figure"."""
    return RATIO if all(w.figure == RATIO for w in watched) else "figure"


def not_waited_text(watched: Sequence[Watched]) -> str:
    """'; 2 of 5 ratios not waited for (the load generator limits native)', or '' when the
    rule waits for every figure."""
    skipped = [w for w in watched if w.not_waited_because is not None]
    if not skipped:
        return ""
    why = "; ".join(dict.fromkeys(w.not_waited_because or "" for w in skipped))
    return f"; {len(skipped)} of {len(watched)} {_noun(watched)}s not waited for ({why})"
