"""Startup time and memory against zone count: native BIND and every other server.

For each zone count the data set is generated (streamed, deterministic) and loaded into each
store by `python3 -m bench load` in a child process, whose peak RSS shows whether loading stays
flat as the count grows. Then, for each server of that store, the server is started over the
loaded store and timed from its exec until it answers for the last zone. One that does not answer
within the timeout, or dies (e.g. out of memory), is a result too: recorded with how far it got.

Each server is started `starts` times over the same store, the servers of a store taking turns
(in reversed order every other pass, as the rounds of `run` do), so that a drift of the machine
lands on no server's side. A start is the independent unit (each is a fresh exec), so a point's
time is the geometric mean of its starts with a t interval over them (stats.start_interval), as
the cost per query of `run` is over its fresh starts (docs/method/run.md).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from base.errors import UserError
from base.paths import REPO_ROOT
from bench.measure import stats
from bench.measure.accounting import peak_rss_kb
from bench.measure.serial import RENAMED_SERVER, Section
from loaders.loader import Loader
from servers import ServerKind, get_server
from zonedata.generator import zone_name
from zonedata.model import name_key

Report = Callable[[str], None]
# How often the server is asked for the last zone while it starts (a query costs it microseconds).
POLL_SECONDS = 0.002


@dataclass
class StartupPoint:
    """Startup of one server over a store holding `zones` zones: startup_ms is the geometric
    mean of its fresh starts (starts_ms, in the order they were made; empty in files before
    repeated starts, whose startup_ms is one start's), server_rss_kb the largest of their peak
    resident memories."""

    server: str
    zones: int
    startup_ms: float | None = None
    server_rss_kb: int | None = None
    store_bytes: int | None = None
    status: str = "ok"
    error: str | None = None
    # The store's load at this zone count (shared by the variants of one store).
    load_seconds: float | None = None
    records_per_second: float | None = None
    loader_rss_kb: int | None = None
    starts_ms: list[float] = field(default_factory=list)

    # Files up to 2026-11-27 name the server's memory after named, for every server.
    json_renamed: ClassVar[dict[str, str]] = {**RENAMED_SERVER, "named_rss_kb": "server_rss_kb"}


    def interval(self) -> stats.Interval | None:
        """The startup time (ms) with its 95% interval over the starts; None for fewer than
        two starts (one start, or a file before repeated starts)."""
        if len(self.starts_ms) < 2:
            return None
        return stats.start_interval(self.starts_ms, range(len(self.starts_ms)))


# results.json's "startup_scaling": one point per (server, zone count).
SECTION = Section("startup_scaling", list[StartupPoint], always=True)


def disk_usage(path: Path) -> int:
    """Bytes allocated on disk under path (what an operator has to provision)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def load_in_child(store: Loader[Any], zones: int, records: int, seed: int, data: Path,
                  log: Path) -> dict:
    """Run the store's load in a child process; its figures, with the loader's own peak RSS
    (peak_rss_kb: the loading program alone, not the database server it starts)."""
    figures = data / f"load-{store.name}.json"
    argv = [sys.executable, "-m", "bench", "load", "--generate", str(zones), "--records",
            str(records), "--seed", str(seed), "--stores", store.name, "--data", str(data),
            "--json", str(figures)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        try:
            proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-5:])
        raise UserError(f"loading {zones} zones into {store.name} failed:\n{tail}")
    return json.loads(figures.read_text())[0]


