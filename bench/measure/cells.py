"""The cells of `run` (results.json's "cells"): every figure of one server at one thread (and
connection) count, the QPS runs, their rounds and the server's fresh starts. tune, scale and
run --signed keep a Cell of the same shape inside their own entries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from bench.load.dnsperf import DnsperfRun
from bench.load.prober import LatencyStats
from bench.measure.accounting import CpuTimes
from bench.measure.serial import RENAMED_SERVER, Section
from bench.measure.stats import Interval, median_interval

STATUSES = ("ok", "wrong", "failed", "n/a")


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


@dataclass
class RoundRun:
    """Where a QPS run of a cell measured in rounds stood: its round, the fresh start of the
    server it ran after (0: the first), and the CPU the server used during it (db: None
    without a database server of the suite's).

    Recorded since the cost per query became the run's first figure (files before have the
    defaults): when the run began and ended (time.monotonic(), seconds: which runs of other
    cells were next to it), the server's and the database's CPU split into user and system
    time, and every CPU's time over the run (accounting.MachineMeter: whether the machine,
    not the server, moved)."""

    round: int
    start: int
    server_cpu_s: float | None = None
    db_cpu_s: float | None = None
    began_s: float | None = None
    ended_s: float | None = None
    server_user_s: float | None = None
    server_system_s: float | None = None
    db_user_s: float | None = None
    db_system_s: float | None = None
    cpus: list[CpuTimes] = field(default_factory=list)

    # Files up to 2026-11-27 name the server's own CPU after named, for every server.
    json_renamed: ClassVar[dict[str, str]] = {"named_cpu_s": "server_cpu_s"}


@dataclass
class FreshStart:
    """One fresh start of a cell's server in a run measured in rounds: the round before which
    it happened (0: before the first), the server's startup, and the warm-up runs that followed it
    until two in a row agreed (steady: whether they did before the profile's most)."""

    round: int
    startup_ms: float | None
    warmup_runs: list[DnsperfRun] = field(default_factory=list)
    steady: bool = False

    json_absent: ClassVar[dict[str, Any]] = {"startup_ms": None}


@dataclass
class Cell:
    """Every figure of one server at one thread (and connection) count."""

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
    # "cpu_us_per_query.server", ...): their values are None because they are unavailable,
    # not because nothing was recorded.
    target: str | None = None
    unavailable: dict[str, str] = field(default_factory=dict)
    # The flood phase (`--flood RATE`, runner.flood_record): the normal traffic at a fixed
    # rate without and with a random-subdomain flood beside it, and the flood's own answers.
    flood: dict | None = None

    json_renamed: ClassVar[dict[str, str]] = RENAMED_SERVER
    # cpu_us_per_query and peak_rss_kb key the server's own process "server" (beside "db" and
    # "dnsperf"); files up to 2026-11-27 keyed it "named", for every server.
    json_renamed_keys: ClassVar[dict[str, dict[str, str]]] = {
        "cpu_us_per_query": {"named": "server"}, "peak_rss_kb": {"named": "server"},
        "unavailable": {"cpu_us_per_query.named": "cpu_us_per_query.server",
                        "peak_rss_kb.named": "peak_rss_kb.server"}}

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


SECTION = Section("cells", list[Cell], always=True)
