"""The cost per query and its ratio to the reference measured next to it
(bench/measure/cost.py), and what a run records of the machine around it
(bench/measure/accounting.py), on hand-made cells: invented numbers, no machine measured them.
tests/test_report.py has the table they make, tests/test_compare.py the verdicts on them."""

from __future__ import annotations

import math
import os
import statistics

import pytest

from bench.load.dnsperf import DnsperfRun
from bench.measure import accounting
from bench.measure.accounting import CpuTimes, cpu_times, fastest_clocks, machine_moves
from bench.measure.cells import Cell, RoundRun
from bench.measure.cost import (
    AdjacentCost,
    cost_per_query,
    reference_of,
    run_costs,
    run_positions,
    split_per_query,
)

pytestmark = pytest.mark.check


def _cell(server: str, costs: list[float], starts: list[int] | None = None,
          began: list[float] | None = None) -> Cell:
    """A cell whose runs cost `costs` us per query: 1,000 answers and costs[i] ms of named's
    CPU in run i, in rounds 0, 1, ..., after the given fresh starts (default: one)."""
    starts = starts or [0] * len(costs)
    began = began or [None] * len(costs)  # type: ignore[list-item]
    runs = [DnsperfRun(argv=["handmade"], queries_sent=1000, queries_completed=1000,
                       run_time_s=1.0, qps=1000.0) for _ in costs]
    rounds = [RoundRun(i, start, server_cpu_s=cost / 1000, began_s=at)
              for i, (cost, start, at) in enumerate(zip(costs, starts, began, strict=True))]
    return Cell(server, 1, 1, qps_runs=runs, qps_rounds=rounds,
                cpu_us_per_query={"server": statistics.fmean(costs), "db": None})


def test_each_run_costs_its_cpu_over_its_answers() -> None:
    cell = _cell("pg", [100.0, 120.0])
    assert run_costs(cell) == pytest.approx([100.0, 120.0])
    cell.qps_rounds[1].db_cpu_s = 0.03  # 30 ms of the database's CPU over 1,000 answers
    assert run_costs(cell) == pytest.approx([100.0, 150.0])
    cell.qps_rounds[0].server_cpu_s = None  # a run without its CPU: no cost per run at all
    assert run_costs(cell) is None


def test_cost_is_the_geometric_mean_with_an_interval_over_fresh_starts() -> None:
    cell = _cell("pg", [100.0, 121.0, 90.0, 110.0, 200.0, 50.0], starts=[0, 0, 1, 1, 2, 2])
    # The starts' geometric means: 110, 99.5 (sqrt(9,900)) and 100; their geometric mean
    # with a t interval of 2 degrees of freedom (t = 4.303) over the three logs.
    logs = [math.log(110.0), math.log(math.sqrt(9900.0)), math.log(100.0)]
    half = 4.302653 * statistics.stdev(logs) / math.sqrt(3)
    cost = cost_per_query(cell)
    assert cost is not None and cost.per_run and cost.interval.n == 3
    assert cost.interval.estimate == pytest.approx(math.exp(statistics.fmean(logs)))
    assert cost.interval.low == pytest.approx(math.exp(statistics.fmean(logs) - half), rel=1e-6)
    assert cost.interval.high == pytest.approx(math.exp(statistics.fmean(logs) + half), rel=1e-6)
    one_start = cost_per_query(_cell("pg", [100.0, 121.0]))
    assert one_start is not None and one_start.interval.estimate == pytest.approx(110.0)
    assert one_start.interval.low is None and one_start.interval.n == 1


def test_a_file_without_cost_per_run_has_one_figure_over_all_runs() -> None:
    cell = _cell("pg", [100.0, 120.0])
    cell.qps_rounds = []  # runs in one block (before rounds): the cell's totals only
    cell.cpu_us_per_query = {"server": 80.0, "db": 30.0}
    cost = cost_per_query(cell)
    assert cost is not None and not cost.per_run
    assert (cost.interval.estimate, cost.interval.low) == (110.0, None)


def test_user_and_system_time_apart() -> None:
    cell = _cell("pg", [100.0, 100.0])
    assert set(split_per_query(cell).values()) == {None}  # recorded before the split
    for where in cell.qps_rounds:
        where.server_user_s, where.server_system_s = 0.06, 0.04
        where.db_user_s, where.db_system_s = 0.02, 0.01
    assert split_per_query(cell) == pytest.approx(
        {"server user": 60.0, "server system": 40.0, "db user": 20.0, "db system": 10.0})


def test_dlz_rows_are_divided_by_the_memory_driver_the_rest_by_native() -> None:
    assert [reference_of(s) for s in ("pg", "bdbhpt-t", "pg@9.20", "memory", "native",
                                      "pdns-gpgsql", "nsd", "an-old-name")] == [
        "memory", "memory", "memory", "native", "native", "native", "native", "native"]


