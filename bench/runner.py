"""The benchmark runner: every figure of seed 003's table, per driver and thread count.

For each driver the data set is loaded once; for each thread count the store's server is
restarted and named started afresh, then: startup time, a check of the answers against native
BIND, a discarded warm-up run, unloaded latency, R dnsperf runs, loaded latency, update
visibility, and CPU/memory cost. Every figure is measured here; drivers never time themselves.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.exception
import dns.name

from base.errors import UserError
from bench import accounting, dnsperf, prober
from bench.results import Cell, QpsSummary, Results, save_results
from bench.serving import LoadedStore, loaded_store
from bench.verify import Answer, Query, ZoneFacts, ask, classify, compare_answers
from servers.named import Named
from zonedata.model import Zone, make_record
from zonedata.queries import read_query_file


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
    clients: int = 4
    queue_depth: int = 100


PROFILES = {
    "tiny": Profile("tiny", zones=20, records=10, queries=500, warmup_s=0.5, duration_s=1.0,
                    runs=2, probes=100, check_queries=50, threads=(1,)),
    "quick": Profile("quick", zones=1000, records=10, queries=20000, warmup_s=2.0,
                     duration_s=4.0, runs=3, probes=1000, check_queries=200),
    "full": Profile("full", zones=10000, records=10, queries=100000, warmup_s=600.0,
                    duration_s=60.0, runs=3, probes=10000, check_queries=2000),
}


@dataclass
class Setup:
    """Everything one run needs besides the profile."""

    drivers: list[str]
    stream: Callable[[], Iterator[Zone]]
    dataset: str
    query_file: Path
    run_dir: Path
    out_dir: Path
    threads: tuple[int, ...]
    connections: int | None
    pin: bool


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
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                os.sched_setaffinity(int(task.name), cpus)
            except (ProcessLookupError, PermissionError):
                pass


class Progress:
    """One line per step on stderr: what runs, how far, roughly how long is left."""

    def __init__(self, cells: int, seconds_per_cell: float) -> None:
        self.cells = cells
        self.done = 0
        self.per_cell = seconds_per_cell
        self.start = time.monotonic()

    def step(self, cell: str, what: str) -> None:
        elapsed = time.monotonic() - self.start
        per_cell = elapsed / self.done if self.done else self.per_cell
        left = per_cell * (self.cells - self.done)
        print(f"[{self.done + 1}/{self.cells}] {cell}: {what} (about {left / 60:.0f} min left)",
              file=sys.stderr, flush=True)


class Runner:
    def __init__(self, profile: Profile, setup: Setup, results: Results) -> None:
        self.profile = profile
        self.setup = setup
        self.results = results
        self.server_cpus, self.load_cpus = cpu_split(setup.pin)
        self.queries = [(dns.name.from_text(n), t)
                        for n, t in read_query_file(setup.query_file)]
        self.check = self.queries[:profile.check_queries]
        self.reference: dict[Query, tuple[Answer, Answer | None]] = {}
        self.facts = ZoneFacts.of(setup.stream())
        per_cell = (profile.warmup_s + profile.runs * profile.duration_s + 2 * profile.duration_s
                    + 5)
        self.progress = Progress(len(setup.drivers) * len(setup.threads), per_cell)

    def run(self) -> Results:
        self.results.prober_floor = prober.measure_floor(self.profile.probes,
                                                          cpu_list=self.load_cpus)
        for driver in self.setup.drivers:
            self.run_driver(driver)
        return self.results

    def run_driver(self, driver: str) -> None:
        try:
            with loaded_store(driver, self.setup.stream, self.setup.run_dir) as loaded:
                for threads in self.setup.threads:
                    self.run_cell(loaded, threads)
        except UserError as exc:  # the store itself would not start or load
            for threads in self.setup.threads:
                if self.results.cell(driver, threads) is None:
                    self._record(Cell(driver, threads, self._connections(threads),
                                      status="failed", error=str(exc)))

    def _connections(self, threads: int) -> int:
        return self.setup.connections or threads

    def _record(self, cell: Cell) -> None:
        self.results.cells.append(cell)
        self.progress.done += 1
        save_results(self.results, self.setup.out_dir)

    def run_cell(self, loaded: LoadedStore, threads: int) -> None:
        cell = Cell(loaded.driver, threads, self._connections(threads))
        label = f"{loaded.driver} threads={threads}"
        named = loaded.named(self.setup.run_dir, threads=threads, connections=cell.connections)
        try:
            loaded.store.restart_server(loaded.target)
            pin_processes(loaded.server_pids(), self.server_cpus)
            self.progress.step(label, "startup")
            named.start()
            cell.startup_ms = named.wait_answers(loaded.last_zone, "SOA") * 1000
            pin_processes(named.pids(), self.server_cpus)
            self.measure(loaded, named, cell, label)
        except UserError as exc:
            cell.status, cell.error = "failed", str(exc)
        finally:
            named.stop()
        self._record(cell)

    def measure(self, loaded: LoadedStore, named: Named, cell: Cell, label: str) -> None:
        self.progress.step(label, "checking answers against native BIND")
        self.wait_all_zones(named)
        cell.mismatches = self.count_mismatches(loaded.driver, named)
        if cell.mismatches:
            cell.status = "wrong"
            cell.error = (f"{cell.mismatches} of {len(self.check)} answers differ from "
                          "native BIND (run `python3 -m bench verify` for details)")
            return
        self.progress.step(label, "warm-up")
        cell.warmup_run = self.dnsperf(named, self.profile.warmup_s)
        self.progress.step(label, "unloaded latency")
        cell.latency_unloaded = self.probe(named)
        self.measure_qps(loaded, named, cell, label)
        self.progress.step(label, "loaded latency")
        with dnsperf.start_background("127.0.0.1", named.port, self.setup.query_file,
                                      **self._dnsperf_options()) as load:
            load.wait_sending(timeout=30)
            cell.latency_loaded = self.probe(named)
            cell.loaded_run = load.stop()
        self.progress.step(label, "update visibility")
        try:
            cell.update_visibility_ms = self.update_visibility(loaded, named)
        except UserError as exc:  # a store mode that cannot take writes while named reads
            cell.error = f"update visibility: {exc}"

    def measure_qps(self, loaded: LoadedStore, named: Named, cell: Cell, label: str) -> None:
        named_cpu = accounting.CpuMeter(named.pids())
        db_cpu = accounting.CpuMeter(loaded.server_pids())
        with accounting.MemorySampler(loaded.server_pids()) as db_mem, named_cpu, db_cpu:
            for i in range(self.profile.runs):
                self.progress.step(label, f"QPS run {i + 1}/{self.profile.runs}")
                cell.qps_runs.append(self.dnsperf(named, self.profile.duration_s))
        cell.qps = QpsSummary.from_runs(cell.qps_runs)
        answered = sum(r.queries_completed for r in cell.qps_runs)
        has_db = bool(loaded.server_pids())
        cell.cpu_us_per_query = {
            "named": accounting.us_per_query(named_cpu.seconds, answered),
            "db": accounting.us_per_query(db_cpu.seconds, answered) if has_db else None,
            "dnsperf": accounting.us_per_query(sum(r.cpu_s or 0.0 for r in cell.qps_runs),
                                               answered),
        }
        cell.peak_rss_kb = {"named": accounting.peak_rss_kb(named.pids()),
                            "db": db_mem.peak_pss_kb if has_db else None}

    def _dnsperf_options(self) -> dict:
        return {"clients": self.profile.clients, "queue_depth": self.profile.queue_depth,
                "cpu_list": self.load_cpus}

    def dnsperf(self, named: Named, seconds: float) -> dnsperf.DnsperfRun:
        return dnsperf.run_dnsperf("127.0.0.1", named.port, self.setup.query_file,
                                   duration=seconds, **self._dnsperf_options())

    def probe(self, named: Named) -> prober.LatencyStats:
        return prober.probe("127.0.0.1", named.port, self.setup.query_file,
                            self.profile.probes, cpu_list=self.load_cpus)

    def wait_all_zones(self, named: Named) -> None:
        """Every zone answers before anything is checked or timed.

        Startup is timed to the last zone of the data set, but native BIND with several
        threads loads zones in parallel: the last one may answer before others are loaded.
        """
        for zone in sorted(self.facts.origins - {dns.name.root}):
            named.wait_answers(zone.to_text(), "SOA", timeout=600)

    def count_mismatches(self, driver: str, named: Named) -> int:
        """Answers that differ from native BIND's beyond BIND's own DLZ-path classes."""
        if not self.reference:  # the first driver is native: its answers are the reference
            self.reference = {q: ask(named, q) for q in self.check}
            return 0
        wrong = 0
        for query in self.check:
            diff = compare_answers(query, self.reference[query], ask(named, query))
            if diff is not None and classify(query, *diff, self.facts) == "driver":
                wrong += 1
        return wrong

    def update_visibility(self, loaded: LoadedStore, named: Named) -> float | None:
        """ms from the store's update until named answers the new record."""
        zone = next(iter(self.setup.stream()))
        marker = dns.name.Name((b"dlzbench-update",) + zone.origin.labels)
        value = f'"{time.time_ns()}"'
        changed = dataclasses.replace(zone, records=[*zone.records,
                                                     make_record(marker, 60, "TXT", value)])
        start = time.monotonic()
        loaded.store.update(changed, loaded.target)
        if loaded.store.update_needs_reload(loaded.variant):
            named.reload()
        seen = _wait_for_txt(named, marker, value, timeout=30)
        elapsed = (time.monotonic() - start) * 1000
        loaded.store.update(zone, loaded.target)  # back to the data set every cell measures
        if loaded.store.update_needs_reload(loaded.variant):
            named.reload()
        return elapsed if seen else None


def _wait_for_txt(named: Named, name: dns.name.Name, value: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            answer = named.query(name, "TXT", timeout=1)
            if any(rd.to_text() == value for rrset in answer.answer for rd in rrset):
                return True
        except (dns.exception.DNSException, OSError):  # a reload may drop a query
            pass
        time.sleep(0.001)
    return False
