"""bench/measure/stats.py on known samples: the intervals, the round order, the stop rule.
Every expected figure here is worked out by hand in the comment beside it."""

from __future__ import annotations

import pytest

from bench.measure.stats import (
    Interval,
    StopRule,
    intervals_overlap,
    median_interval,
    order_statistic_ranks,
    paired_ratios,
    ratio_interval,
    round_order,
)

# Starts no process: part of `make check` (tests/conftest.py holds it to that).
pytestmark = pytest.mark.check


def test_too_few_values_for_a_95_percent_interval() -> None:
    # 5 values: min..max covers 1 - 2/32 = 93.75% < 95%.
    assert order_statistic_ranks(5) is None
    interval = median_interval([3.0, 1.0, 2.0, 5.0, 4.0])
    assert interval == Interval(3.0, None, None, 5)
    assert interval.half_width is None and not interval.meets(0.5)
    assert median_interval([]) is None


@pytest.mark.parametrize(("n", "ranks"), [
    (6, (1, 6)),     # 1 - 2/64 = 96.9%
    (8, (1, 8)),     # j = 2 would cover 1 - 2 * 9/256 = 93.0%
    (9, (2, 8)),     # 1 - 2 * 10/512 = 96.1%
    (10, (2, 9)),    # 1 - 2 * 11/1024 = 97.9%; j = 3: 89.1%
    (12, (3, 10)),   # 1 - 2 * 79/4096 = 96.1%
    (17, (5, 13)),   # 1 - 2 * 3214/131072 = 95.1%
])
def test_order_statistic_ranks(n: int, ranks: tuple[int, int]) -> None:
    assert order_statistic_ranks(n) == ranks


def test_median_interval_on_a_known_sample() -> None:
    # 1..10 shuffled: median 5.5, ranks (2, 9) -> [2, 9]; the larger side 3.5 / 5.5.
    interval = median_interval([7.0, 2.0, 10.0, 4.0, 1.0, 9.0, 5.0, 3.0, 8.0, 6.0])
    assert interval == Interval(5.5, 2.0, 9.0, 10)
    assert interval.half_width == pytest.approx(3.5 / 5.5)


def test_ratio_pairs_runs_of_the_same_round_only() -> None:
    cell = {0: 50.0, 1: 60.0, 2: 40.0, 4: 10.0}
    reference = {0: 100.0, 1: 120.0, 2: 80.0, 3: 90.0, 5: 0.0}
    # Rounds 0-2 pair (each exactly 0.5); 3 and 4 ran one side only.
    assert paired_ratios(cell, reference) == [0.5, 0.5, 0.5]


def test_paired_ratio_cancels_a_drift_that_a_ratio_of_medians_keeps() -> None:
    # The machine slows down round by round; the cell is always 40% of the reference.
    reference = {r: 100_000.0 * (1 - 0.05 * r) for r in range(8)}
    cell = {r: 0.4 * q for r, q in reference.items()}
    ratio = ratio_interval(cell, reference)
    assert ratio.estimate == pytest.approx(0.4)
    assert ratio.low == pytest.approx(0.4) and ratio.high == pytest.approx(0.4)
    assert ratio.meets(0.05)


def test_ratio_interval_on_a_known_sample() -> None:
    ratios = [0.50, 0.52, 0.48, 0.55, 0.45, 0.51, 0.49, 0.53, 0.47]
    cell = {r: 1000 * x for r, x in enumerate(ratios)}
    reference = dict.fromkeys(range(9), 1000.0)
    # 9 ratios sorted: .45 .47 .48 .49 .50 .51 .52 .53 .55; ranks (2, 8): [.47, .53].
    interval = ratio_interval(cell, reference)
    assert (interval.estimate, interval.low, interval.high) == pytest.approx((0.50, 0.47, 0.53))
    assert interval.half_width == pytest.approx(0.06)
    assert not interval.meets(0.05) and interval.meets(0.06 + 1e-9)


def test_round_order_alternates() -> None:
    cells = ["native", "memory", "pg"]
    assert [round_order(cells, r) for r in range(4)] == [
        ["native", "memory", "pg"], ["pg", "memory", "native"],
        ["native", "memory", "pg"], ["pg", "memory", "native"]]


def test_round_order_gives_every_cell_the_same_mean_position() -> None:
    cells = list(range(7))
    positions = {c: 0 for c in cells}
    for r in range(2):
        for i, c in enumerate(round_order(cells, r)):
            positions[c] += i
    assert set(positions.values()) == {6}


def test_overlapping_intervals_are_not_distinguishable() -> None:
    a = Interval(100.0, 90.0, 110.0, 6)
    assert intervals_overlap(a, Interval(115.0, 108.0, 120.0, 6))
    assert not intervals_overlap(a, Interval(125.0, 111.0, 130.0, 6))
    assert intervals_overlap(Interval(5.0, None, None, 2), Interval(5.0, 1.0, 9.0, 6))
    assert not intervals_overlap(Interval(5.0, None, None, 2), Interval(7.0, None, None, 2))


RULE = StopRule(min_rounds=6, max_rounds=30, budget_s=600.0, target=0.05)
TIGHT = Interval(1.0, 0.97, 1.04, 6)
WIDE = Interval(1.0, 0.90, 1.04, 6)


def test_stop_rule_runs_the_minimum_first() -> None:
    assert RULE.reason_to_stop(5, [TIGHT], 100.0) is None


def test_stop_rule_stops_once_every_ratio_meets_the_target() -> None:
    assert RULE.reason_to_stop(6, [TIGHT, TIGHT], 120.0) == "every ratio within +-5%"
    assert RULE.reason_to_stop(6, [TIGHT, WIDE], 120.0) is None
    assert RULE.reason_to_stop(6, [TIGHT, None], 120.0) is None  # no interval yet
    assert RULE.reason_to_stop(6, [], 120.0) == "every ratio within +-5%"  # nothing to pair


def test_stop_rule_stops_when_another_round_would_pass_the_budget() -> None:
    # 10 rounds in 540 s: one more takes about 54 s, 594 <= 600: go on; at 550 s, stop.
    assert RULE.reason_to_stop(10, [WIDE], 540.0) is None
    assert RULE.reason_to_stop(10, [WIDE], 550.0) == "time budget (10 min of rounds)"


def test_stop_rule_stops_at_the_most_rounds() -> None:
    assert RULE.reason_to_stop(30, [WIDE], 100.0) == "30 rounds, the profile's most"
