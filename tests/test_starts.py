"""When a run in rounds starts every server afresh (bench/measure/starts.py): the schedule on
hand-made cells whose cost per query varies between fresh starts or within them (invented
numbers, no machine measured them), the decisions results.json records, the plan of a run
that starts afresh more often, and the costs per query the stop rule waits for."""

from __future__ import annotations

import json
import math

import pytest

from bench.load.dnsperf import DnsperfRun
from bench.measure.cells import Cell, RoundRun
from bench.measure.rounds import (
    next_round_seconds,
    plain_round_seconds,
    plan_of,
    rounds_meta,
    split_at_qps,
    start_seconds,
    watched_costs,
    widest_text,
)
from bench.measure.runner import PHASES, PROFILES
from bench.measure.starts import StartSchedule, log_costs_by_start
from bench.measure.stats import COST, Interval, Watched
from servers import SERVERS, group_of

pytestmark = pytest.mark.check

QUICK = PROFILES["quick"]
DEFAULT_SERVERS = [s for s in SERVERS if group_of(s.name) in QUICK.server_groups]
# Quick's 11 cells over 3 stores with a database server: a fresh start of every server and a
# round, as the plan expects them.
START_S = start_seconds(QUICK.rounds, 11, 3)
ROUND_S = plain_round_seconds(QUICK.rounds, 11)


def _cell(server: str, costs_by_start: list[list[float]]) -> Cell:
    """A cell whose runs cost costs_by_start[s][i] us per query (1,000 answers and that many
    ms of the server's CPU), run i after fresh start s, in rounds 0, 1, ..."""
    where = [(start, cost) for start, costs in enumerate(costs_by_start) for cost in costs]
    runs = [DnsperfRun(argv=["handmade"], queries_sent=1000, queries_completed=1000,
                       run_time_s=1.0, qps=1000.0) for _ in where]
    rounds = [RoundRun(i, start, server_cpu_s=cost / 1000)
              for i, (start, cost) in enumerate(where)]
    return Cell(server, 1, 1, qps_runs=runs, qps_rounds=rounds)


# The runs of one start, spread +-5% around its level.
WITHIN = [0.95, 1.05, 1.0, 0.97, 1.03]


def _between_starts(level: float) -> Cell:
    """Two starts 30% apart, runs of each within +-5%: most of the variance between starts."""
    return _cell("pg", [[level * w for w in WITHIN], [1.3 * level * w for w in WITHIN]])


def _within_starts(level: float) -> Cell:
    """Two starts at the same level (the same runs, in another order), runs within +-5%: no
    variance between starts."""
    return _cell("fs", [[level * w for w in WITHIN], [level * w for w in reversed(WITHIN)]])


def _schedule_after_two_starts(cells: list[Cell]) -> StartSchedule:
    """Quick's schedule at its third fresh start (before round 10), the runs so far `cells`'."""
    schedule = StartSchedule(QUICK.rounds.restart_every, START_S, ROUND_S)
    assert [schedule.starts_before(i) for i in range(11)] == [False] * 5 + [True] + \
        [False] * 4 + [True]
    schedule.start(5, cells, START_S, ROUND_S)
    schedule.start(10, cells, START_S, ROUND_S)
    return schedule


def test_runs_are_grouped_by_their_start() -> None:
    cell = _cell("pg", [[100.0, 200.0], [50.0]])
    first, second = log_costs_by_start(cell)
    assert first == pytest.approx([math.log(100), math.log(200)])
    assert second == pytest.approx([math.log(50)])
    cell.qps_rounds[0].server_cpu_s = None  # a run without its CPU: no cost per run at all
    assert log_costs_by_start(cell) == []


def test_the_first_two_starts_keep_the_profiles_spacing() -> None:
    schedule = StartSchedule(5, START_S, ROUND_S)
    decision = schedule.start(5, [_between_starts(100.0)], START_S, ROUND_S)
    assert decision.runs_per_start == 5 and decision.between is None
    assert decision.why == "the profile's spacing for the first 2 starts"
    assert schedule.starts_before(10) and not schedule.starts_before(9)


def test_starts_differ_most_a_start_before_every_round() -> None:
    schedule = _schedule_after_two_starts([_between_starts(level) for level in (30.0, 150.0)])
    third = schedule.decisions[-1]
    assert third.round == 10 and third.runs_per_start == 1 and third.why is None
    assert third.between_share > 0.9 and third.best < 1
    assert third.runs == 20 and (third.start_s, third.round_s) == (START_S, ROUND_S)
    assert [schedule.starts_before(i) for i in range(9, 14)] == [False, True, True, True, True]


def test_starts_alike_a_start_every_restart_every_rounds() -> None:
    schedule = _schedule_after_two_starts([_within_starts(level) for level in (30.0, 150.0)])
    third = schedule.decisions[-1]
    assert third.runs_per_start == 5 and third.between == 0.0 and third.best is None
    assert [schedule.starts_before(i) for i in range(10, 21)] == [True] + [False] * 4 + \
        [True] + [False] * 4 + [True]


