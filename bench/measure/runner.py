"""The benchmark runner: every figure of the BIND-DLZ "Performance Tests" table (seed 003,
../shared/seeds/003_b0923ef81a1e32b7.txt), per server and thread count.

The reference server (native BIND) is measured first, then every other server. For each, its
store is loaded once; for each thread count the store's server is restarted and the DNS server
started afresh, then the phases of PHASES run in order: startup time, a check of the answers
against the reference's, a discarded warm-up run, unloaded latency, R dnsperf runs, loaded
latency, update visibility, and CPU/memory cost. Every figure is measured here; servers and
stores never time themselves.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import dns.exception
import dns.name

from base.errors import UserError
from base.transports import TlsFiles, self_signed
from bench.load import dnsperf, prober, resperf
from bench.load.hosts import LoadHost
from bench.measure import accounting, capacity, stats
from bench.measure.cells import Cell, QpsSummary
from bench.measure.progress import StepProgress
from bench.measure.results import Results, save_results
from bench.measure.serial import to_json
from bench.measure.serving import LoadedStore, loaded_store
from bench.verify.answers import Answer, ask, compare_answers
from bench.verify.bind_classes import ZoneFacts
from bench.verify.compare import UNEXPLAINED, classify
from databases.store_urls import PRIVATE, StoreUrls
from servers import (
    DLZ_CEILING,
    REFERENCE,
    DnsServer,
    ExternalServer,
    ServerKind,
    Target,
    group_of,
)
from zonedata.derive import Query
from zonedata.model import Zone, make_record
from zonedata.queries import read_query_file


@dataclass(frozen=True)
class Rounds:
    """How `run` measures QPS: in rounds, each running every cell once (stats.round_order),
    the servers kept running between rounds and started afresh after `restart_every` rounds,
    then after as many (1 to `restart_every`) as starts.StartSchedule chooses from the runs;
    rounds continue until stats.StopRule says (docs/method/run.md, "Rounds")."""

    min_rounds: int
    max_rounds: int
    budget_s: float           # for the rounds (set-up and the once-per-cell phases apart)
    run_s: float              # each cell's QPS run in a round
    restart_every: int        # rounds between the first two fresh starts, and the most after any
    steady_s: float           # each warm-up run after a fresh start
    steady_max_runs: int = 5  # warm-up runs at most, steady or not
    target: float = stats.DEFAULT_TARGET

    def stop_rule(self) -> stats.StopRule:
        return stats.StopRule(self.min_rounds, self.max_rounds, self.budget_s, self.target)

    def restarts_before(self, round_index: int) -> bool:
        """A fresh start before this round at the profile's spacing, every restart_every
        rounds: the plan's before the run chooses its own (starts.StartSchedule)."""
        return round_index > 0 and round_index % self.restart_every == 0


# `make bench`: native BIND and the 10 DLZ drivers at one thread in 25 minutes at most
# (docs/method/run.md, "How long a run takes"; tests/test_runner_plan.py).
QUICK_ROUNDS = Rounds(min_rounds=6, max_rounds=30, budget_s=1200.0, run_s=2.0, restart_every=5,
                      steady_s=1.0)


@dataclass(frozen=True)
class Profile:
    """How big and how long: the method parameters of one run."""

    name: str
    zones: int
    records: int
    queries: int          # lines in the generated query file
    warmup_s: float       # the discarded dnsperf run (seed 003: 10 minutes)
    duration_s: float     # each measured dnsperf run (seed 003: 60 s)
    runs: int             # measured dnsperf runs; the median is reported
    probes: int           # single queries per latency measurement
    check_queries: int    # answers compared with native BIND before timing
    threads: tuple[int, ...] = (1, 2, 4)
    clients: int = 4      # dnsperf's sockets at least; more with more named threads
    queue_depth: int = 100
    startup_timeout_s: float = 120.0  # until the server answers for the last zone
    step_s: float = 5.0           # each offered-load step of `capacity`
    resperf_ramp_s: float = 10.0  # resperf's ramp in `capacity`
    capacity: bool = False        # `run` sweeps offered load too (the capacity phase)
    # Updates timed per cell (each a store write and, where the server needs one, a reload):
    # 7 give the median a 95% interval (bench/measure/stats.py needs 6 or more).
    update_repeats: int = 7
    # `run`'s QPS in rounds (warmup_s, duration_s and runs are then the other commands',
    # which measure one cell at a time), and its servers by default: these groups of the
    # registry (None: every built server).
    rounds: Rounds = QUICK_ROUNDS
    server_groups: tuple[str, ...] | None = None


