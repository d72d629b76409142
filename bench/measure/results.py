"""The results.json schema (version 1): dataclasses with to_dict/from_dict, load and save.

{ "schema": 1,
  "meta": {metadata.collect() + every run parameter: profile, threads, connections, duration,
           runs, queue_depth, clients, pin, dataset, loss_threshold, ...},
  "prober_floor": LatencyStats | null,
  "cells": [Cell, ...],                       one per (driver, threads, connections)
  "startup_scaling": [StartupPoint, ...],
  "capacity": [capacity.Curve, ...],       `capacity`: one per (driver, threads)
  "tuning": Tuning | null,                    `tune` only: where the database was, what
                                              round trip was added, processes/CPU scaling,
                                              the recommended setting (absent in older files)
  "scale": [SizeCell, ...],                   `scale`: one per (driver, zones, records per
                                              zone, query mix) (absent in older files)
  "signed": [SignedCell, ...],                `run --signed`: one per (driver, threads, data
                                              variant: unsigned or signed) (absent in older
                                              files)
  "instructions": Instructions,               `instructions`: Valgrind's instructions per
                                              answered query, per server and repeat
                                              (absent in older files)
  "faults": Faults,                           `faults`: a steady load through a script of
                                              database faults, per second and per fault
  "writes": Writes,                           `writes`: reads at a fixed rate while a
                                              provisioning system writes into the store
                                              (absent in other files)
  "updates": Updates }                        `updates`: RFC 2136 updates per second by
                                              records per message, with and without TSIG,
                                              and the answers after them (absent in other
                                              files)

Raw figures are kept: every dnsperf run (the discarded warm-up one too) with its output, and
every latency sample, so a report can be re-rendered or re-analysed from the file alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from base.errors import UserError
from bench.load.dnsperf import DnsperfRun
from bench.load.prober import LatencyStats
from bench.measure.capacity import Curve
from bench.measure.faults import Faults
from bench.measure.instructions import Instructions
from bench.measure.stats import Interval, median_interval
from bench.measure.updates import Updates
from bench.measure.writes import Writes
from servers import report_order

SCHEMA = 1
RESULTS_FILE = "results.json"
STATUSES = ("ok", "wrong", "failed", "n/a")
# A QPS run that lost more than this fraction of its queries is flagged in the report.
DEFAULT_LOSS_THRESHOLD = 0.01


def with_server_key(data: dict) -> dict:
    """data with the measured server under "server": files written before the suite called
    it a server (up to 2026-11-25) have it under "driver"."""
    d = dict(data)
    if "driver" in d:
        d["server"] = d.pop("driver")
    return d


@dataclass
class QpsSummary:
    """Median, min and max QPS over the measured (not warm-up) runs, and the median's 95%
    interval (bench/measure/stats.py; None with fewer than 6 runs, and in files written
    before intervals)."""

    median: float | None = None
    min: float | None = None
    max: float | None = None
    low: float | None = None
    high: float | None = None

    @classmethod
    def from_runs(cls, runs: list[DnsperfRun]) -> QpsSummary:
        interval = median_interval([r.qps for r in runs])
        if interval is None:
            return cls()
        values = [r.qps for r in runs]
        return cls(median=interval.estimate, min=min(values), max=max(values),
                   low=interval.low, high=interval.high)

    def to_dict(self) -> dict:
        return {"median": self.median, "min": self.min, "max": self.max, "low": self.low,
                "high": self.high}

    @classmethod
    def from_dict(cls, data: dict) -> QpsSummary:
        return cls(**data)


@dataclass
class RoundRun:
    """Where a QPS run of a cell measured in rounds stood: its round, the fresh start of the
    server it ran after (0: the first), and the CPU the server used during it (db: None
    without a database server of the suite's)."""

    round: int
    start: int
    named_cpu_s: float | None = None
    db_cpu_s: float | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict) -> RoundRun:
        return cls(**data)


