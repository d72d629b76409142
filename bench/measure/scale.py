"""`scale`: QPS and latency against data size, under a uniform and a popular query mix.

For each data set (a zone count at --records records per zone, or a --shapes pair: few large
zones against many small ones with the same records), the query file of every mix is written in
one pass over the generated zones (zonedata/mixes.py), then each store is loaded once, in a
child process as `startup` loads it (bench/measure/startup.py: flat memory, its peak RSS
recorded), and serves every server of that store. Each (server, mix) is a runner cell with the
phases below: the store's database server restarted (its cache cold), the server started and
timed to the last zone, a warm-up, unloaded latency, the QPS runs with the CPU and RSS of the
server and the database and the database's own cache figures around them
(Database.cache_reading), and latency under load.

Answers are not compared with native BIND's here (at a million zones native may not fit, and
`run`/`verify` check every server's answers): instead the rcodes of the QPS runs must be what
the query file asks for (NOERROR or NXDOMAIN, the NXDOMAIN share near the file's), so a server
that answers fast with SERVFAIL or NXDOMAIN is WRONG, not fast.

A server that holds the whole data set in its own memory (ServerKind.kib_per_record: native
BIND, the memory driver, ...) is not started on a data set it would not fit in this machine's
available memory: its cells are recorded as not measured, with the reason.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from base.errors import UserError
from bench.load import prober
from bench.measure import metadata
from bench.measure.cells import Cell
from bench.measure.loading import LoadStats
from bench.measure.progress import StepProgress
from bench.measure.results import Results, save_results
from bench.measure.runner import (
    LOADED_LATENCY,
    MEASURE_QPS,
    UNLOADED_LATENCY,
    WARM_UP,
    Measuring,
    Phase,
    Profile,
    Runner,
    Setup,
    pin_processes,
)
from bench.measure.scale_cells import SizeCell
from bench.measure.serving import LoadedStore
from bench.measure.startup import by_store, disk_usage, load_in_child
from loaders.loader import Loader
from servers import ServerKind
from zonedata.generator import generate, zone_name
from zonedata.mixes import MixPlan, MixWriter, plan_mix
from zonedata.model import Zone, name_key
from zonedata.queries import DEFAULT_QUERY_MIX

DEFAULT_ZONE_COUNTS = (1000, 10000, 100000, 1000000)
# Answers other than NOERROR and NXDOMAIN above this share of a cell's, or an NXDOMAIN share
# this far from the query file's, make the cell WRONG.
NXDOMAIN_TOLERANCE = 0.05
# Of the memory the kernel reports available, the share a data-bound server may be expected
# to take (the database servers, dnsperf and the page cache need the rest).
MEMORY_HEADROOM = 0.8


@dataclass(frozen=True)
class DataSet:
    """One data set of `scale`: generated zones of about `records` records each."""

    zones: int
    records: int
    shape: bool = False   # asked for by --shapes (it may be a point of the curve too)

    @property
    def name(self) -> str:
        return f"{self.zones}x{self.records}"

    @property
    def last_zone(self) -> str:
        return name_key(zone_name(self.zones - 1))

    def stream(self, seed: int) -> Callable[[], Iterator[Zone]]:
        return lambda: generate(self.zones, self.records, seed)


def parse_shapes(text: str) -> list[DataSet]:
    """'10x100000,100000x10' -> data sets of ZONES x RECORDS per zone, both at least 1."""
    shapes = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        zones, sep, records = part.lower().partition("x")
        try:
            pair = (int(zones), int(records)) if sep else None
        except ValueError:
            pair = None
        if pair is None:
            raise UserError(f"--shapes: {part!r} is not ZONESxRECORDS (e.g. 10x100000)")
        if min(pair) < 1:
            raise UserError(f"--shapes: {part!r} needs at least 1 zone and 1 record per zone")
        shapes.append(DataSet(*pair, shape=True))
    if not shapes:
        raise UserError(f"--shapes {text!r}: no ZONESxRECORDS pair given")
    return shapes


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What `scale` measures besides the runner's Setup."""

    datasets: tuple[DataSet, ...]
    servers: tuple[str, ...]
    mixes: tuple[str, ...]
    exponent: float
    queries: int | None     # lines per query file; None: the profile's, and at least one a zone
    threads: int
    seed: int
    # The query kinds' shares (queries.traffic_mix: --nxdomain-share, --unknown-zone-share).
    kinds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_QUERY_MIX))


def query_count(plan: Plan, profile: Profile, dataset: DataSet) -> int:
    """Lines of each query file: with at least one per zone the uniform mix asks for every
    zone, so its working set is the whole store."""
    return plan.queries or max(profile.queries, dataset.zones)


