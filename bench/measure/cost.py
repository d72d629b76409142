"""Cost per query, the first figure of a cell measured in rounds, and its ratio to a reference
measured next to it in time.

Why cost first (issue 37): two `make bench` runs back to back on one boot gave QPS ratios
about 10% apart, where the CPU time a server spends per answered query moved 2.5% from run to
run (median): the VM's speed changes from second to second, and QPS follows it, while the
work per query does not. A cost, a QPS and their ratios still belong to the machine that
measured them (pg's QPS was 27.5% of the memory driver's on an AMD EPYC VM and 36.5% on an
Intel Xeon one); instructions per query (bench/measure/instructions.py) are the figure that
carries between machines.

The figure: per QPS run, the CPU time of the server's process tree and of its database
server's over the run (accounting.CpuMeter), in microseconds per answered query; the cell's
figure is their geometric mean with the interval of stats.start_interval, whose independent
unit is the fresh start (the runs after one start share its state). A cell with one start has
the figure without an interval; a cell whose runs carry no CPU time each (files before
rounds: one block of runs, one CPU figure over all of them) has that one figure and no
interval (`per_run` False).

The ratio: each run of a cell over the reference's cost measured next to it in time, the
geometric mean of the reference's runs just before and just after it (reference, server,
reference: one of them at the first and last runs), then the geometric mean of those per-run
ratios with the start-clustered interval. The reference is the memory driver for a DLZ
driver's row (a column of the memory driver's group; the memory driver's own row takes native
BIND), native BIND for every other row and where a run has no memory driver. Which runs were
next to each other comes from each run's monotonic start (RoundRun.began_s); a file recorded
before it gives the order the rounds ran the cells in (rounds.RoundsRunner.run_round): the
cells measured in rounds in the file's order, which is the order they were opened in,
reversed every other round (stats.round_order).
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from bench.measure import stats
from bench.measure.cells import Cell
from bench.measure.loadgen import server_us_per_query
from bench.measure.stats import Interval
from servers import REFERENCE, registered_kind

Key = tuple[str, int, int]


def run_costs(cell: Cell) -> list[float] | None:
    """The server's and its database's CPU per answered query in each QPS run (us), in the
    runs' order; None where a run has none (runs not in rounds, a server whose CPU the suite
    does not account, a run that answered nothing)."""
    if not cell.qps_rounds or len(cell.qps_rounds) != len(cell.qps_runs):
        return None
    costs = []
    for where, run in zip(cell.qps_rounds, cell.qps_runs, strict=True):
        if where.server_cpu_s is None or run.queries_completed <= 0:
            return None
        cpu_s = where.server_cpu_s + (where.db_cpu_s or 0.0)
        if cpu_s <= 0:
            return None
        costs.append(cpu_s * 1e6 / run.queries_completed)
    return costs


def run_starts(cell: Cell) -> list[int]:
    """The fresh start each QPS run followed, in the runs' order."""
    return [where.start for where in cell.qps_rounds]


@dataclass(frozen=True)
class Cost:
    """A cell's cost per query (us): its interval (low/high None: none), and whether it comes
    from the runs one by one (False: one figure over every run, files before rounds)."""

    interval: Interval
    per_run: bool


def cost_per_query(cell: Cell) -> Cost | None:
    """The geometric mean of the runs' cost with the start-clustered interval; one figure over
    all runs where the runs have none each; None without CPU figures."""
    costs = run_costs(cell)
    if costs is not None:
        interval = stats.start_interval(costs, run_starts(cell))
        return None if interval is None else Cost(interval, per_run=True)
    total = server_us_per_query(cell)
    return None if total is None else Cost(Interval(total, None, None, 1), per_run=False)


def per_core(us: Interval) -> Interval | None:
    """The QPS one server core would answer at a cost per query: 1,000,000 / us, the bounds
    swapped; None at no cost."""
    if not us.estimate:
        return None
    return Interval(1e6 / us.estimate, 1e6 / us.high if us.high else None,
                    1e6 / us.low if us.low else None, us.n)


def split_per_query(cell: Cell) -> dict[str, float | None]:
    """The server's and the database's user and system CPU per answered query (us) over every
    run, keyed "server user", "server system", "db user", "db system"; None where the runs
    did not record the split (files before it, a server without a database of the suite's)."""
    answered = sum(run.queries_completed for run in cell.qps_runs)
    split: dict[str, float | None] = {}
    for who in ("server", "db"):
        for kind in ("user", "system"):
            values = [getattr(where, f"{who}_{kind}_s") for where in cell.qps_rounds]
            split[f"{who} {kind}"] = (None if not values or None in values or answered <= 0
                                      else sum(values) * 1e6 / answered)
    return split


def reference_of(server: str) -> str:
    """The row a server's cost is divided by: the row whose answers it must equal (the memory
    driver for a DLZ driver's row, the cached ones included), native BIND for the rest and for
    the memory driver itself."""
    kind = registered_kind(server)
    ceiling = kind.same_answers_as if kind is not None else None
    return ceiling if ceiling and server != ceiling else REFERENCE