def time_startup(kind: ServerKind, target: object, zones: int, run_dir: Path,
                 timeout: float) -> StartupPoint:
    """The server from exec until it answers for the last zone; one still loading at the
    timeout is measured as it is then (RSS, zones loaded) before it is stopped."""
    point = StartupPoint(kind.name, zones)
    server = kind.build(target, run_dir / f"named-{kind.name}-{zones}", threads=1,
                        connections=1)
    last = name_key(zone_name(zones - 1))
    try:
        server.start()
        deadline = server.exec_time + timeout
        while True:
            # The clock is read after the answer: an answer that came past the deadline (a
            # query can wait for a server still loading) is a timeout, not a startup time.
            answered = server.answers(last)
            now = time.monotonic()
            if now > deadline:
                point.status = "timeout"
                point.error = f"no answer for the last zone within {timeout:.0f}s"
                break
            if answered:
                point.startup_ms = (now - server.exec_time) * 1000
                break
            if not server.pids():
                point.status, point.error = "failed", f"{server.program} exited during start-up"
                break
            time.sleep(POLL_SECONDS)
        point.server_rss_kb = peak_rss_kb(server.pids()) if server.pids() else None
    except UserError as exc:  # the server refused its configuration
        point.status, point.error = "failed", str(exc).splitlines()[0]
    finally:
        server.stop()
    if point.status != "ok":
        loaded = server.zones_loaded()
        if loaded:
            point.error += f" ({loaded:,} of {zones:,} zones loaded)"
    return point


def measure_count(names: list[str], zones: int, records: int, seed: int, run_dir: Path,
                  timeout: float, starts: int, report: Report,
                  record: Callable[[StartupPoint], None]) -> None:
    """Every server at one zone count, each point handed to record once its starts are made
    (an interrupted run keeps the points before); each store is loaded once for all the
    servers it feeds."""
    for store, servers in by_store(names):
        data = run_dir / f"{zones}"
        data.mkdir(parents=True, exist_ok=True)
        report(f"{zones:,} zones: loading {store.name}")
        try:
            figures = load_in_child(store, zones, records, seed, data, run_dir / "load.log")
        except UserError as exc:
            for server in servers:
                record(StartupPoint(server.name, zones, status="failed",
                                    error=str(exc).splitlines()[0]))
            continue
        with store.database.server(data / store.name) as target:
            size = disk_usage(data / store.name)
            for point in start_in_turns(servers, target, zones, run_dir, timeout, starts, report):
                point.store_bytes = size
                point.load_seconds = figures["seconds"]
                point.records_per_second = figures["records_per_second"]
                point.loader_rss_kb = figures["peak_rss_kb"]
                record(point)
        shutil.rmtree(data / store.name, ignore_errors=True)  # a million zones take room


def start_in_turns(servers: list[ServerKind], target: object, zones: int, run_dir: Path,
                   timeout: float, starts: int, report: Report) -> list[StartupPoint]:
    """Each server started `starts` times over one store, the servers taking turns (reversed
    every other pass); a server whose start failed or timed out is not started again (a
    million zones that time out would cost the timeout again): its point is that start."""
    made: dict[str, list[StartupPoint]] = {s.name: [] for s in servers}
    for turn in range(starts):
        for server in stats.round_order(servers, turn):
            earlier = made[server.name]
            if earlier and earlier[-1].status != "ok":
                continue
            report(f"{zones:,} zones: starting {server.name} ({turn + 1} of {starts})")
            earlier.append(time_startup(server, target, zones, run_dir, timeout))
    return [combined(made[s.name]) for s in servers]


def combined(points: list[StartupPoint]) -> StartupPoint:
    """One server's starts as one point: the failed start where one failed, else the
    geometric mean of the times, every start's time kept, the largest resident memory."""
    failed = [p for p in points if p.status != "ok"]
    if failed:
        return failed[0]
    times = [p.startup_ms for p in points if p.startup_ms is not None]
    rss = [p.server_rss_kb for p in points if p.server_rss_kb is not None]
    return StartupPoint(points[0].server, points[0].zones,
                        startup_ms=statistics.geometric_mean(times) if times else None,
                        server_rss_kb=max(rss) if rss else None, starts_ms=times)


def by_store(names: list[str]) -> list[tuple[Loader[Any], list[ServerKind]]]:
    """The servers grouped by the store that feeds them, each store once, in first-use order."""
    groups: dict[str, tuple[Loader[Any], list[ServerKind]]] = {}
    for name in names:
        server = get_server(name)
        groups.setdefault(server.store, (server.loader(), []))[1].append(server)
    return list(groups.values())