@dataclass
class FreshStart:
    """One fresh start of a cell's server in a run measured in rounds: the round before which
    it happened (0: before the first), named's startup, and the warm-up runs that followed it
    until two in a row agreed (steady: whether they did before the profile's most)."""

    round: int
    startup_ms: float | None
    warmup_runs: list[DnsperfRun] = field(default_factory=list)
    steady: bool = False

    def to_dict(self) -> dict:
        return {"round": self.round, "startup_ms": self.startup_ms,
                "warmup_runs": [r.to_dict() for r in self.warmup_runs], "steady": self.steady}

    @classmethod
    def from_dict(cls, data: dict) -> FreshStart:
        return cls(round=data["round"], startup_ms=data.get("startup_ms"),
                   warmup_runs=[DnsperfRun.from_dict(r) for r in data.get("warmup_runs", [])],
                   steady=data.get("steady", False))


@dataclass
class Cell:
    """Every figure of one driver at one thread (and connection) count."""

    server: str
    threads: int
    connections: int
    # "ok", "wrong" (answers differ from native), "failed", or "n/a" (the server does not
    # do what the run asks: a transport it does not speak; error says why)
    status: str = "ok"
    error: str | None = None
    mismatches: int = 0
    startup_ms: float | None = None
    warmup_run: DnsperfRun | None = None
    qps_runs: list[DnsperfRun] = field(default_factory=list)
    qps: QpsSummary = field(default_factory=QpsSummary)
    # Measured in rounds (`run`): each QPS run's round, in the order of qps_runs (empty: the
    # runs were one block, as before rounds and in tune, scale and capacity), the server's
    # fresh starts, and the cell's QPS ratio to each reference server ("native", "memory")
    # from the runs of the same rounds, with whether its interval met the profile's target.
    qps_rounds: list[RoundRun] = field(default_factory=list)
    starts: list[FreshStart] = field(default_factory=list)
    ratios: dict[str, Interval] = field(default_factory=dict)
    ratio_target_met: dict[str, bool] = field(default_factory=dict)
    latency_unloaded: LatencyStats | None = None
    latency_loaded: LatencyStats | None = None
    loaded_run: DnsperfRun | None = None  # the load dnsperf held during the loaded probe
    update_visibility_ms: float | None = None  # the median of update_visibility_runs_ms
    # Each timed update, in order (files before these kept only the one figure above).
    update_visibility_runs_ms: list[float] = field(default_factory=list)
    cpu_us_per_query: dict[str, float | None] = field(default_factory=dict)
    peak_rss_kb: dict[str, int | None] = field(default_factory=dict)
    # A server the suite did not start (`run --target`): where it answered, and the figures
    # that cannot be measured there with why, keyed like the fields ("startup_ms",
    # "cpu_us_per_query.named", ...): their values are None because they are unavailable,
    # not because nothing was recorded.
    target: str | None = None
    unavailable: dict[str, str] = field(default_factory=dict)
    # The flood phase (`--flood RATE`, runner.flood_record): the normal traffic at a fixed
    # rate without and with a random-subdomain flood beside it, and the flood's own answers.
    flood: dict | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"cell status {self.status!r} is not one of {STATUSES}")

    @property
    def key(self) -> tuple[str, int, int]:
        return self.server, self.threads, self.connections

    @property
    def qps_interval(self) -> Interval | None:
        q = self.qps
        return None if q.median is None else Interval(q.median, q.low, q.high,
                                                      len(self.qps_runs))

    def qps_by_round(self) -> dict[int, float]:
        """Round -> the QPS of the cell's run in that round (empty: not measured in rounds)."""
        return {where.round: run.qps for where, run in zip(self.qps_rounds, self.qps_runs,
                                                           strict=True)}

    def to_dict(self) -> dict:
        return {
            "server": self.server, "threads": self.threads, "connections": self.connections,
            "status": self.status, "error": self.error, "mismatches": self.mismatches,
            "startup_ms": self.startup_ms,
            "warmup_run": _opt_dict(self.warmup_run),
            "qps_runs": [r.to_dict() for r in self.qps_runs],
            "qps": self.qps.to_dict(),
            "qps_rounds": [r.to_dict() for r in self.qps_rounds],
            "starts": [s.to_dict() for s in self.starts],
            "ratios": {k: v.to_dict() for k, v in self.ratios.items()},
            "ratio_target_met": dict(self.ratio_target_met),
            "latency_unloaded": _opt_dict(self.latency_unloaded),
            "latency_loaded": _opt_dict(self.latency_loaded),
            "loaded_run": _opt_dict(self.loaded_run),
            "update_visibility_ms": self.update_visibility_ms,
            "update_visibility_runs_ms": list(self.update_visibility_runs_ms),
            "cpu_us_per_query": dict(self.cpu_us_per_query),
            "peak_rss_kb": dict(self.peak_rss_kb),
            "target": self.target,
            "unavailable": dict(self.unavailable),
            "flood": self.flood,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Cell:
        d = with_server_key(data)
        d["warmup_run"] = _opt(DnsperfRun, d.get("warmup_run"))
        d["qps_runs"] = [DnsperfRun.from_dict(r) for r in d.get("qps_runs", [])]
        d["qps"] = QpsSummary.from_dict(d.get("qps") or {})
        d["qps_rounds"] = [RoundRun.from_dict(r) for r in d.get("qps_rounds", [])]
        d["starts"] = [FreshStart.from_dict(s) for s in d.get("starts", [])]
        d["ratios"] = {k: Interval.from_dict(v) for k, v in d.get("ratios", {}).items()}
        d["latency_unloaded"] = _opt(LatencyStats, d.get("latency_unloaded"))
        d["latency_loaded"] = _opt(LatencyStats, d.get("latency_loaded"))
        d["loaded_run"] = _opt(DnsperfRun, d.get("loaded_run"))
        return cls(**d)


@dataclass
class StartupPoint:
    """Startup of named with one driver over a store holding `zones` zones."""

    server: str
    zones: int
    startup_ms: float | None = None
    named_rss_kb: int | None = None
    store_bytes: int | None = None
    status: str = "ok"
    error: str | None = None
    # The store's load at this zone count (shared by the variants of one store).
    load_seconds: float | None = None
    records_per_second: float | None = None
    loader_rss_kb: int | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict) -> StartupPoint:
        return cls(**with_server_key(data))


