"""Which cells measured the load generator instead of the server, and what the server's own
cost per query implies, which a slow client does not limit.

dnsperf runs one thread (-T 1), so one core is all it can use. In quick-all-2026-11-25 it used
0.75-1.0 of its core against NSD, Knot and cached PowerDNS, whose "125-134% of native" was then
the client's limit; against native BIND it used 0.68-0.76 while named used 0.97-1.0 of its
pinned core, and against every DLZ driver 0.05-0.52. Two signs of the load generator's limit:
dnsperf near the whole of its core, or (pinned, so the server's cores are known) the server
idle part of the time while dnsperf was sending as fast as answers came back.

Each QPS run is judged on its own, with hysteresis: a run marks the load generator only on a
clear sign (dnsperf >= GENERATOR_ON of its core, or the server < SERVER_IDLE_ON of its cores),
and clears the mark only on a clear sign the other way (dnsperf < GENERATOR_OFF and the server
>= SERVER_BUSY_OFF); a run in between keeps the mark the run before it left (none before the
first). A cell is the load generator's when most of its runs are. One threshold over the
cell's mean flipped between reruns: native in quick-2026-11-26 used 0.911 of its core against
a 0.90 limit, a rerun a hundredth lower would have marked it (and dropped every ratio to
native from the stop rule). The bands sit around those former limits (0.8 and 0.9), which
every committed cell but two (a server at 0.85 and 0.87 of its core) is judged the same by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.measure.cells import Cell
from bench.measure.stats import Interval, median_interval

GENERATOR_ON, GENERATOR_OFF = 0.85, 0.75       # of dnsperf's one core
SERVER_IDLE_ON, SERVER_BUSY_OFF = 0.85, 0.95   # of the pinned server's cores


@dataclass(frozen=True)
class CoreUse:
    """Cores used over QPS runs (a cell's, or one run's): dnsperf's (of its one), and the
    server's (its own and its database's, per server core; None when not pinned or not
    accounted)."""

    dnsperf: float | None
    server: float | None

    @property
    def marks_generator(self) -> bool:
        """A clear sign that the load generator, not the server, set the pace."""
        if self.dnsperf is not None and self.dnsperf >= GENERATOR_ON:
            return True
        return self.server is not None and self.server < SERVER_IDLE_ON

    @property
    def clears_generator(self) -> bool:
        """A clear sign that the server set the pace (an unknown share is no sign against)."""
        return ((self.dnsperf is None or self.dnsperf < GENERATOR_OFF)
                and (self.server is None or self.server >= SERVER_BUSY_OFF))


@dataclass(frozen=True)
class GeneratorLimit:
    """How many of a cell's QPS runs the load generator limited (limited_runs)."""

    limited: int
    runs: int

    @property
    def bound(self) -> bool:
        """Most of the runs were the load generator's: the cell's QPS is its limit."""
        return 2 * self.limited > self.runs


def limited_runs(uses: Sequence[CoreUse]) -> list[bool]:
    """Each run's mark, in the runs' order, with hysteresis (module docstring)."""
    marked, marks = False, []
    for use in uses:
        if use.marks_generator:
            marked = True
        elif use.clears_generator:
            marked = False
        marks.append(marked)
    return marks


def generator_limit(cell: Cell, cpus: int | None) -> GeneratorLimit:
    """The cell's QPS runs the load generator limited (`cpus`: the server's pinned CPUs)."""
    marks = limited_runs(run_core_uses(cell, cpus))
    return GeneratorLimit(sum(marks), len(marks))


def run_core_uses(cell: Cell, cpus: int | None) -> list[CoreUse]:
    """Each QPS run's CoreUse: dnsperf's CPU over the run's time; the server's from the CPU
    it used in that run where the run was measured in rounds, else the cell's over all of its
    runs (the only figure files before rounds and one-block runs have)."""
    per_run = len(cell.qps_rounds) == len(cell.qps_runs)
    overall = core_use(cell, cpus).server
    uses = []
    for i, run in enumerate(cell.qps_runs):
        seconds = run.run_time_s * run.generators
        dnsperf = None if run.cpu_s is None or seconds <= 0 else run.cpu_s / seconds
        server = overall
        if per_run:
            where = cell.qps_rounds[i]
            server = (None if where.server_cpu_s is None or not cpus or run.run_time_s <= 0
                      else (where.server_cpu_s + (where.db_cpu_s or 0.0)) / run.run_time_s
                      / cpus)
        uses.append(CoreUse(dnsperf, server))
    return uses


def server_us_per_query(cell: Cell) -> float | None:
    """The server's CPU per answered query: its own and its database's (None: unaccounted)."""
    server = cell.cpu_us_per_query.get("server")
    if server is None:
        return None
    return server + (cell.cpu_us_per_query.get("db") or 0.0)


def server_us_interval(cell: Cell) -> Interval | None:
    """The server's CPU per answered query in each QPS run measured in rounds (its own and its
    database's CPU over that run, over its answered queries): their median and its interval.
    None for a cell not measured in rounds, or whose server's CPU was not accounted."""
    if not cell.qps_rounds or len(cell.qps_rounds) != len(cell.qps_runs):
        return None
    values = []
    for where, run in zip(cell.qps_rounds, cell.qps_runs, strict=True):
        if where.server_cpu_s is None or run.queries_completed <= 0:
            return None
        values.append((where.server_cpu_s + (where.db_cpu_s or 0.0)) * 1e6
                      / run.queries_completed)
    return median_interval(values)


def startup_interval(cell: Cell) -> Interval | None:
    """The server's startup over the cell's fresh starts (rounds), median and interval; None
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