def test_a_profile_that_starts_afresh_every_round_keeps_doing_so() -> None:
    """tiny restarts before every round: the clamp to [1, restart_every] leaves it 1."""
    schedule = StartSchedule(1, START_S, ROUND_S)
    for index in (1, 2, 3):
        assert schedule.starts_before(index)
        schedule.start(index, [_within_starts(100.0)], START_S, ROUND_S)
    assert [d.runs_per_start for d in schedule.decisions] == [1, 1, 1, 1]
    assert schedule.decisions[-1].between == 0.0  # estimated, and clamped


def test_without_a_cost_per_run_the_profiles_spacing_holds() -> None:
    cell = _between_starts(100.0)
    cell.qps_rounds[0].server_cpu_s = None
    third = _schedule_after_two_starts([cell]).decisions[-1]
    assert third.runs_per_start == 5 and third.between is None
    assert third.why == "no cell has a cost per run after two starts: the profile's spacing"


def test_results_record_every_start_and_its_choice() -> None:
    schedule = _schedule_after_two_starts([_between_starts(level) for level in (30.0, 150.0)])
    meta = rounds_meta(QUICK.rounds, 12, "test", [], schedule)
    starts = json.loads(json.dumps(meta["starts"]))  # plain JSON: no infinity, no object
    assert [(d["round"], d["runs_per_start"]) for d in starts] == [(0, 5), (5, 5), (10, 1)]
    assert [d["why"] is None for d in starts] == [False, False, True]
    third = schedule.decisions[-1]
    assert starts[-1]["between"] == third.between and starts[-1]["within"] == third.within
    assert starts[-1]["between_share"] == pytest.approx(
        third.between / (third.between + third.within))
    assert starts[0]["between_share"] is None
    assert meta["restart_every"] == 5 and meta["done"] == 12


def test_a_run_that_starts_afresh_every_round_still_fits_in_25_minutes() -> None:
    """The plan with the most fresh starts the schedule can choose (every round from the
    third start on): fewer rounds fit in the budget, which still bounds them."""
    schedule = _schedule_after_two_starts([_between_starts(level) for level in (30.0, 150.0)])
    opening, closing = split_at_qps(PHASES)
    plan = plan_of(QUICK, opening, closing, DEFAULT_SERVERS, QUICK.threads,
                   schedule.starts_before)
    # Rounds of 27.5 s, 108 s after a fresh start: before rounds 5 and 10, then every round;
    # 355.5 s for the first 10, then 7 of 108 s fit in the 1,200 s budget.
    assert START_S + ROUND_S == pytest.approx(108.0)
    assert plan.rounds == pytest.approx([27.5] * 5 + [108.0] + [27.5] * 4 + [108.0] * 7)
    assert sum(plan.rounds) <= QUICK.rounds.budget_s
    assert plan.seconds == pytest.approx(54 + 92.4 + 1111.5 + 67.1) and plan.seconds <= 25 * 60


def _every_round_from_10(index: int) -> bool:
    """Fresh starts before round 5 and before every round from round 10 on."""
    return index == 5 or index >= 10


def test_the_next_round_is_budgeted_with_its_fresh_start() -> None:
    """10 rounds planned at 355.5 s took twice that: the next, after a fresh start, is
    expected to take twice its 108 s, not the 71.1 s of the mean round so far."""
    assert next_round_seconds(QUICK.rounds, 10, 711.0, 11, 3, _every_round_from_10) == \
        pytest.approx(216.0)
    assert next_round_seconds(QUICK.rounds, 11, 711.0 + 216.0, 11, 3,
                              QUICK.rounds.restarts_before) == pytest.approx(55.0)


def test_the_stop_rule_watches_every_cells_cost_per_query() -> None:
    two_starts = _between_starts(100.0)
    no_cost = _within_starts(50.0)
    no_cost.qps_rounds[3].server_cpu_s = None
    pg, fs = watched_costs([two_starts, no_cost])
    assert (pg.name, pg.figure, pg.not_waited_because) == (
        "pg cost per query at 1 thread(s)", COST, None)
    assert pg.interval.n == 2 and pg.interval.low < pg.interval.estimate < pg.interval.high
    assert (fs.interval, fs.not_waited_because) == (None, "a run without a cost of its own")


def test_progress_names_the_widest_cost_interval_too() -> None:
    ratio = Watched("pg/native", Interval(1.0, 0.9, 1.05, 6))
    costs = [Watched("pg cost", Interval(100.0, 96.0, 103.0, 3), figure=COST),
             Watched("fs cost", Interval(50.0, None, None, 1), figure=COST)]
    assert widest_text([ratio, *costs], 0.05) == (
        "widest ratio interval +-10.0% (target +-5%); cost per query: widest interval +-4.0%, "
        "1 of 2 without one yet")
    assert widest_text(costs[1:], 0.05) == \
        "no ratio to wait for; cost per query: no interval yet, 1 of 1 without one yet"