PROFILES = {
    "tiny": Profile("tiny", zones=20, records=10, queries=500, warmup_s=0.5, duration_s=1.0,
                    runs=2, probes=100, check_queries=50, threads=(1,), startup_timeout_s=10.0,
                    step_s=1.0, resperf_ramp_s=2.0, update_repeats=2,
                    rounds=Rounds(min_rounds=2, max_rounds=2, budget_s=60.0, run_s=1.0,
                                  restart_every=1, steady_s=0.3, steady_max_runs=3)),
    "quick": Profile("quick", zones=1000, records=10, queries=20000, warmup_s=2.0,
                     duration_s=4.0, runs=3, probes=1000, check_queries=200, threads=(1,),
                     rounds=QUICK_ROUNDS,
                     server_groups=(group_of(REFERENCE), group_of(DLZ_CEILING))),
    # Every built server at 1, 2 and 4 threads: PowerDNS, NSD and Knot beside BIND.
    "quick-all": Profile("quick-all", zones=1000, records=10, queries=20000, warmup_s=2.0,
                         duration_s=4.0, runs=3, probes=1000, check_queries=200,
                         rounds=dataclasses.replace(QUICK_ROUNDS, budget_s=3600.0)),
    "full": Profile("full", zones=10000, records=10, queries=100000, warmup_s=600.0,
                    duration_s=60.0, runs=3, probes=10000, check_queries=2000, step_s=30.0,
                    resperf_ramp_s=60.0, capacity=True,
                    rounds=Rounds(min_rounds=6, max_rounds=10, budget_s=6 * 3600.0,
                                  run_s=60.0, restart_every=3, steady_s=30.0)),
}


@dataclass(kw_only=True)
class Setup:
    """Everything one run needs besides the profile."""

    reference: ServerKind          # measured first; its answers are what every server must give
    servers: list[ServerKind]      # measured after the reference, in this order
    stream: Callable[[], Iterator[Zone]]
    dataset: str
    query_file: Path
    run_dir: Path
    out_dir: Path
    threads: tuple[int, ...]
    connections: int | None = None
    pin: bool = True
    # capacity: offered loads in % of each cell's closed-loop maximum, and one absolute rate
    # (queries per second) every server is asked to carry, to compare them at the same load.
    steps: tuple[float, ...] = capacity.DEFAULT_STEPS
    common_rate: float | None = None
    # A server the suite did not start (`--target`): measured alone, instead of the reference
    # and the servers, with the phases for_target gives.
    target: Target | None = None
    # Stores on servers the suite did not start (--store-url); the others run their own.
    store_urls: StoreUrls = PRIVATE
    # Every query carries the DO bit (EDNS0): dnsperf's and the prober's `-D`, and the answer
    # check asks with it too, so signed data is answered with its signatures where BIND can.
    dnssec: bool = False
    # What every query travels over (base/transports.py): dnsperf's -m, the prober's -m, and
    # the answer check's dnspython call; a server that does not speak it gets an n/a cell.
    transport: str = "udp"
    # A random-subdomain flood beside the normal traffic (the flood phase): its rate in
    # queries per second and its query file (None: no flood).
    flood_rate: float | None = None
    flood_file: Path | None = None
    # Load hosts (`--load-from`, open for the run): dnsperf and resperf run on each at once,
    # their reports merged; the prober on the first. None: every load tool runs here.
    load_hosts: list[LoadHost] = dataclasses.field(default_factory=list)


# dnsperf sockets per named worker thread. named listens with one SO_REUSEPORT socket per
# worker and the kernel hashes each client socket onto one of them: with 4 dnsperf sockets
# and named -n 4, one worker got no query at all (docs/loaded-latency.md); the chance that
# CLIENTS_PER_THREAD x N sockets leave one of N workers idle is N x (1 - 1/N)^(8N), 0.04%
# at N = 4.
CLIENTS_PER_THREAD = 8
# An update the server has not answered after this long is not seen: far above every server's
# measured delay (the memory driver's reload of 1,000 zones, the slowest, is under a second).
UPDATE_TIMEOUT_S = 30.0


def clients_for(profile: Profile, threads: int) -> int:
    """dnsperf's client sockets against named -n threads."""
    return max(profile.clients, CLIENTS_PER_THREAD * threads)


def cpu_split(pin: bool) -> tuple[str | None, str | None]:
    """(server cpus, load-generator cpus) for taskset; None, None when not pinning."""
    if not pin:
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise UserError("--pin needs at least two CPUs")
    half = len(cpus) // 2
    return ",".join(map(str, cpus[:half])), ",".join(map(str, cpus[half:]))


def pin_processes(pids: list[int], cpu_list: str | None) -> None:
    """Move every thread of the processes onto the server's CPUs (children inherit it)."""
    if cpu_list is None:
        return
    cpus = {int(c) for c in cpu_list.split(",")}
    for pid in pids:
        for tid in _threads(pid):
            try:
                os.sched_setaffinity(tid, cpus)
            except (ProcessLookupError, PermissionError):
                pass


