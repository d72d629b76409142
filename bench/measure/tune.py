"""`tune`: which named thread count and driver connection count to run a DLZ driver with.

A DLZ driver blocks its named worker for the whole round trip to its database, so the thread
count that serves most queries depends on that round trip, not on the core count: threads
beyond the CPU count are what hides it (issue 12). The Tuner measures, for one driver:

1. the grid: every (threads, connections) pair, each a runner cell (startup, answers checked
   against native BIND's, warm-up, QPS runs with CPU per query, p99 under load: the runner's
   own phases), with the store's server on this host or in a network namespace of its own
   (base.netns) and optionally, there, a latency proxy (base.latency_proxy) between named
   and it;
2. processes against threads (seed 004, ../shared/seeds/004_268b5ab59dee7869.txt): N
   single-thread named processes sharing one address and port (SO_REUSEPORT), each pinned to
   its own server CPU, against one N-thread process; QPS of one dnsperf load, summed;
3. CPUs: QPS against the number of CPUs given to the server side, the load on the rest;
4. the recommendation: the smallest setting the data do not show more than 5% below the best
   QPS (over fresh starts, a one-sided Welch t test; with one start, within 5% of the best's
   median), with its p99.

The grid is measured `starts` times (Plan.starts), each pass a fresh start of every setting, in
reversed order every other pass (stats.round_order), so that a drift of the machine lands on no
setting's side. A setting's runs keep the start they followed (Cell.qps_rounds, with each run's
CPU metered on its own), so its QPS and its cost per query have intervals with the fresh start
as the independent unit, as `run`'s do (stats.start_interval, bench/measure/cost.py). The p99
under load is measured after the first start only: it restates the QPS (runner.loaded_latency).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from base.errors import UserError
from base.latency_proxy import LatencyProxy
from base.netns import DatabaseHost
from base.process import free_port
from bench.load import dnsperf, prober
from bench.measure import stats
from bench.measure.cells import Cell, FreshStart, QpsSummary
from bench.measure.latency import measure_store_added_rtt
from bench.measure.progress import StepProgress
from bench.measure.results import Results, save_results
from bench.measure.rounds import metered_run, set_qps_figures
from bench.measure.runner import (
    CHECK_ANSWERS,
    LOADED_LATENCY,
    MEASURE_QPS,
    STARTUP,
    WARM_UP,
    Measuring,
    Profile,
    Runner,
    Setup,
    clients_for,
    pin_processes,
)
from bench.measure.serving import LoadedStore, loaded_store
from bench.measure.tuning import Recommendation, ScalePoint, Tuning
from servers import DnsServer

# A setting is as good as the best when its QPS is within this fraction of the best's.
TOLERANCE = 0.05
DB_HOSTS = ("local", "netns")

# The runner's phases a grid cell runs: update visibility and unloaded latency say nothing
# about the thread and connection counts.
GRID_PHASES = (STARTUP, CHECK_ANSWERS, WARM_UP, MEASURE_QPS, LOADED_LATENCY)
# A later fresh start of a setting: its answers checked again, its QPS and cost measured.
LATER_PHASES = (STARTUP, CHECK_ANSWERS, WARM_UP, MEASURE_QPS)


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What `tune` measures besides the runner's Setup."""

    pairs: tuple[tuple[int, int], ...]   # (threads, connections), in measuring order
    db_host: str = "local"
    db_rtt_ms: int = 0
    processes: tuple[int, ...] = ()      # N of "N processes against N threads"; () skips
    cpu_scaling: bool = True
    starts: int = 1                      # fresh starts of every setting (passes of the grid)

    def __post_init__(self) -> None:
        if self.starts < 1:
            raise UserError(f"--starts {self.starts}: at least one start")
        if self.db_rtt_ms and self.db_host != "netns":
            # Its control API, which has no authentication, is closed to other local users
            # only there (base/latency_proxy.py).
            raise UserError(f"--db-rtt {self.db_rtt_ms} needs --db-host netns: the latency "
                            "proxy runs on the database's own host")


def grid_pairs(threads: Sequence[int], connections: Sequence[int] | None) -> list[tuple[int, int]]:
    """Every (threads, connections) pair; without a connection list, connections take the
    thread counts' values, so the grid holds connections below, at and above the threads."""
    counts = sorted(set(connections if connections is not None else threads))
    return [(t, c) for t in sorted(set(threads)) for c in counts]