def write_query_files(plan: Plan, profile: Profile, dataset: DataSet,
                      directory: Path) -> dict[str, Path]:
    """One query file per mix over the data set, all written in one pass over its zones."""
    directory.mkdir(parents=True, exist_ok=True)
    count = query_count(plan, profile, dataset)
    plans: dict[Path, MixPlan] = {
        directory / f"queries-{mix}.txt": plan_mix(mix, dataset.zones, count,
                                                   exponent=plan.exponent, seed=plan.seed,
                                                   kinds=plan.kinds)
        for mix in plan.mixes}
    writer = MixWriter(plans, plan.seed)
    for _ in writer.watch(dataset.stream(plan.seed)()):
        pass
    writer.write()
    return {mix: path for mix, path in zip(plan.mixes, plans, strict=True)}


def available_memory_kib() -> int:
    """MemAvailable: what the kernel can give without swapping."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise UserError("no MemAvailable in /proc/meminfo")


def too_big(server: ServerKind, dataset: DataSet, available_kib: int) -> str | None:
    """Why the server is not started on the data set (it would not fit), or None."""
    needed = server.memory_needed_kib(dataset.zones * dataset.records)
    if needed is None or needed <= available_kib * MEMORY_HEADROOM:
        return None
    return (f"the server would need about {needed / 1048576:.1f} GiB for "
            f"{dataset.zones:,} zones x {dataset.records} records, more than "
            f"{MEMORY_HEADROOM:.0%} of the {available_kib / 1048576:.1f} GiB available")


class ScaleRunner(Runner):
    """The runner over several data sets, each store loaded once per data set, every server of
    it measured under every query mix."""

    def __init__(self, profile: Profile, setup: Setup, results: Results, plan: Plan) -> None:
        super().__init__(profile, setup, results, phases=SCALE_PHASES)
        self.plan = plan
        per_cell = [phase.expected_s(profile) for phase in self.phases]
        cells = len(plan.datasets) * len(plan.servers) * len(plan.mixes)
        self.progress = StepProgress(per_cell * cells)
        # The cell being measured: its data set and store figures; its cache figures once
        # the QPS phase has read them.
        self.pending: SizeCell | None = None
        self.cache: dict | None = None

    def run(self) -> Results:
        print(f"expected duration (without loads): about "
              f"{self.progress.seconds_left() / 60:.0f} min", flush=True)
        self.results.prober_floor = prober.measure_floor(self.profile.probes,
                                                          cpu_list=self.load_cpus)
        for dataset in self.plan.datasets:
            self.measure_dataset(dataset)
        return self.results

    def measure_dataset(self, dataset: DataSet) -> None:
        data = self.setup.run_dir / dataset.name
        print(f"{dataset.name}: writing the query files", flush=True)
        files = write_query_files(self.plan, self.profile, dataset, data)
        for store, servers in by_store(list(self.plan.servers)):
            self.measure_store(dataset, store, servers, files, data)
        for path in files.values():
            path.unlink(missing_ok=True)

    def measure_store(self, dataset: DataSet, store: Loader[Any], servers: list[ServerKind],
                      files: dict[str, Path], data: Path) -> None:
        available = available_memory_kib()
        fitting = []
        for server in servers:
            reason = too_big(server, dataset, available)
            if reason is None:
                fitting.append(server)
            else:
                self.record_all(dataset, server, not_measured=reason)
        if not fitting:
            return
        print(f"{dataset.name}: loading {store.name}", flush=True)
        try:
            figures = load_in_child(store, dataset.zones, dataset.records, self.plan.seed, data,
                                    self.setup.run_dir / "load.log")
        except UserError as exc:
            for server in fitting:
                self.record_all(dataset, server, error=str(exc).splitlines()[0])
            return
        try:
            with store.database.server(data / store.name) as target:
                template = SizeCell(dataset.zones, dataset.records, "", Cell("", 0, 0),
                                    shape=dataset.shape, store_bytes=disk_usage(data / store.name),
                                    load_seconds=figures["seconds"],
                                    records_per_second=figures["records_per_second"],
                                    loader_rss_kb=figures["peak_rss_kb"])
                stats = LoadStats(store.name, figures["zones"], figures["records"],
                                  figures["seconds"], dataset.last_zone)
                for server in fitting:
                    loaded = LoadedStore(server, store, target, stats)
                    for mix, path in files.items():
                        self.pending = dataclasses.replace(template, mix=mix)
                        self.setup = dataclasses.replace(self.setup, query_file=path)
                        self.run_cell(loaded, self.plan.threads)
        finally:
            shutil.rmtree(data / store.name, ignore_errors=True)  # a million zones take room

    def record_all(self, dataset: DataSet, server: ServerKind, *, error: str | None = None,
                   not_measured: str | None = None) -> None:
        """Every mix's cell of a server that was not measured on this data set."""
        for mix in self.plan.mixes:
            self.progress.skip(len(self.phases))
            cell = Cell(server.name, self.plan.threads, self.plan.threads, status="failed",
                        error=error or not_measured)
            self.add(SizeCell(dataset.zones, dataset.records, mix, cell, shape=dataset.shape,
                              not_measured=not_measured))

    def add(self, point: SizeCell) -> None:
        self.results.scale = [p for p in self.results.scale if p.key != point.key]
        self.results.scale.append(point)
        save_results(self.results, self.setup.out_dir)

    def _record(self, cell: Cell) -> None:
        """run_cell's end: the cell with its data set, store and cache figures, saved."""
        assert self.pending is not None
        self.add(dataclasses.replace(self.pending, cell=cell, cache=self.cache))
        self.pending, self.cache = None, None

    # --- the phases that differ from `run`'s --------------------------------------------------

    def start_cold(self, m: Measuring) -> None:
        """The store's database server restarted (a cold cache), the server timed to the last
        zone, then until it has loaded every zone (native BIND loads zones in parallel)."""
        m.loaded.restart_database()
        pin_processes(m.loaded.database_pids(), self.server_cpus)
        m.server.start()
        m.cell.startup_ms = m.server.wait_answers(m.loaded.last_zone, "SOA",
                                                  timeout=self.profile.startup_timeout_s) * 1000
        m.server.wait_running(self.profile.startup_timeout_s)
        pin_processes(m.server.pids(), self.server_cpus)

    def measure_qps_and_cache(self, m: Measuring) -> None:
        """`run`'s QPS phase with the database's cache read before and after it."""
        before = m.loaded.server.cache_reading(m.loaded.target)
        self.measure_qps(m)
        after = m.loaded.server.cache_reading(m.loaded.target)
        self.cache = after.since(before) if after is not None else None
        check_rcodes(m.cell, self.plan.kinds, self.results.loss_threshold)


