"""Which cells measured the load generator instead of the server, and what the server's own
cost per query implies, which a slow client does not limit.

dnsperf runs one thread (-T 1), so one core is all it can use. In quick-all-2026-11-25 it used
0.75-1.0 of its core against NSD, Knot and cached PowerDNS, whose "125-134% of native" was then
the client's limit; against native BIND it used 0.68-0.76 while named used 0.97-1.0 of its
pinned core, and against every DLZ driver 0.05-0.52. Hence two rules, either of which marks a
cell "load generator": dnsperf used >= 0.8 of its core, or (pinned, so the server's cores are
known) the server used < 0.9 of its cores while dnsperf was sending as fast as answers came
back: the server was idle part of the time, so its maximum was not reached.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.measure.cells import Cell
from bench.measure.stats import Interval, median_interval

GENERATOR_LIMIT = 0.8     # of dnsperf's one core
SERVER_SATURATED = 0.9    # of the pinned server's cores


@dataclass(frozen=True)
class CoreUse:
    """Cores used over a cell's QPS runs: dnsperf's (of its one), and the server's (named and
    its database, per server core; None when not pinned or not accounted)."""

    dnsperf: float | None
    server: float | None

    @property
    def load_generator_bound(self) -> bool:
        if self.dnsperf is not None and self.dnsperf >= GENERATOR_LIMIT:
            return True
        return self.server is not None and self.server < SERVER_SATURATED


def server_us_per_query(cell: Cell) -> float | None:
    """The server's CPU per answered query: named's and its database's (None: unaccounted)."""
    named = cell.cpu_us_per_query.get("named")
    if named is None:
        return None
    return named + (cell.cpu_us_per_query.get("db") or 0.0)


def server_us_interval(cell: Cell) -> Interval | None:
    """The server's CPU per answered query in each QPS run measured in rounds (named's and its
    database's CPU over that run, over its answered queries): their median and its interval.
    None for a cell not measured in rounds, or whose server's CPU was not accounted."""
    if not cell.qps_rounds or len(cell.qps_rounds) != len(cell.qps_runs):
        return None
    values = []
    for where, run in zip(cell.qps_rounds, cell.qps_runs, strict=True):
        if where.named_cpu_s is None or run.queries_completed <= 0:
            return None
        values.append((where.named_cpu_s + (where.db_cpu_s or 0.0)) * 1e6
                      / run.queries_completed)
    return median_interval(values)


def capacity_interval(cell: Cell) -> Interval | None:
    """The QPS one server core would answer, from server_us_interval (its bounds swapped)."""
    us = server_us_interval(cell)
    if us is None or not us.estimate:
        return None
    low = 1e6 / us.high if us.high else None
    high = 1e6 / us.low if us.low else None
    return Interval(1e6 / us.estimate, low, high, us.n)


def startup_interval(cell: Cell) -> Interval | None:
    """named's startup over the cell's fresh starts (rounds), median and interval; None
    without them (the cell's one startup_ms is then the figure)."""
    return median_interval([s.startup_ms for s in cell.starts if s.startup_ms is not None])


def capacity_per_core(cell: Cell) -> float | None:
    """The queries per second one server core would answer at the cell's cost per query."""
    us = server_us_per_query(cell)
    return 1e6 / us if us else None


def server_cpus(meta: dict) -> int | None:
    """How many CPUs the server was pinned to (None: not pinned). Files written before it was
    recorded: half of the usable CPUs when pinned, as runner.cpu_split gives."""
    if "server_cpus" in meta:
        return meta["server_cpus"]
    if not meta.get("pin"):
        return None
    usable = int(meta.get("cpu_usable") or 0)
    return usable // 2 or None


def core_use(cell: Cell, cpus: int | None) -> CoreUse:
    """The cores dnsperf (of each dnsperf's one: averaged over the load hosts when several ran
    at once) and the server (over `cpus` pinned CPUs) used in the QPS runs."""
    seconds = sum(run.run_time_s for run in cell.qps_runs)
    if seconds <= 0:
        return CoreUse(None, None)
    dnsperf_cpu = [run.cpu_s for run in cell.qps_runs]
    generator_seconds = sum(run.run_time_s * run.generators for run in cell.qps_runs)
    dnsperf = (None if None in dnsperf_cpu
               else sum(c or 0.0 for c in dnsperf_cpu) / generator_seconds)
    us = server_us_per_query(cell)
    answered = sum(run.queries_completed for run in cell.qps_runs)
    server = None if us is None or not cpus else us * answered / 1e6 / seconds / cpus
    return CoreUse(dnsperf, server)
