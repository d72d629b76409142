"""How long a run in rounds is expected to take, and the progress line's "left": arithmetic
on the profiles and a fake clock, no server and no timing."""

from __future__ import annotations

import pytest

from bench.commands.run import with_rounds_budget
from bench.measure.progress import StepProgress
from bench.measure.rounds import (
    RoundsRunner,
    plan_of,
    planned_rounds,
    round_seconds,
    rounds_ahead,
    split_at_qps,
    widest_text,
)
from bench.measure.runner import (
    CAPACITY_PHASES,
    CAPACITY_SWEEP,
    CHECK_ANSWERS,
    LOADED_LATENCY,
    MEASURE_QPS,
    PHASES,
    PROFILES,
    STARTUP,
    WARM_UP,
    Rounds,
    for_target,
    phases_of,
)
from bench.measure.stats import Interval, Watched
from servers import SERVERS, group_of
from tests.benchcli import run_bench

QUICK = PROFILES["quick"]
DEFAULT_SERVERS = [s for s in SERVERS if group_of(s.name) in QUICK.server_groups]


@pytest.mark.check
def test_quick_profile_is_native_and_the_ten_dlz_drivers_at_one_thread() -> None:
    assert [s.name for s in DEFAULT_SERVERS] == [
        "native", "memory", "pg", "mysql", "ldap", "fs", "bdb-btree", "bdb-hash", "bdbhpt-t",
        "bdbhpt-c", "bdbhpt-p"]
    assert QUICK.threads == (1,)


@pytest.mark.check
def test_quick_profile_fits_in_25_minutes() -> None:
    opening, closing = split_at_qps(PHASES)
    plan = plan_of(QUICK, opening, closing, DEFAULT_SERVERS, QUICK.threads)
    # docs/method/run.md, "How long a run takes": 5 stores without a database server at 3 s,
    # 3 with one at 13 s; per cell 2 + 1.4 + 4.5 + 0.5 s before the rounds and 4 + 7 x 0.3 s
    # after (loaded latency, 7 timed updates);
    # rounds of 11 x 2.5 s, every 5th with 11 x 6.5 + 3 x 3 s of fresh starts.
    assert sum(plan.stores) == pytest.approx(5 * 3 + 3 * 13)
    assert sum(plan.opening) == pytest.approx(11 * (2 + 1.4 + 4.5 + 0.5))
    assert sum(plan.closing) == pytest.approx(11 * (4 + 7 * 0.3))
    assert plan.rounds[:6] == pytest.approx([27.5] * 5 + [27.5 + 80.5])
    assert len(plan.rounds) == 29 and sum(plan.rounds) <= QUICK.rounds.budget_s
    assert sum(plan.rounds) == pytest.approx(1200.0)
    assert plan.seconds == pytest.approx(54 + 92.4 + 1200.0 + 67.1) and plan.seconds <= 25 * 60


@pytest.mark.check
def test_quick_all_profile_plans_every_server_at_three_thread_counts() -> None:
    profile = PROFILES["quick-all"]
    opening, closing = split_at_qps(PHASES)
    plan = plan_of(profile, opening, closing, list(SERVERS), profile.threads)
    # 22 servers x 3 thread counts = 66 cells: rounds of 66 x 2.5 s; 15 fit in 60 min.
    assert plan.rounds[0] == pytest.approx(165.0) and len(plan.rounds) == 15
    assert plan.seconds / 60 == pytest.approx(73.4, abs=0.1)  # docs/method/run.md, README


@pytest.mark.check
def test_every_cell_gets_two_fresh_starts_in_the_fewest_rounds() -> None:
    for profile in PROFILES.values():
        rounds = profile.rounds
        starts = 1 + sum(rounds.restarts_before(i) for i in range(rounds.min_rounds))
        assert starts >= 2, profile.name


@pytest.mark.check
def test_rounds_stop_within_the_budget() -> None:
    rounds = Rounds(min_rounds=2, max_rounds=100, budget_s=100.0, run_s=1.5, restart_every=3,
                    steady_s=1.0)
    # 4 cells, 1 store with a database: rounds of 4 x 2 = 8 s; a restart round adds
    # 4 x (2 + 3 x 1.5) + 3 = 29 s.
    assert round_seconds(rounds, 2, 4, 1) == 8.0 and round_seconds(rounds, 3, 4, 1) == 37.0
    # 77 s, and round 6 (a restart round) would end at 114 s.
    assert planned_rounds(rounds, 4, 1) == [8.0, 8.0, 8.0, 37.0, 8.0, 8.0]