def _threads(pid: int) -> list[int]:
    """The process's thread ids; none for a process gone since it was listed (a database
    backend whose connection closed meanwhile: a fresh-clone `make test` met one in
    test_tune)."""
    try:
        return [int(name) for name in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return []


@dataclass
class Measuring:
    """One cell being measured: the store, the server started over it, and its figures."""

    loaded: LoadedStore | None  # None: a --target server (its phases never touch a store)
    server: DnsServer
    cell: Cell


@dataclass(frozen=True)
class Phase:
    """One step of measuring a cell: what the progress line says, how long it is expected to
    take (seconds, from the profile), and what it does. A phase that leaves the cell not "ok"
    ends the cell."""

    label: str
    expected_s: Callable[[Profile], float]
    run: Callable[[Runner, Measuring], None]


class Runner:
    def __init__(self, profile: Profile, setup: Setup, results: Results,
                 phases: Sequence[Phase] | None = None) -> None:
        self.profile = profile
        self.setup = setup
        self.results = results
        self.phases = tuple(phases_of(profile) if phases is None else phases)
        if setup.flood_rate:
            self.phases = (*self.phases, FLOOD)
        if setup.target is not None:
            self.phases = for_target(self.phases)
        self.server_cpus, self.load_cpus = cpu_split(setup.pin)
        self.reference: dict[Query, tuple[Answer, Answer | None]] = {}
        # DoT: one self-signed key and certificate for every server of the run.
        self.tls: TlsFiles | None = (self_signed(setup.run_dir / "tls")
                                     if setup.transport == "dot" else None)
        per_cell = [phase.expected_s(profile) for phase in self.phases]
        if setup.target is not None:
            # The reference's answers first (the target's are checked against them).
            self.progress = StepProgress([5.0] + per_cell * len(setup.threads))
        else:
            cells = (1 + len(setup.servers)) * len(setup.threads)
            self.progress = StepProgress(per_cell * cells)

    # Read when a phase first needs them: a runner whose phases check no answers (`scale`,
    # at a million zones) never streams the data set for them.
    @functools.cached_property
    def check(self) -> list[Query]:
        """The queries whose answers are compared with the reference server's."""
        lines = read_query_file(self.setup.query_file)[:self.profile.check_queries]
        return [(dns.name.from_text(name), rdtype) for name, rdtype in lines]

    @functools.cached_property
    def facts(self) -> ZoneFacts:
        return ZoneFacts.of(self.setup.stream())

    def run(self) -> Results:
        print(f"expected duration: about {self.progress.seconds_left() / 60:.0f} min",
              file=sys.stderr, flush=True)
        self.results.prober_floor = prober.measure_floor(self.profile.probes,
                                                          cpu_list=self.load_cpus)
        if self.setup.target is not None:
            self.progress.step(f"{self.setup.reference.name}: the answers the target must give")
            self.collect_reference()
            for threads in self.setup.threads:
                self.run_target_cell(self.setup.target, threads)
            return self.results
        for server in [self.setup.reference, *self.setup.servers]:
            self.run_server(server)
        return self.results

    def collect_reference(self) -> None:
        """The reference server's answers to the check queries, which every cell must give
        (served once here, for the runs that do not measure the reference itself)."""
        with loaded_store(self.setup.reference, self.setup.stream,
                          self.setup.run_dir) as reference, \
                reference.dns_server(self.setup.run_dir, threads=1) as server:
            self.reference = {query: self.ask(server, query) for query in self.check}

    def run_server(self, server: ServerKind) -> None:
        try:
            with loaded_store(server, self.setup.stream, self.setup.run_dir,
                              store_urls=self.setup.store_urls) as loaded:
                for threads in self.setup.threads:
                    self.run_cell(loaded, threads)
        except UserError as exc:  # the store itself would not start or load
            for threads in self.setup.threads:
                if self.results.cell(server.name, threads) is None:
                    self.progress.skip(len(self.phases))
                    self._record(Cell(server.name, threads, self._connections(threads),
                                      status="failed", error=str(exc)))

    def _connections(self, threads: int) -> int:
        return self.setup.connections or threads

    def _record(self, cell: Cell) -> None:
        self.results.cells.append(cell)
        save_results(self.results, self.setup.out_dir)

    def run_cell(self, loaded: LoadedStore, threads: int, connections: int | None = None) -> None:
        """Every phase at `threads`, with `connections` (default: the setup's) to the store."""
        cell = Cell(loaded.server.name, threads, connections or self._connections(threads))
        label = f"{loaded.server.name} threads={threads}"
        if cell.connections != threads:
            label += f" connections={cell.connections}"
        if self.not_applicable(loaded.server, cell):
            self.progress.skip(len(self.phases))
            self._record(cell)
            return
        server = self.build(loaded, threads, cell.connections)
        self.measure_cell(Measuring(loaded, server, cell), label)

    def not_applicable(self, server: ServerKind, cell: Cell) -> bool:
        """Whether the server cannot answer over the run's transport: then the cell is n/a,
        with the reason, instead of left out."""
        reason = server.transport_unsupported(self.setup.transport)
        if reason is None:
            return False
        cell.status, cell.error = "n/a", f"no {self.setup.transport}: {reason}"
        return True

    def build(self, loaded: LoadedStore, threads: int, connections: int) -> DnsServer:
        """The cell's server (not started), answering over TLS too when the run is DoT."""
        server = loaded.dns_server(self.setup.run_dir, threads=threads, connections=connections)
        if self.tls is not None:
            server.serve_tls(self.tls)
        return server

    def run_target_cell(self, target: Target, threads: int) -> None:
        """Every phase against a server the suite did not start; `threads` is its own worker
        count as its operator gave it (it sets dnsperf's client sockets)."""
        # No connections of the suite's: what the server keeps to its data is its own.
        cell = Cell(target.label, threads, 0, target=target.given)
        server = target.server(self.setup.run_dir / f"target-{target.label}-{threads}",
                               threads=threads)
        self.measure_cell(Measuring(None, server, cell),
                          f"{target.label} at {target.address} threads={threads}")

    def measure_cell(self, m: Measuring, label: str) -> None:
        """The phases in order until one leaves the cell not "ok"; the cell recorded."""
        try:
            self.run_phases(m, self.phases, label)
        finally:
            m.server.stop()
        self._record(m.cell)

    def run_phases(self, m: Measuring, phases: Sequence[Phase], label: str) -> bool:
        """The phases in order until one leaves the cell not "ok" (a UserError fails it); the
        ones not run leave the progress plan. Whether the cell is still ok."""
        todo = iter(phases)
        try:
            for phase in todo:
                self.progress.step(f"{label}: {phase.label}")
                phase.run(self, m)
                if m.cell.status != "ok":
                    break
        except UserError as exc:
            m.cell.status, m.cell.error = "failed", str(exc)
        self.progress.skip(sum(1 for _ in todo))
        return m.cell.status == "ok"

    # --- the phases, in PHASES order --------------------------------------------------------

    def start_server(self, m: Measuring) -> None:
        """A fresh start: the store's database server restarted, then the server, timed to the
        last zone."""
        m.loaded.restart_database()
        pin_processes(m.loaded.database_pids(), self.server_cpus)
        m.server.start()
        m.cell.startup_ms = m.server.wait_answers(m.loaded.last_zone, "SOA",
                                                  timeout=self.profile.startup_timeout_s) * 1000
        pin_processes(m.server.pids(), self.server_cpus)
        self.wait_all_zones(m.server)

    def check_answers(self, m: Measuring) -> None:
        m.cell.mismatches = self.count_mismatches(m.loaded.server, m.server)
        if m.cell.mismatches:
            m.cell.status = "wrong"
            m.cell.error = (f"{m.cell.mismatches} of {len(self.check)} answers differ from "
                            f"{self.setup.reference.name}'s (run `python3 -m bench verify` "
                            "for details)")

    def warm_up(self, m: Measuring) -> None:
        m.cell.warmup_run = self.dnsperf(m.server, self.profile.warmup_s)

    def unloaded_latency(self, m: Measuring) -> None:
        if self.prober_cannot(m, "latency_unloaded"):
            return
        m.cell.latency_unloaded = self.probe(m.server)

    def prober_cannot(self, m: Measuring, figure: str) -> bool:
        """Whether the prober cannot speak the run's transport (DoT): the figure is then
        marked unavailable, with why."""
        if self.setup.transport in prober.PROBER_TRANSPORTS:
            return False
        m.cell.unavailable[figure] = prober.NO_TLS
        return True

    def measure_qps(self, m: Measuring) -> None:
        server_cpu = accounting.CpuMeter(m.server.pids())
        db_cpu = accounting.CpuMeter(m.loaded.database_pids())
        with accounting.MemorySampler(m.loaded.database_pids()) as db_mem, server_cpu, db_cpu:
            self.qps_runs(m)
        cell = m.cell
        answered = sum(r.queries_completed for r in cell.qps_runs)
        # None, not 0: a server the suite did not start is unaccounted, not free.
        has_db = m.loaded.accounts_database
        cell.cpu_us_per_query = {
            "server": accounting.us_per_query(server_cpu.seconds, answered),
            "db": accounting.us_per_query(db_cpu.seconds, answered) if has_db else None,
            "dnsperf": self.dnsperf_cpu(cell),
        }
        cell.peak_rss_kb = {"server": accounting.peak_rss_kb(m.server.pids()),
                            "db": db_mem.peak_pss_kb if has_db else None}

    def qps_runs(self, m: Measuring) -> None:
        """The measured dnsperf runs and their median."""
        for _ in range(self.profile.runs):
            m.cell.qps_runs.append(self.dnsperf(m.server, self.profile.duration_s))
        m.cell.qps = QpsSummary.from_runs(m.cell.qps_runs)

    @staticmethod
    def dnsperf_cpu(cell: Cell) -> float | None:
        """The load generator's CPU per answered query over the QPS runs."""
        answered = sum(r.queries_completed for r in cell.qps_runs)
        return accounting.us_per_query(sum(r.cpu_s or 0.0 for r in cell.qps_runs), answered)

    def loaded_latency(self, m: Measuring) -> None:
        """Closed loop: the prober beside dnsperf keeping its queue full. The latency this
        gives is about dnsperf's outstanding queries divided by the QPS (pg, 2026-11-24: 11.2
        ms predicted, 10.7 measured), a restatement of QPS; latency at fixed offered loads is
        `capacity`'s (latency_points)."""
        if self.prober_cannot(m, "latency_loaded"):
            return
        with dnsperf.start_background(m.server.host, self.port(m.server), self.setup.query_file,
                                      **self._dnsperf_options(m.server),
                                      hosts=self.setup.load_hosts) as load:
            load.wait_sending(timeout=30)
            m.cell.latency_loaded = self.probe(m.server)
            m.cell.loaded_run = load.stop()

    def capacity_sweep(self, m: Measuring) -> None:
        """Offered-load steps around the closed-loop maximum (the QPS phase's median), each
        STEP_REPEATS times (up, then down), latency at fixed offered loads, and resperf's
        ramp; saved after every step (Ctrl-C keeps them)."""
        closed = m.cell.qps.median
        curve = capacity.Curve(m.cell.server, m.cell.threads, m.cell.connections, closed,
                               receive_buffer=self.receive_buffer_record(m.server))
        self.results.capacity.append(curve)
        if not closed:
            curve.error = "no closed-loop maximum to step around"
            return
        for repeat, percent in capacity.sweep_order(self.setup.steps, capacity.STEP_REPEATS):
            curve.steps.append(self.offered_step(m.server, percent, closed * percent / 100,
                                                 repeat=repeat))
            save_results(self.results, self.setup.out_dir)
        self.latency_points(m, curve)
        curve.resperf = resperf.ramp(
            m.server.host, self.port(m.server), self.setup.query_file,
            max_qps=closed * capacity.RESPERF_REACH, ramp_s=self.profile.resperf_ramp_s,
            clients=clients_for(self.profile, m.server.threads), cpu_list=self.load_cpus,
            hosts=self.setup.load_hosts, transport=self.setup.transport)
        save_results(self.results, self.setup.out_dir)

    def latency_points(self, m: Measuring, curve: capacity.Curve) -> None:
        """Open-loop latency at LATENCY_SHARES of the server's own 95% breaking point and at
        the common rate, each point held until the prober has the profile's probe count."""
        breaking = curve.breaking_point()
        for share in capacity.LATENCY_SHARES if breaking else ():
            curve.latency_points.append(
                capacity.LatencyPoint(share, self.latency_step(m.server, share * breaking)))
            save_results(self.results, self.setup.out_dir)
        if self.setup.common_rate:
            curve.common_rate_step = self.latency_step(m.server, self.setup.common_rate)

    def latency_step(self, server: DnsServer, target: float) -> capacity.Step:
        seconds = capacity.latency_point_seconds(target, self.profile.probes,
                                                 self.profile.step_s)
        return self.offered_step(server, None, target, seconds=seconds,
                                 probe_share=capacity.LATENCY_PROBE_SHARE)

    @staticmethod
    def receive_buffer_record(server: DnsServer) -> dict:
        """The server's receive-buffer setting, the buffer its sockets got (as the kernel
        holds it: twice what SO_RCVBUF was given), and the load generator's (dnsperf -b)."""
        record = server.receive_buffer.record()
        ss = subprocess.run(["ss", "-uanme"], capture_output=True, text=True, check=False)
        got = capacity.socket_receive_buffers(
            ss.stdout, capacity.process_socket_inodes(server.pids()))
        record["socket_rcvbuf"] = sorted(set(got))
        record["load_generator_bytes"] = capacity.load_generator_buffer()
        return record

    def offered_step(self, server: DnsServer, percent: float | None, target: float, *,
                     repeat: int = 0, seconds: float | None = None,
                     probe_share: float = capacity.PROBE_SHARE) -> capacity.Step:
        """dnsperf held at `target` queries per second for one step (the profile's step time
        unless `seconds`), the prober measuring latency beside it, open loop (one socket
        per probe, so every worker is sampled); the datagrams dropped, per socket."""
        time.sleep(1.0)  # a backlog left by an overloaded step drains first
        seconds = seconds or self.profile.step_s
        probing = capacity.probe_rate(target, probe_share)
        server_sockets = capacity.process_socket_inodes(server.pids())
        sockets_before = capacity.read_udp_socket_drops()
        drops_before = accounting.udp_receive_buffer_errors()
        with dnsperf.start_background(
                server.host, self.port(server), self.setup.query_file, duration=seconds,
                clients=clients_for(self.profile, server.threads),
                queue_depth=capacity.outstanding_for(target), timeout=capacity.STEP_TIMEOUT_S,
                cpu_list=self.load_cpus, rate=target - probing, hosts=self.setup.load_hosts,
                extra=[*capacity.offered_load_options(),
                       *dnsperf.transport_args(self.setup.transport)]) as load, \
                capacity.SocketWatch(load.pid) as watch:
            probes = prober.probe(server.host, server.port, self.setup.query_file,
                                  capacity.MAX_PROBES, timeout=capacity.STEP_TIMEOUT_S,
                                  cpu_list=self.load_cpus, seconds=seconds,
                                  interval=1 / probing, open_loop=True,
                                  host=self.prober_host, transport=self.setup.transport)
            run = load.wait(seconds + capacity.STEP_TIMEOUT_S + 30)
        drops_after = accounting.udp_receive_buffer_errors()
        sockets_after = {**capacity.read_udp_socket_drops(), **watch.last}
        drops = (None if drops_before is None or drops_after is None
                 else drops_after - drops_before)
        per_socket = capacity.attribute_drops(sockets_before, sockets_after, server_sockets,
                                              watch.inodes, drops)
        return capacity.step_from_run(percent, target, run, probes, capacity.STEP_TIMEOUT_S,
                                      drops, per_socket, repeat, duration_s=seconds)

    def flood(self, m: Measuring) -> None:
        """The normal traffic held at FLOOD_NORMAL_SHARE of the cell's closed-loop maximum
        for one step, then again with a random-subdomain flood beside it from a second
        dnsperf at the run's flood rate (docs/method/mixes.md)."""
        closed = m.cell.qps.median
        if not closed or self.setup.flood_file is None or not self.setup.flood_rate:
            m.cell.unavailable["flood"] = "no closed-loop maximum to set the normal rate by"
            return
        normal = closed * FLOOD_NORMAL_SHARE
        without = self.offered_step(m.server, None, normal)
        seconds = self.profile.step_s
        rate = self.setup.flood_rate
        with dnsperf.start_background(
                m.server.host, self.port(m.server), self.setup.flood_file,
                duration=seconds + FLOOD_MARGIN_S, clients=clients_for(self.profile,
                                                                       m.server.threads),
                queue_depth=capacity.outstanding_for(rate), timeout=capacity.STEP_TIMEOUT_S,
                cpu_list=self.load_cpus, rate=rate, hosts=self.setup.load_hosts,
                extra=dnsperf.transport_args(self.setup.transport)) as flood:
            flooded = self.offered_step(m.server, None, normal)
            flood_run = flood.stop()
        m.cell.flood = flood_record(rate, normal, without, flooded, flood_run)

    # --- a server the suite did not start (--target) ----------------------------------------

    def reach_target(self, m: Measuring) -> None:
        """In place of startup: the target serves every zone of the data set (an
        authoritative SOA answer each), and the figures it cannot give are marked so."""
        m.cell.unavailable = dict(NOT_STARTED_HERE)
        target = cast(ExternalServer, m.server)
        for zone in sorted(self.facts.origins - {dns.name.root}):
            target.check_serves(zone)

    def check_target_answers(self, m: Measuring) -> None:
        """The target's answers against the reference's over the same data set (collected
        before any cell): it must serve the data set the queries are made from. A server the
        suite did not start has no known classes of difference: every one counts."""
        m.cell.mismatches = self.wrong_answers(m.server, ())
        if m.cell.mismatches:
            m.cell.status = "wrong"
            m.cell.error = (f"{m.cell.mismatches} of {len(self.check)} answers differ from "
                            f"{self.setup.reference.name}'s over the data set: does the "
                            "target serve that data (--zones, --named-conf, --generate and "
                            "--seed as it was made)?")

    def measure_target_qps(self, m: Measuring) -> None:
        """measure_qps without the server's and its database's CPU and memory: their
        processes are not the suite's (only the load generator's own CPU is)."""
        self.qps_runs(m)
        m.cell.cpu_us_per_query = {"server": None, "db": None,
                                   "dnsperf": self.dnsperf_cpu(m.cell)}
        m.cell.peak_rss_kb = {"server": None, "db": None}

    def update_visibility(self, m: Measuring) -> None:
        """The profile's updates, each timed until the server answers it; the median of those
        seen (an update not seen within the time-out is said in the cell's error)."""
        if self.profile.update_repeats == 0:
            m.cell.unavailable["update_visibility_ms"] = "not measured (--update-repeats 0)"
            return
        timed: list[float | None] = []
        try:
            for _ in range(self.profile.update_repeats):
                timed.append(self.time_update(m.loaded, m.server))
        except UserError as exc:  # a store mode that cannot take writes while the server reads
            m.cell.error = f"update visibility: {exc}"
            return
        m.cell.update_visibility_runs_ms = [t for t in timed if t is not None]
        interval = stats.median_interval(m.cell.update_visibility_runs_ms)
        m.cell.update_visibility_ms = interval.estimate if interval is not None else None
        unseen = timed.count(None)
        if unseen:
            m.cell.error = (f"update visibility: {unseen} of {len(timed)} updates not "
                            f"answered within {UPDATE_TIMEOUT_S:g} s")

    # --- tools of the phases ----------------------------------------------------------------

    def _dnsperf_options(self, server: DnsServer) -> dict:
        return {"clients": clients_for(self.profile, server.threads),
                "queue_depth": self.profile.queue_depth, "cpu_list": self.load_cpus,
                "extra": (*(dnsperf.DNSSEC_OK if self.setup.dnssec else ()),
                          *dnsperf.transport_args(self.setup.transport))}

    def port(self, server: DnsServer) -> int:
        """Where the run's transport reaches the server: its TLS port over DoT."""
        if self.setup.transport == "dot" and server.tls_port is not None:
            return server.tls_port
        return server.port

    def dnsperf(self, server: DnsServer, seconds: float,
                extra: Sequence[str] = ()) -> dnsperf.DnsperfRun:
        """One dnsperf run at the server's maximum (`extra`: options added to the run's)."""
        options = self._dnsperf_options(server)
        options["extra"] = (*options["extra"], *extra)
        return dnsperf.run_dnsperf(server.host, self.port(server), self.setup.query_file,
                                   duration=seconds, **options, hosts=self.setup.load_hosts)

    @property
    def prober_host(self) -> LoadHost | None:
        """Where the prober runs: the first load host, or here."""
        return self.setup.load_hosts[0] if self.setup.load_hosts else None

    def probe(self, server: DnsServer) -> prober.LatencyStats:
        return prober.probe(server.host, server.port, self.setup.query_file,
                            self.profile.probes, cpu_list=self.load_cpus,
                            dnssec=self.setup.dnssec, host=self.prober_host,
                            transport=self.setup.transport)

    def ask(self, server: DnsServer, query: Query) -> tuple[Answer, Answer | None]:
        """One check query over the run's transport, with its DO bit."""
        return ask(server, query, self.setup.dnssec, self.setup.transport)

    def wait_all_zones(self, server: DnsServer) -> None:
        """Every zone answers before anything is checked or timed.

        Startup is timed to the last zone of the data set, but native BIND with several
        threads loads zones in parallel: the last one may answer before others are loaded.
        """
        for zone in sorted(self.facts.origins - {dns.name.root}):
            server.wait_answers(zone.to_text(), "SOA", timeout=self.profile.startup_timeout_s)

    def count_mismatches(self, kind: ServerKind, server: DnsServer) -> int:
        """Answers that differ from the reference server's beyond the server's known classes
        (a DLZ driver's: BIND's own DLZ-path classes)."""
        if kind == self.setup.reference:
            self.reference = {q: self.ask(server, q) for q in self.check}
            return 0
        return self.wrong_answers(server, kind.known_classes())

    def wrong_answers(self, server: DnsServer, answer_classes: Sequence[str]) -> int:
        """Check queries whose answers differ from the reference's beyond answer_classes."""
        wrong = 0
        for query in self.check:
            diff = compare_answers(query, self.reference[query], self.ask(server, query))
            if diff is not None and classify(query, *diff, self.facts,
                                             answer_classes) == UNEXPLAINED:
                wrong += 1
        return wrong

    def time_update(self, loaded: LoadedStore, server: DnsServer) -> float | None:
        """ms from the store's update until the server answers the new record."""
        zone = next(iter(self.setup.stream()))
        marker = dns.name.Name((b"dlzbench-update",) + zone.origin.labels)
        value = f'"{time.time_ns()}"'
        changed = dataclasses.replace(zone, records=[*zone.records,
                                                     make_record(marker, 60, "TXT", value)])
        start = time.monotonic()
        loaded.loader.update(changed, loaded.target)
        if loaded.server.needs_reload:
            server.reload()
        seen = wait_for_txt(server, marker, value, timeout=UPDATE_TIMEOUT_S)
        elapsed = (time.monotonic() - start) * 1000
        loaded.loader.update(zone, loaded.target)  # back to the data set every cell measures
        if loaded.server.needs_reload:
            server.reload()
        return elapsed if seen else None


# The phases of a cell, each by name: every command picks its own by name (never by
# position in PHASES). Expected seconds drive the progress estimate only; a few seconds of
# set-up are the measured order of each fixed step.
STARTUP = Phase("startup", lambda p: 2.0, Runner.start_server)
CHECK_ANSWERS = Phase("checking answers against the reference",
                      lambda p: 1.0 + p.check_queries * 0.002, Runner.check_answers)
WARM_UP = Phase("warm-up", lambda p: p.warmup_s, Runner.warm_up)
UNLOADED_LATENCY = Phase("unloaded latency", lambda p: p.probes * 0.0005,
                         Runner.unloaded_latency)
MEASURE_QPS = Phase("QPS", lambda p: p.runs * p.duration_s, Runner.measure_qps)
LOADED_LATENCY = Phase("loaded latency", lambda p: 2.0 + p.probes * 0.002,
                       Runner.loaded_latency)
UPDATE_VISIBILITY = Phase("update visibility", lambda p: 0.3 * p.update_repeats,
                          Runner.update_visibility)
# `run`'s method of one cell, in order (docs/method/run.md).
PHASES: tuple[Phase, ...] = (STARTUP, CHECK_ANSWERS, WARM_UP, UNLOADED_LATENCY, MEASURE_QPS,
                             LOADED_LATENCY, UPDATE_VISIBILITY)

# The flood phase: the normal traffic's offered rate, as a share of the cell's closed-loop
# maximum (half: a load the server carries with room to spare, so what changes under the flood
# is the flood's doing), and how long the flood's dnsperf may run past the normal step (its
# 1 s pause before the step, and its start).
FLOOD_NORMAL_SHARE = 0.5
FLOOD_MARGIN_S = 30.0
FLOOD = Phase("random-subdomain flood", lambda p: 2 * (p.step_s + 2.5), Runner.flood)


def flood_record(rate: float, normal: float, without: capacity.Step, flooded: capacity.Step,
                 flood_run: dnsperf.DnsperfRun) -> dict:
    """What results.json keeps of the flood phase: each traffic class on its own. The normal
    traffic's loss and p99 without and with the flood; the flood's answered share over its
    whole run (which starts about a second before the normal step and ends with it)."""
    sent = flood_run.queries_sent
    return {"flood_rate_qps": rate, "normal_target_qps": normal,
            "without_flood": to_json(without), "with_flood": to_json(flooded),
            "flood_run": {**to_json(flood_run), "stdout": ""},
            "flood_offered_qps": sent / flood_run.run_time_s if flood_run.run_time_s else None,
            "flood_answered_share": flood_run.queries_completed / sent if sent else None}


CAPACITY_SWEEP = Phase("capacity sweep", lambda p: len(capacity.DEFAULT_STEPS)
                       * capacity.STEP_REPEATS * (p.step_s + 1.5)
                       + (len(capacity.LATENCY_SHARES) + 1) * (p.step_s + 3)
                       + p.resperf_ramp_s + 2, Runner.capacity_sweep)
# `capacity`: a fresh server checked and warmed up, its closed-loop maximum, then the sweep.
CAPACITY_PHASES: tuple[Phase, ...] = (STARTUP, CHECK_ANSWERS, WARM_UP, MEASURE_QPS,
                                      CAPACITY_SWEEP)


# What a --target cell cannot measure, and why: results.json and the report say so instead of
# showing a zero or leaving the figure out unexplained.
NOT_STARTED_HERE: dict[str, str] = {
    "startup_ms": "the suite did not start the server (--target)",
    "update_visibility_ms": "the suite loaded no store the server reads (--target)",
    "cpu_us_per_query.server": "the server's processes are not the suite's to account "
                              "(--target)",
    "cpu_us_per_query.db": "its database, if any, is not the suite's to account (--target)",
    "peak_rss_kb.server": "the server's processes are not the suite's to account (--target)",
    "peak_rss_kb.db": "its database, if any, is not the suite's to account (--target)",
}

REACH_TARGET = Phase("checking the target serves every zone", lambda p: 1.0,
                     Runner.reach_target)
CHECK_TARGET_ANSWERS = Phase("checking answers against the reference's",
                             lambda p: 1.0 + p.check_queries * 0.002, Runner.check_target_answers)


def for_target(phases: Sequence[Phase]) -> tuple[Phase, ...]:
    """The phases over a server the suite did not start: its startup replaced by a check that
    it serves every zone, its answers checked against the reference's collected beforehand,
    QPS without its CPU and memory, and no update visibility (the suite wrote no store it
    reads)."""
    swap = {STARTUP: REACH_TARGET, CHECK_ANSWERS: CHECK_TARGET_ANSWERS,
            MEASURE_QPS: dataclasses.replace(MEASURE_QPS, run=Runner.measure_target_qps)}
    return tuple(swap.get(p, p) for p in phases if p is not UPDATE_VISIBILITY)


def inserted_after(phases: Sequence[Phase], before: Phase, phase: Phase) -> tuple[Phase, ...]:
    """phases with `phase` right after `before` (which must be among them)."""
    at = list(phases).index(before) + 1
    return (*phases[:at], phase, *phases[at:])


def phases_of(profile: Profile) -> tuple[Phase, ...]:
    """`run`'s phases; a profile with capacity sweeps after the loaded latency."""
    if not profile.capacity:
        return PHASES
    return inserted_after(PHASES, LOADED_LATENCY, CAPACITY_SWEEP)


def wait_for_txt(server: DnsServer, name: dns.name.Name, value: str, timeout: float) -> bool:
    """Whether `server` answers `name` TXT with `value` before `timeout` seconds pass (a store
    update reaching the server: the runner's update visibility, and the tests')."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            answer = server.query(name, "TXT", timeout=1)
            if any(rd.to_text() == value for rrset in answer.answer for rd in rrset):
                return True
        except (dns.exception.DNSException, OSError):  # a reload may drop a query
            pass
        time.sleep(0.001)
    return False