@dataclass
class ScalePoint:
    """One QPS figure of `tune`'s scaling runs: `count` single-thread processes on one port
    ("processes"), one process of `count` threads ("threads"), or `count` server CPUs ("cpus")."""

    server: str
    kind: str
    count: int
    threads: int        # per process
    connections: int    # per process
    server_cpus: str | None  # taskset list of each process, ";"-separated when they differ
    load_cpus: str | None
    qps: float | None = None
    run: DnsperfRun | None = None
    # Requests each process received since it started, warm-up load included (its own
    # statistics): how the kernel spread the load over processes sharing a port.
    requests: list[int] = field(default_factory=list)
    status: str = "ok"
    error: str | None = None

    def to_dict(self) -> dict:
        return {**self.__dict__, "run": _opt_dict(self.run)}

    @classmethod
    def from_dict(cls, data: dict) -> ScalePoint:
        return cls(**{**with_server_key(data), "run": _opt(DnsperfRun, data.get("run"))})


@dataclass
class SizeCell:
    """`scale`: one driver over one data set (zones x records per zone) under one query mix:
    the runner's figures (QPS, latency, CPU and RSS of named and the database) with the store's
    size on disk, its load and its cache figures (CacheReading.since over the QPS runs)."""

    zones: int
    records_per_zone: int
    mix: str                 # "uniform" or "popular" (zonedata/mixes.py)
    cell: Cell
    shape: bool = False      # from --shapes (few large against many small zones)
    not_measured: str | None = None   # why the cell was left out (it would not fit in memory)
    store_bytes: int | None = None
    load_seconds: float | None = None
    records_per_second: float | None = None
    loader_rss_kb: int | None = None
    cache: dict | None = None

    @property
    def server(self) -> str:
        return self.cell.server

    @property
    def key(self) -> tuple[str, int, int, str]:
        return self.server, self.zones, self.records_per_zone, self.mix

    def to_dict(self) -> dict:
        return {**self.__dict__, "cell": self.cell.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> SizeCell:
        return cls(**{**data, "cell": Cell.from_dict(data["cell"])})


@dataclass
class SignedCell:
    """`run --signed`: one driver over one variant of the data set ("unsigned", or "signed":
    the same zones signed), every query with the DO bit: the runner's figures, with what
    holding that variant costs the store (its files on disk after the load, the load's time)
    and the replies to the check queries over UDP (how many, how many truncated, their mean
    size on the wire)."""

    variant: str
    cell: Cell
    zones: int = 0
    records: int = 0
    store_bytes: int | None = None
    load_seconds: float | None = None
    replies: int = 0
    truncated: int = 0
    reply_bytes: float | None = None

    @property
    def server(self) -> str:
        return self.cell.server

    @property
    def key(self) -> tuple[str, int, str]:
        return self.server, self.cell.threads, self.variant

    def to_dict(self) -> dict:
        return {**self.__dict__, "cell": self.cell.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> SignedCell:
        return cls(**{**data, "cell": Cell.from_dict(data["cell"])})


@dataclass
class Recommendation:
    """The smallest threads/connections setting whose QPS is within `tolerance` of the best."""

    server: str
    threads: int
    connections: int
    qps: float
    p99_us: float | None
    best_qps: float
    best_threads: int
    best_connections: int
    tolerance: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict) -> Recommendation:
        return cls(**with_server_key(data))


@dataclass
class Tuning:
    """What `tune` adds to its cells: where the database ran, the round trip added between
    named and it (requested and measured), the scaling runs and the recommendation."""

    db_host: str = "local"                 # "local" or "netns"
    db_rtt_ms: int = 0                     # requested; 0: no proxy
    added_rtt: dict | None = None          # bench.measure.latency.AddedRtt.as_json()
    db_namespace: str | None = None        # netns: the namespace the database ran in
    db_address: str | None = None          # netns: its address there (the veth's inner end)
    scaling: list[ScalePoint] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"db_host": self.db_host, "db_rtt_ms": self.db_rtt_ms,
                "added_rtt": self.added_rtt, "db_namespace": self.db_namespace,
                "db_address": self.db_address, "scaling": [p.to_dict() for p in self.scaling],
                "recommendations": [r.to_dict() for r in self.recommendations]}

    @classmethod
    def from_dict(cls, data: dict) -> Tuning:
        return cls(db_host=data.get("db_host", "local"), db_rtt_ms=data.get("db_rtt_ms", 0),
                   added_rtt=data.get("added_rtt"), db_namespace=data.get("db_namespace"),
                   db_address=data.get("db_address"),
                   scaling=[ScalePoint.from_dict(p) for p in data.get("scaling", [])],
                   recommendations=[Recommendation.from_dict(r)
                                    for r in data.get("recommendations", [])])


