"""What `tune` records beside its grid of cells (results.json's "tuning"): where the database
ran, the round trip added, the scaling runs (processes, threads, CPUs) and the recommended
setting per server. null in the files of other commands."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from bench.load.dnsperf import DnsperfRun
from bench.measure.serial import RENAMED_SERVER, Section


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

    json_renamed: ClassVar[dict[str, str]] = RENAMED_SERVER


@dataclass
class Recommendation:
    """The smallest threads/connections setting as good as the best QPS (bench/measure/tune.py:
    as_good_as); qps and best_qps are over the fresh starts (their runs' median in files with
    one start)."""

    server: str
    threads: int
    connections: int
    qps: float
    p99_us: float | None
    best_qps: float
    best_threads: int
    best_connections: int
    tolerance: float
    # The one-sided Welch t test's p-value of "more than `tolerance` below the best" over the
    # fresh starts (None: one start a setting, or files before the test, where the pick is
    # the smallest within `tolerance` of the best's median).
    p_below: float | None = None

    json_renamed: ClassVar[dict[str, str]] = RENAMED_SERVER


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


SECTION = Section("tuning", Tuning | None, always=True)