@pytest.mark.check
def test_rounds_ahead_follow_the_pace_of_the_rounds_run() -> None:
    rounds = Rounds(min_rounds=6, max_rounds=30, budget_s=1200.0, run_s=2.0, restart_every=5,
                    steady_s=1.0)
    # 10 rounds in 600 s against the 355.5 planned (9 x 27.5 s and one of 108 s after the
    # fresh start before round 5): 1.69 times the plan. At that pace the 600 s left hold 7
    # rounds, two of them after a fresh start (not the 27 planned at the expected pace, nor
    # the 10 of 60 s each the mean of the rounds run would fit: a round after a fresh start
    # takes longer).
    assert rounds_ahead(rounds, 10, 600.0, 11, 3) == pytest.approx([108.0] + [27.5] * 4
                                                                   + [108.0, 27.5])
    # A schedule that starts afresh before every round from round 10 on: 3 of them fit.
    assert rounds_ahead(rounds, 10, 600.0, 11, 3, lambda i: i == 5 or i >= 10) == \
        pytest.approx([108.0] * 3)
    # Slower than planned before the minimum: the minimum still runs.
    assert len(rounds_ahead(rounds, 2, 1100.0, 11, 3)) == 4
    # Near the most rounds: only those left.
    assert len(rounds_ahead(rounds, 29, 100.0, 11, 3)) == 1


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.check
def test_time_outside_steps_does_not_inflate_the_estimate(capsys) -> None:
    clock = FakeClock()
    progress = StepProgress([10.0] * 10, clock=clock)
    clock.now = 300.0  # a store loading before the first step, outside the plan
    for _ in range(5):
        progress.step("step")
        clock.now += 10.0
    # 5 steps took their 10 s each: 5 steps of 10 s are left (the current one's time counts
    # once it has finished), not 35 x 10 s as elapsed time over planned time made it.
    assert progress.seconds_left() == pytest.approx(50.0)
    progress.step("step 6")
    assert "[6/10] step 6 (about 1 min left)" in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.check
def test_the_estimate_scales_with_the_pace_and_shrinks_as_steps_pass() -> None:
    clock = FakeClock()
    progress = StepProgress([10.0] * 10, clock=clock)
    left = []
    for _ in range(10):
        progress.step("step")
        clock.now += 20.0  # every step takes twice its plan
        left.append(progress.seconds_left())
    # Before the first step has finished: the plan (9 steps of 10 s); then twice the plan of
    # the steps still ahead.
    assert left == pytest.approx([90.0] + [2 * 10.0 * (9 - i) for i in range(1, 10)])


@pytest.mark.check
def test_skipped_and_replanned_steps_leave_the_plan() -> None:
    clock = FakeClock()
    progress = StepProgress([10.0, 10.0, 30.0, 30.0, 30.0, 5.0], clock=clock)
    progress.step("a")
    clock.now += 10.0
    progress.skip(1)                       # b will not run
    progress.replace_next(3, [30.0])       # of three rounds planned, one still fits
    assert progress.expected == [10.0, 30.0, 5.0]
    assert progress.seconds_left() == pytest.approx(35.0)  # the skip took no time


@pytest.mark.check
def test_a_fast_kind_of_step_does_not_shrink_the_estimate_of_another() -> None:
    """make bench loaded its stores in seconds against a minute planned; that pace applied to
    20 minutes of rounds said "about 3 min left" at step 9 of a 23-minute run."""
    clock = FakeClock()
    progress = StepProgress([30.0, 30.0, 600.0, 600.0], clock=clock,
                            kinds=["store", "store", "round", "round"])
    for _ in range(2):
        progress.step("store")
        clock.now += 3.0   # ten times faster than planned
    progress.step("round 1")
    assert progress.seconds_left() == pytest.approx(600.0)  # the rounds keep their plan
    clock.now += 1200.0    # the first round took twice its plan
    progress.step("round 2")
    assert progress.seconds_left() == pytest.approx(0.0)
    assert progress.kinds == ["store", "store", "round", "round"]


@pytest.mark.check
def test_replanned_rounds_keep_their_kind() -> None:
    clock = FakeClock()
    progress = StepProgress([5.0, 100.0, 100.0, 1.0], clock=clock,
                            kinds=["store", "round", "round", "latency"])
    progress.step("store")
    clock.now += 5.0
    progress.replace_next(2, [100.0, 100.0, 100.0])
    assert progress.kinds == ["store", "round", "round", "round", "latency"]
    with pytest.raises(ValueError):
        StepProgress([1.0], kinds=[])


