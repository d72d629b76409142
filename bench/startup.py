"""Startup time and memory against zone count: native BIND and every driver.

For each zone count the data set is generated (streamed, deterministic) and loaded into each
store by `python3 -m bench load` in a child process, whose peak RSS shows whether loading stays
flat as the count grows. Then, for each driver of that store, named is started over the loaded
store and timed from its exec until it answers for the last zone. A named that does not answer
within the timeout, or dies (e.g. out of memory), is a result too: recorded with how far it got.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench.accounting import peak_rss_kb
from bench.errors import UserError
from bench.results import StartupPoint
from bench.servers.named import Named
from bench.servers.process import REPO_ROOT
from loaders import store_for_driver
from loaders.generator import zone_name
from loaders.model import name_key
from loaders.store import Store

Report = Callable[[str], None]


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


def load_in_child(store: Store, zones: int, records: int, seed: int, data: Path,
                  log: Path) -> tuple[dict, int]:
    """Run the store's load in a child process: (its figures, its peak RSS in kB)."""
    figures = data / f"load-{store.name}.json"
    argv = [sys.executable, "-m", "bench", "load", "--generate", str(zones), "--records",
            str(records), "--seed", str(seed), "--stores", store.name, "--data", str(data),
            "--json", str(figures)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-5:])
        raise UserError(f"loading {zones} zones into {store.name} failed:\n{tail}")
    return json.loads(figures.read_text())[0], usage.ru_maxrss


def _zones_loaded(named: Named) -> int:
    """Zones named reported loaded so far (native BIND logs one line per zone)."""
    try:
        text = named.log_path.read_text(errors="replace")
    except OSError:
        return 0
    return len(re.findall(r": loaded serial ", text))


def time_startup(store: Store, variant: str, target: object, zones: int, run_dir: Path,
                 timeout: float) -> StartupPoint:
    point = StartupPoint(variant, zones)
    body = store.dlz_clause(variant, target, 1, 1)
    named = Named(run_dir / f"named-{variant}-{zones}", body, threads=1)
    try:
        named.start()
        last = name_key(zone_name(zones - 1))
        point.startup_ms = named.wait_answers(last, "SOA", timeout=timeout) * 1000
        point.named_rss_kb = peak_rss_kb(named.pids())
    except UserError as exc:
        alive = bool(named.pids())
        point.named_rss_kb = peak_rss_kb(named.pids()) if alive else None
        point.status = "timeout" if alive else "failed"
        loaded = _zones_loaded(named)
        progress = f" ({loaded:,} of {zones:,} zones loaded)" if loaded else ""
        point.error = (f"no answer for the last zone within {timeout:.0f}s{progress}" if alive
                       else f"named exited during start-up{progress}: "
                            f"{str(exc).splitlines()[-1]}")
    finally:
        named.stop()
    return point


def measure_count(drivers: list[str], zones: int, records: int, seed: int, run_dir: Path,
                  timeout: float, report: Report) -> list[StartupPoint]:
    """Every driver at one zone count; each store is loaded once for all its variants."""
    points: list[StartupPoint] = []
    for store, variants in _by_store(drivers):
        data = run_dir / f"{zones}"
        data.mkdir(parents=True, exist_ok=True)
        report(f"{zones:,} zones: loading {store.name}")
        try:
            figures, rss_kb = load_in_child(store, zones, records, seed, data,
                                            run_dir / "load.log")
        except UserError as exc:
            points += [StartupPoint(v, zones, status="failed", error=str(exc).splitlines()[0])
                       for v in variants]
            continue
        with store.server(data / store.name) as target:
            size = disk_usage(data / store.name)
            for variant in variants:
                report(f"{zones:,} zones: starting named with {variant}")
                point = time_startup(store, variant, target, zones, run_dir, timeout)
                point.store_bytes = size
                point.load_seconds = figures["seconds"]
                point.records_per_second = figures["records_per_second"]
                point.loader_rss_kb = rss_kb
                points.append(point)
        shutil.rmtree(data / store.name, ignore_errors=True)  # a million zones take room
    return points


def _by_store(drivers: list[str]) -> list[tuple[Store, list[str]]]:
    groups: dict[str, tuple[Store, list[str]]] = {}
    for driver in drivers:
        store, variant = store_for_driver(driver)
        groups.setdefault(store.name, (store, []))[1].append(variant)
    return list(groups.values())