def check_rcodes(cell: Cell, kinds: Mapping[str, float], threshold: float) -> None:
    """WRONG if the QPS runs' answers are not the query file's: other rcodes than NOERROR,
    NXDOMAIN and (for names under no zone) REFUSED above threshold, or an NXDOMAIN share far
    from the file's."""
    nxdomain_share = kinds.get("nxdomain", 0.0)
    refused_share = kinds.get("unknown", 0.0)
    totals: dict[str, int] = {}
    for run in cell.qps_runs:
        for rcode, count in run.rcodes.items():
            totals[rcode] = totals.get(rcode, 0) + count
    answered = sum(totals.values())
    if not answered:
        return
    refused = min(totals.get("REFUSED", 0), round(answered * (refused_share + threshold)))
    other = answered - totals.get("NOERROR", 0) - totals.get("NXDOMAIN", 0) - refused
    nxdomain = totals.get("NXDOMAIN", 0) / answered
    if other / answered > threshold:
        shares = ", ".join(f"{r} {100 * n / answered:.1f}%" for r, n in sorted(totals.items()))
        cell.status, cell.error = "wrong", f"answers other than NOERROR/NXDOMAIN: {shares}"
    elif abs(nxdomain - nxdomain_share) > NXDOMAIN_TOLERANCE:
        cell.status = "wrong"
        cell.error = (f"{100 * nxdomain:.1f}% of answers were NXDOMAIN, the query file asks "
                      f"for {100 * nxdomain_share:.1f}%")


# `run`'s method without the answer check against native BIND (check_rcodes instead) and
# without update visibility (not a question of data size).
SCALE_PHASES: tuple[Phase, ...] = (
    Phase("cold start", lambda p: 2.0, ScaleRunner.start_cold),
    WARM_UP,
    UNLOADED_LATENCY,
    Phase("QPS and cache", MEASURE_QPS.expected_s, ScaleRunner.measure_qps_and_cache),
    LOADED_LATENCY,
)


def merge_into(results: Results, plan: Plan, meta: dict) -> Results:
    """Earlier `scale` results (or any results file) ready to take this run's cells: a cell
    measured again replaces its old one when it is recorded; the run is noted in added_runs.
    Refused when the earlier cells were measured another way (seed, Zipf exponent, profile),
    since they would not be comparable."""
    earlier = results.meta.get("scale", {})
    for key in ("seed", "zipf_exponent", "profile", "threads", "records", "query_kinds"):
        if key in earlier and earlier[key] != meta["scale"][key]:
            raise UserError(f"the results were measured with {key}={earlier[key]}, not "
                            f"{meta['scale'][key]}: their cells would not be comparable")
    results.meta.setdefault("scale", meta["scale"])
    added = metadata.added_run(results.meta, meta)
    results.meta.setdefault("added_runs", []).append(
        {**added, "command": "scale", "servers": list(plan.servers),
         "zone_counts": [d.zones for d in plan.datasets],
         "records_per_zone": sorted({d.records for d in plan.datasets}), "seed": plan.seed,
         "mixes": list(plan.mixes)})
    return results