def run_positions(cells: Sequence[Cell]) -> dict[Key, list[float]]:
    """Each cell's QPS runs' places in time, comparable across the cells of one file: the
    runs' monotonic starts where every run has one, else their places in the order the
    rounds ran the cells in (module docstring)."""
    measured = [c for c in cells if c.qps_rounds]
    if measured and all(w.began_s is not None for c in measured for w in c.qps_rounds):
        return {c.key: [float(w.began_s or 0.0) for w in c.qps_rounds] for c in measured}
    count = len(measured)
    places = [{i: p for p, i in enumerate(stats.round_order(range(count), parity))}
              for parity in (0, 1)]
    return {c.key: [float(w.round * count + places[w.round % 2][i]) for w in c.qps_rounds]
            for i, c in enumerate(measured)}


class AdjacentCost:
    """The cost ratios of one file's cells (module docstring), the runs' places found once."""

    def __init__(self, cells: Sequence[Cell]) -> None:
        self.cells = list(cells)
        self.positions = run_positions(self.cells)

    def reference(self, cell: Cell) -> Cell | None:
        """The cell the cell's cost is divided by: its reference row's at its thread count,
        measured in rounds and "ok" (native BIND's where a run has no memory driver's);
        None without one."""
        for name in dict.fromkeys((reference_of(cell.server), REFERENCE)):
            found = next((c for c in self.cells if c.server == name
                          and c.threads == cell.threads and c.status == "ok"
                          and c.key in self.positions), None)
            if found is not None:
                return found
        return None

    def per_run(self, cell: Cell, ref: Cell) -> list[float] | None:
        """Each run's cost over the geometric mean of the reference's runs just before and
        just after it; None where either side has no cost per run."""
        costs, ref_costs = run_costs(cell), run_costs(ref)
        if costs is None or ref_costs is None or cell.key not in self.positions:
            return None
        timeline = sorted(zip(self.positions[ref.key], ref_costs, strict=True))
        places = [place for place, _ in timeline]
        ratios = []
        for place, cost in zip(self.positions[cell.key], costs, strict=True):
            at = bisect_left(places, place)
            beside = [value for _, value in timeline[max(0, at - 1):at + 1]]
            ratios.append(cost / math.exp(statistics.fmean(math.log(v) for v in beside)))
        return ratios

    def ratio(self, cell: Cell) -> tuple[str, Interval] | None:
        """The reference's name and the cell's cost ratio to it (1 with no interval for the
        reference itself); None without a reference measured beside it."""
        ref = self.reference(cell)
        if ref is None:
            return None
        if ref is cell:
            return ref.server, Interval(1.0, None, None, 0)
        interval = self.ratio_to(cell, ref)
        return None if interval is None else (ref.server, interval)

    def ratio_to(self, cell: Cell, ref: Cell) -> Interval | None:
        """The cell's cost over `ref`'s measured next to it, each run's ratio, with the
        start-clustered interval (a row on another BIND over its own row on the run's: the
        same server, the same store); None where either side has no cost per run."""
        ratios = self.per_run(cell, ref)
        if not ratios:
            return None
        return stats.start_interval(ratios, run_starts(cell))


@dataclass(frozen=True)
class MachineByStart:
    """How the whole machine moved from one fresh start to the next: each start's mean
    deviation of log cost over the servers (a factor, 1.0 = the run's average), and how
    closely the servers' per-start costs moved together (the median of their pairwise
    correlations). Measured on an Intel Xeon VM (quick-2026-11-27): the servers' per-start
    means correlated 0.86-0.88 while steal stayed under 0.5% and the clock at its one
    frequency, so a start block of a few minutes is the machine's speed, which neither
    shows; the cost's share of the adjacent reference cancels it."""

    correlation: float
    factors: list[float]
    servers: int


def machine_by_start(cells: Sequence[Cell]) -> MachineByStart | None:
    """The machine's movement by fresh start over the cells' costs; None with fewer than
    three cells that have a cost per run over the same three or more starts."""
    by_server: list[list[float]] = []
    starts: list[int] | None = None
    for cell in cells:
        costs = run_costs(cell)
        if costs is None:
            continue
        cell_starts = sorted(set(run_starts(cell)))
        if starts is None:
            starts = cell_starts
        if cell_starts != starts:
            continue
        by_server.append([math.log(m) for m in stats.start_means(costs, run_starts(cell))])
    if starts is None or len(starts) < 3 or len(by_server) < 3:
        return None
    centred = [[v - statistics.fmean(logs) for v in logs] for logs in by_server]
    if any(statistics.pstdev(logs) == 0 for logs in centred):
        return None
    correlations = [statistics.correlation(a, b)
                    for i, a in enumerate(centred) for b in centred[i + 1:]]
    factors = [math.exp(statistics.fmean(logs[i] for logs in centred))
               for i in range(len(starts))]
    return MachineByStart(statistics.median(correlations), factors, len(by_server))