def test_runs_are_placed_by_their_start_or_by_the_rounds_order() -> None:
    timed = [_cell("native", [10.0, 10.0], began=[0.0, 30.0]),
             _cell("pg", [50.0, 50.0], began=[10.0, 20.0])]
    assert run_positions(timed) == {("native", 1, 1): [0.0, 30.0], ("pg", 1, 1): [10.0, 20.0]}
    # Older files: the cells in the file's order, reversed every other round (ABBA).
    cells = [_cell(s, [10.0, 10.0, 10.0]) for s in ("native", "memory", "pg")]
    assert run_positions(cells) == {("native", 1, 1): [0.0, 5.0, 6.0],
                                    ("memory", 1, 1): [1.0, 4.0, 7.0],
                                    ("pg", 1, 1): [2.0, 3.0, 8.0]}


def test_each_run_is_divided_by_the_reference_runs_just_before_and_after_it() -> None:
    memory = _cell("memory", [40.0, 90.0, 10.0], began=[0.0, 10.0, 20.0])
    pg = _cell("pg", [120.0, 150.0, 20.0], began=[5.0, 15.0, 25.0])
    native = _cell("native", [20.0, 20.0, 20.0], began=[1.0, 11.0, 21.0])
    adjacent = AdjacentCost([native, memory, pg])
    assert adjacent.reference(pg) is memory and adjacent.reference(memory) is native
    # 120 / sqrt(40 x 90) = 2; 150 / sqrt(90 x 10) = 5; the last run has memory's before it
    # only: 20 / 10 = 2.
    assert adjacent.per_run(pg, memory) == pytest.approx([2.0, 5.0, 2.0])
    reference, ratio = adjacent.ratio(pg) or ("", None)
    assert reference == "memory" and ratio is not None
    assert ratio.estimate == pytest.approx((2.0 * 5.0 * 2.0) ** (1 / 3))
    assert ratio.low is None  # one fresh start: no interval
    itself = adjacent.ratio(native)
    assert itself is not None and itself[0] == "native"
    assert (itself[1].estimate, itself[1].low) == (1.0, None)


def test_without_the_memory_driver_a_dlz_row_is_divided_by_native() -> None:
    native = _cell("native", [20.0, 20.0], began=[0.0, 10.0])
    pg = _cell("pg", [100.0, 100.0], began=[5.0, 15.0])
    found = AdjacentCost([native, pg]).ratio(pg)
    assert found is not None and found[0] == "native"
    assert found[1].estimate == pytest.approx(5.0)
    assert AdjacentCost([pg]).ratio(pg) is None


# ---------------------------------------------------------------- the machine around a run

def test_cpu_times_between_two_proc_stat_readings() -> None:
    tick = 1 / accounting.CLK_TCK
    before = [100, 5, 50, 1000, 3, 1, 7, 2]  # user nice system idle iowait irq softirq steal
    after = [160, 15, 80, 1100, 3, 2, 9, 12]
    times = cpu_times(1, before, after, 2600.0)
    assert (times.user, times.system, times.idle) == pytest.approx((70 * tick, 30 * tick,
                                                                    100 * tick))
    assert (times.iowait, times.irq, times.softirq, times.steal) == pytest.approx(
        (0.0, tick, 2 * tick, 10 * tick))
    assert times.total == pytest.approx(213 * tick) and times.mhz == 2600.0


def test_steal_and_a_slower_cpu_are_named_and_a_quiet_run_is_not() -> None:
    quiet = [CpuTimes(0, user=0.9, system=0.1, steal=0.01, mhz=2600.0),
             CpuTimes(1, user=0.5, idle=0.5, mhz=2600.0)]
    stolen = [CpuTimes(0, user=0.9, system=0.05, steal=0.05, mhz=2600.0),
              CpuTimes(1, user=0.5, idle=0.5, mhz=2000.0)]
    fastest = fastest_clocks([quiet, stolen])
    assert fastest == {0: 2600.0, 1: 2600.0}
    assert machine_moves(quiet, fastest) == []
    assert machine_moves(stolen, fastest) == ["steal 5.0% on CPU 0", "CPU 1 at 2,000 of 2,600 MHz"]
    assert machine_moves([], fastest) == []  # a run recorded before these figures


def test_a_meter_splits_user_and_system_time_and_reads_every_cpu() -> None:
    meter = accounting.CpuMeter([os.getpid()])
    machine = accounting.MachineMeter()
    with machine, meter:
        sum(i * i for i in range(200_000))
    assert meter.seconds == pytest.approx(meter.user + meter.system)
    assert meter.user >= 0 and meter.system >= 0
    assert machine.began_s <= machine.ended_s
    assert [t.cpu for t in machine.cpus] == sorted(os.sched_getaffinity(0))
    assert all(t.total >= 0 for t in machine.cpus)