def default_processes(server_cpus: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to the server CPUs, and at least 1 and 2 (sharing a port needs two)."""
    counts, n = [1, 2], 4
    while n <= server_cpus:
        counts.append(n)
        n *= 2
    return tuple(counts)


def recommend(cells: Sequence[Cell], tolerance: float = TOLERANCE) -> Recommendation | None:
    """The smallest (threads, then connections) measured setting as good as the best QPS
    (as_good_as); None without a correct cell with a QPS figure."""
    ok = [c for c in cells if c.status == "ok" and c.qps.median is not None]
    if not ok:
        return None
    best = max(ok, key=setting_qps)
    tests = {id(c): below_best_p(c, best, tolerance) for c in ok}
    good = [c for c in ok if as_good_as(c, best, tolerance, tests[id(c)])]
    pick = min(good, key=lambda c: (c.threads, c.connections))
    return Recommendation(server=pick.server, threads=pick.threads,
                          connections=pick.connections, qps=setting_qps(pick),
                          p99_us=pick.latency_loaded.p99_us if pick.latency_loaded else None,
                          best_qps=setting_qps(best), best_threads=best.threads,
                          best_connections=best.connections, tolerance=tolerance,
                          p_below=tests[id(pick)])


def setting_qps(cell: Cell) -> float:
    """A setting's QPS: the geometric mean over its fresh starts, or its runs' median (one
    start)."""
    over = qps_over_starts(cell)
    return over.estimate if over is not None else cell.qps.median or 0.0


def as_good_as(cell: Cell, best: Cell, tolerance: float, p_below: float | None) -> bool:
    """Is the setting as good as the best? Over fresh starts: the data do not show its QPS
    more than `tolerance` below the best's (p_below at least 0.05), so a setting the starts
    cannot tell from the best is not passed over for a larger one by a noisy median (mysql in
    tune-2026-11-28: 1/1 at 9,127 [7,819-10,655] QPS against 1/16 at 9,588 [8,548-10,755]).
    With one start: its QPS within `tolerance` of the best's."""
    if p_below is not None:
        return p_below >= stats.significance(stats.LEVEL)
    return setting_qps(cell) >= (1 - tolerance) * setting_qps(best)


def below_best_p(cell: Cell, best: Cell, tolerance: float) -> float | None:
    """The p-value of "the setting's QPS is more than `tolerance` below the best's": a
    one-sided Welch t test on the log per-start means (scipy.stats.ttest_ind). Not Mann-Whitney
    as `compare`'s verdict: with 3 starts a side its smallest one-sided p-value is 0.05, so it
    could never show a setting below. None with fewer than two starts on either side, or
    starts that all gave the same QPS (no spread to test)."""
    from scipy import stats as scipy_stats

    mine, theirs = start_qps(cell), start_qps(best)
    if mine is None or theirs is None:
        return None
    if tolerance >= 1:  # no QPS is more than all of the best's below it
        return 1.0
    shifted = [math.log(q) - math.log(1 - tolerance) for q in mine]
    test = scipy_stats.ttest_ind(shifted, [math.log(q) for q in theirs], equal_var=False,
                                 alternative="less")
    return None if math.isnan(test.pvalue) else float(test.pvalue)


def start_qps(cell: Cell) -> list[float] | None:
    """A setting's QPS per fresh start (the geometric mean of that start's runs); None for one
    start (or a file before starts) or a run that answered nothing."""
    runs = _runs_by_start(cell)
    return None if runs is None else stats.start_means(*runs)


def _runs_by_start(cell: Cell) -> tuple[list[float], list[int]] | None:
    """Each run's QPS and the fresh start it followed; None for one start (or a file before
    starts) or a run that answered nothing."""
    values = [r.qps for r in cell.qps_runs]
    if len(cell.starts) < 2 or len(cell.qps_rounds) != len(values) or min(values) <= 0:
        return None
    return values, [r.start for r in cell.qps_rounds]


def add_start(cell: Cell, later: Cell, start: int) -> None:
    """A later fresh start's figures added to its setting's cell: its runs (each keeping its
    start), its startup, and the CPU per query and peak memory over every run; a start that
    failed or answered wrongly makes the setting so."""
    cell.starts.append(FreshStart(start, later.startup_ms))
    cell.mismatches += later.mismatches
    if later.status != "ok":
        cell.status, cell.error = later.status, f"start {start + 1}: {later.error}"
        return
    cell.qps_runs += later.qps_runs
    cell.qps_rounds += later.qps_rounds
    set_qps_figures(cell)
    cell.peak_rss_kb = {key: _larger(cell.peak_rss_kb.get(key), later.peak_rss_kb.get(key))
                        for key in cell.peak_rss_kb.keys() | later.peak_rss_kb.keys()}


def qps_over_starts(cell: Cell) -> stats.Interval | None:
    """The geometric mean of a setting's runs' QPS with its 95% interval over its fresh
    starts; None for one start (or a file before starts) or a run that answered nothing."""
    runs = _runs_by_start(cell)
    return None if runs is None else stats.start_interval(*runs)


def _larger(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def all_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _cpu_text(cpus: Sequence[int]) -> str:
    return ",".join(map(str, cpus))


class Tuner(Runner):
    """The runner, measuring one server over a grid of thread and connection counts."""

    def __init__(self, profile: Profile, setup: Setup, results: Results, plan: Plan) -> None:
        super().__init__(profile, setup, results, phases=GRID_PHASES)
        if len(setup.servers) != 1:
            raise UserError("tune measures one server at a time")
        self.server = setup.servers[0]
        self.plan = plan
        self.tuning = results.tuning = Tuning(db_host=plan.db_host, db_rtt_ms=plan.db_rtt_ms)
        self.start_index = 0
        per_cell = [phase.expected_s(profile) for phase in self.phases]
        per_later = [phase.expected_s(profile) for phase in LATER_PHASES]
        self.progress = StepProgress([2.0] + per_cell * len(plan.pairs)
                                     + per_later * len(plan.pairs) * (plan.starts - 1)
                                     + [self._point_s()] * self._point_count())

    def _point_s(self) -> float:
        return 2.0 + self._point_warmup_s() + self.profile.duration_s

    def _point_warmup_s(self) -> float:
        # The full profile's 10-minute warm-up is for the grid; a scaling point is a warm
        # store already.
        return min(self.profile.warmup_s, self.profile.duration_s)

    def _point_count(self) -> int:
        cpu_points = len(all_cpus()) - 1 if self.plan.cpu_scaling else 0
        return 2 * len(self.plan.processes) + max(0, cpu_points)

    def run(self) -> Results:
        self.results.prober_floor = prober.measure_floor(self.profile.probes,
                                                          cpu_list=self.load_cpus)
        self.progress.step(f"{self.setup.reference.name}: the answers every setting must give")
        self.collect_reference()
        with self.database_host() as host, \
                loaded_store(self.server, self.setup.stream, self.setup.run_dir,
                             db_host=host) as loaded, \
                self.latency_proxy(loaded, host):
            for start in range(self.plan.starts):
                self.start_index = start
                for threads, connections in stats.round_order(self.plan.pairs, start):
                    self.measure_setting(loaded, threads, connections)
            recommendation = recommend(self.results.cells)
            self.tuning.recommendations = [recommendation] if recommendation else []
            save_results(self.results, self.setup.out_dir)
            for count in self.plan.processes:
                self.processes_against_threads(loaded, count)
            if self.plan.cpu_scaling:
                self.cpu_scaling(loaded, recommendation)
        return self.results

    # --- the grid, start by start ----------------------------------------------------------

    def measure_setting(self, loaded: LoadedStore, threads: int, connections: int) -> None:
        """One fresh start of a setting: its cell at the first start, later starts' figures
        added to that cell (a setting that failed or answered wrongly is not started again)."""
        if self.start_index == 0:
            self.run_cell(loaded, threads, connections)
            cell = self.results.cells[-1]
            cell.starts = [FreshStart(0, cell.startup_ms)]
            return
        cell = next(c for c in self.results.cells if c.key == (loaded.server.name, threads,
                                                                 connections))
        if cell.status != "ok":
            self.progress.skip(len(LATER_PHASES))
            return
        later = Cell(cell.server, threads, connections)
        m = Measuring(loaded, self.build(loaded, threads, connections), later)
        label = f"{cell.server} threads={threads} connections={connections} " \
                f"(start {self.start_index + 1} of {self.plan.starts})"
        try:
            self.run_phases(m, LATER_PHASES, label)
        finally:
            m.server.stop()
        add_start(cell, later, self.start_index)
        save_results(self.results, self.setup.out_dir)

    def qps_runs(self, m: Measuring) -> None:
        """The measured dnsperf runs, each with the CPU the server and its database used
        during it and the start it followed: the cost per query of each run, whose interval
        treats the starts as the independent unit."""
        for _ in range(self.profile.runs):
            metered_run(self, m, self.profile.duration_s, self.start_index, self.start_index)
        m.cell.qps = QpsSummary.from_runs(m.cell.qps_runs)

    # --- set-up -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def database_host(self) -> Iterator[DatabaseHost | None]:
        if self.plan.db_host != "netns":
            yield None
            return
        with DatabaseHost() as host:
            self.tuning.db_namespace = host.name
            self.tuning.db_address = host.address
            yield host

    @contextlib.contextmanager
    def latency_proxy(self, loaded: LoadedStore,
                      db_host: DatabaseHost | None) -> Iterator[None]:
        """With --db-rtt, a proxy on the database's host adding it between named and the
        database: its added round trip measured first, then named pointed at it (target.via)."""
        if not self.plan.db_rtt_ms:
            yield
            return
        assert db_host is not None  # the Plan has --db-host netns with --db-rtt
        host, port = loaded.loader.database.tcp_endpoint(loaded.target)
        with LatencyProxy(self.setup.run_dir / "toxiproxy", db_host, host, port,
                          self.plan.db_rtt_ms) as proxy:
            added = measure_store_added_rtt(loaded.loader.database, loaded.target, proxy)
            self.tuning.added_rtt = added.as_json()
            loaded.target.via = (proxy.listen_host, proxy.listen_port)
            try:
                yield
            finally:
                loaded.target.via = None

    # --- processes against threads, CPUs ---------------------------------------------------

    def _server_cpu_list(self) -> list[int]:
        """The server side's CPUs (all of them when not pinning)."""
        if self.server_cpus is None:
            return all_cpus()
        return [int(c) for c in self.server_cpus.split(",")]

    def processes_against_threads(self, loaded: LoadedStore, count: int) -> None:
        cpus = self._server_cpu_list()
        threaded = loaded.dns_server(self.setup.run_dir, threads=count, connections=count)
        self.measure_point(ScalePoint(loaded.server.name, "threads", count, count, count,
                                      _cpu_text(cpus), self.load_cpus), [threaded], [cpus])
        # One port for all: named binds it with SO_REUSEPORT, so the kernel spreads the
        # load's flows over the processes.
        port = free_port()
        own = [[cpus[i % len(cpus)]] for i in range(count)]
        processes = [loaded.server.build(loaded.target,
                                         self.setup.run_dir / f"process-{loaded.server.name}-{i}",
                                         threads=1, connections=1, port=port)
                     for i in range(count)]
        self.measure_point(ScalePoint(loaded.server.name, "processes", count, 1, 1,
                                      ";".join(_cpu_text(c) for c in own), self.load_cpus),
                           processes, own)

    def cpu_scaling(self, loaded: LoadedStore, setting: Recommendation | None) -> None:
        """QPS with 1 .. nproc-1 CPUs for named and the database, the rest for dnsperf; at
        the recommended setting (the largest thread count of the grid without one)."""
        cpus = all_cpus()
        threads = setting.threads if setting else max(t for t, _ in self.plan.pairs)
        connections = setting.connections if setting else threads
        for k in range(1, len(cpus)):
            for_server, for_load = cpus[:k], cpus[k:]
            server = loaded.dns_server(self.setup.run_dir, threads=threads, connections=connections)
            pin_processes(loaded.database_pids(), _cpu_text(for_server))
            self.measure_point(ScalePoint(loaded.server.name, "cpus", k, threads, connections,
                                          _cpu_text(for_server), _cpu_text(for_load)),
                               [server], [for_server])
        pin_processes(loaded.database_pids(), self.server_cpus or _cpu_text(cpus))

    def measure_point(self, point: ScalePoint, servers: list[DnsServer],
                      cpus: list[list[int]]) -> None:
        """Start every server (each pinned to its CPUs), one warm-up and one measured dnsperf
        load against their shared port; the requests each received."""
        self.progress.step(f"{point.server}: {point.count} {point.kind}")
        try:
            with contextlib.ExitStack() as running:
                for server, cpu_list in zip(servers, cpus, strict=True):
                    running.enter_context(server)
                    pin_processes(server.pids(), _cpu_text(cpu_list))
                port = servers[0].port
                # As many client sockets as a grid cell of the same thread count: named
                # reads each socket's flow on one worker, so fewer sockets than threads leave
                # workers idle (pg at 32 threads over a 1 ms round trip: 1,466 QPS with 4
                # sockets, 3,694 in the grid's cell with 256).
                clients = clients_for(self.profile, point.threads * len(servers))
                options = {"clients": clients, "queue_depth": self.profile.queue_depth,
                           "cpu_list": point.load_cpus}
                dnsperf.run_dnsperf("127.0.0.1", port, self.setup.query_file,
                                    duration=self._point_warmup_s(), **options)
                point.run = dnsperf.run_dnsperf("127.0.0.1", port, self.setup.query_file,
                                                duration=self.profile.duration_s, **options)
                point.qps = point.run.qps
                point.requests = [server.requests_received() for server in servers]
        except UserError as exc:
            point.status, point.error = "failed", str(exc)
        self.tuning.scaling.append(point)
        save_results(self.results, self.setup.out_dir)