@dataclass
class Results:
    meta: dict = field(default_factory=dict)
    prober_floor: LatencyStats | None = None
    cells: list[Cell] = field(default_factory=list)
    startup_scaling: list[StartupPoint] = field(default_factory=list)
    capacity: list[Curve] = field(default_factory=list)
    tuning: Tuning | None = None
    scale: list[SizeCell] = field(default_factory=list)
    signed: list[SignedCell] = field(default_factory=list)
    instructions: Instructions | None = None
    faults: Faults | None = None
    writes: Writes | None = None
    updates: Updates | None = None
    schema: int = SCHEMA

    @property
    def loss_threshold(self) -> float:
        return float(self.meta.get("loss_threshold", DEFAULT_LOSS_THRESHOLD))

    def thread_counts(self) -> list[int]:
        return sorted({c.threads for c in self.cells})

    def servers(self) -> list[str]:
        """Drivers present, in the registry's order (unknown names last, alphabetically)."""
        return sorted({c.server for c in self.cells}, key=report_order)

    def cells_for(self, threads: int) -> list[Cell]:
        order = {d: i for i, d in enumerate(self.servers())}
        return sorted((c for c in self.cells if c.threads == threads),
                      key=lambda c: (order[c.server], c.connections))

    def cell(self, driver: str, threads: int) -> Cell | None:
        """The cell of (driver, threads); with several connection counts, the first."""
        for c in self.cells_for(threads):
            if c.server == driver:
                return c
        return None

    def to_dict(self) -> dict:
        return {"schema": self.schema, "meta": self.meta,
                "prober_floor": _opt_dict(self.prober_floor),
                "cells": [c.to_dict() for c in self.cells],
                "startup_scaling": [p.to_dict() for p in self.startup_scaling],
                "capacity": [c.to_dict() for c in self.capacity],
                "tuning": None if self.tuning is None else self.tuning.to_dict(),
                "scale": [c.to_dict() for c in self.scale],
                "signed": [c.to_dict() for c in self.signed],
                # Only in an `instructions` file: every other file stays as it was.
                **({} if self.instructions is None
                   else {"instructions": self.instructions.to_dict()}),
                **({} if self.faults is None else {"faults": self.faults.to_dict()}),
                **({} if self.writes is None else {"writes": self.writes.to_dict()}),
                **({} if self.updates is None else {"updates": self.updates.to_dict()})}

    @classmethod
    def from_dict(cls, data: dict) -> Results:
        schema = data.get("schema")
        if schema != SCHEMA:
            raise UserError(f"results schema {schema!r} is not supported (expected {SCHEMA})")
        return cls(meta=data.get("meta", {}),
                   prober_floor=_opt(LatencyStats, data.get("prober_floor")),
                   cells=[Cell.from_dict(c) for c in data.get("cells", [])],
                   startup_scaling=[StartupPoint.from_dict(p)
                                    for p in data.get("startup_scaling", [])],
                   capacity=[Curve.from_dict(c) for c in data.get("capacity", [])],
                   tuning=_opt(Tuning, data.get("tuning")),
                   scale=[SizeCell.from_dict(c) for c in data.get("scale", [])],
                   signed=[SignedCell.from_dict(c) for c in data.get("signed", [])],
                   instructions=_opt(Instructions, data.get("instructions")),
                   faults=_opt(Faults, data.get("faults")),
                   writes=_opt(Writes, data.get("writes")),
                   updates=_opt(Updates, data.get("updates")),
                   schema=schema)


def _opt_dict(value: DnsperfRun | LatencyStats | Tuning | None) -> dict | None:
    return None if value is None else value.to_dict()


def _opt(kind: type, data: dict | None) -> object:
    return None if data is None else kind.from_dict(data)


def results_path(path: Path) -> Path:
    """A results directory's results.json (a path to the file itself is accepted too)."""
    return path / RESULTS_FILE if path.is_dir() else path


def load_results(path: Path) -> Results:
    """Read results.json from a results directory (or the file's own path)."""
    file = results_path(path)
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError as exc:
        raise UserError(f"no results found: {file} does not exist") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read {file}: {exc}") from exc
    try:
        return Results.from_dict(data)
    except (TypeError, ValueError, KeyError) as exc:
        raise UserError(f"{file} does not follow the results schema: {exc}") from exc


def save_results(results: Results, directory: Path) -> Path:
    """Write directory/results.json (atomically: a crash never leaves half a file)."""
    directory.mkdir(parents=True, exist_ok=True)
    file = directory / RESULTS_FILE
    tmp = file.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results.to_dict(), indent=1) + "\n")
    tmp.replace(file)
    return file