@pytest.mark.check
def test_the_rounds_plan_names_each_steps_kind() -> None:
    opening, closing = split_at_qps(PHASES)
    plan = plan_of(QUICK, opening, closing, DEFAULT_SERVERS, QUICK.threads)
    assert len(plan.kinds) == len(plan.steps)
    assert plan.kinds[0] == "store" and plan.kinds[-1] == "update visibility"
    assert plan.kinds.count("round") == len(plan.rounds) > 0


@pytest.mark.check
def test_rounds_runner_plans_from_the_phases_it_runs() -> None:
    opening, closing = split_at_qps(PHASES)
    assert [p.label for p in opening] == ["startup", "checking answers against the reference",
                                          "warm-up", "unloaded latency"]
    assert opening[2].run is RoundsRunner.warm_up_until_steady
    assert [p.label for p in closing] == ["loaded latency", "update visibility"]


@pytest.mark.check
def test_progress_names_the_widest_ratio_and_those_without_an_interval() -> None:
    """Early rounds have ratios without an interval (fewer than 6 values): the line says how
    many, and the widest of the others; with none yet it says so (it used to compare Nones);
    the ratios the stop rule does not wait for are counted, not dropped."""
    early = Watched("a", Interval(1.0, None, None, 2))
    assert widest_text([early, early], 0.05) == \
        "no interval yet, 2 of 2 without one yet (target +-5%)"
    later = [Watched("b", Interval(0.5, 0.49, 0.52, 6)),
             Watched("c", Interval(1.0, 0.9, 1.05, 6)), early, Watched("d", None)]
    assert widest_text(later, 0.05) == \
        "widest ratio interval +-10.0%, 2 of 4 without one yet (target +-5%)"
    assert widest_text([], 0.05) == "no ratio to wait for"
    limited = Watched("e", Interval(1.0, 0.5, 1.5, 6), "the load generator limits nsd")
    assert widest_text([*later[:2], limited], 0.05) == \
        "widest ratio interval +-10.0% (target +-5%), 1 of 3 not waited for (load generator)"
    assert widest_text([limited], 0.05) == \
        "no ratio to wait for, 1 of 1 not waited for (load generator)"


@pytest.mark.check
def test_a_rounds_budget_bounds_the_planned_rounds() -> None:
    opening, closing = split_at_qps(PHASES)
    short = with_rounds_budget(QUICK, 5)
    assert short.rounds.budget_s == 300 and short.rounds.max_rounds == QUICK.rounds.max_rounds
    plan = plan_of(short, opening, closing, DEFAULT_SERVERS, QUICK.threads)
    # The least rounds always run (6: 5 of 27.5 s and a restart round of 108 s), more only
    # while they fit in the budget: 7 rounds, 245.5 s.
    assert plan.rounds == pytest.approx([27.5] * 5 + [108.0, 27.5])
    whole = plan_of(QUICK, opening, closing, DEFAULT_SERVERS, QUICK.threads)
    assert plan.seconds < whole.seconds


def test_a_rounds_budget_must_be_positive(tmp_path) -> None:
    done = run_bench(tmp_path, "run", "--profile", "tiny", "--rounds-budget", "0",
                     "--out", str(tmp_path / "out"))
    assert done.returncode == 1 and done.stderr == \
        "error: --rounds-budget 0: needs a positive number of minutes\n"
    assert not (tmp_path / "out").exists()


def test_commands_pick_their_phases_by_name() -> None:
    """A profile with capacity sweeps keeps every phase of `run` and puts the sweep right
    after the loaded latency; `capacity` and a --target run name the phases they take."""
    full = next(p for p in PROFILES.values() if p.capacity)
    with_sweep = phases_of(full)
    assert with_sweep[with_sweep.index(LOADED_LATENCY) + 1] is CAPACITY_SWEEP
    assert [p for p in with_sweep if p is not CAPACITY_SWEEP] == list(PHASES)
    assert phases_of(QUICK) == PHASES
    assert CAPACITY_PHASES == (STARTUP, CHECK_ANSWERS, WARM_UP, MEASURE_QPS, CAPACITY_SWEEP)
    assert [p.label for p in for_target(PHASES)] == [
        "checking the target serves every zone", "checking answers against the reference's",
        "warm-up", "unloaded latency", "QPS", "loaded latency"]
