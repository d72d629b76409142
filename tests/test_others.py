"""The other servers on the same data: PowerDNS (generic SQL backends, bind backend), NSD and
Knot, each a private instance over its store, judged against native BIND.

  - every row serves the coverage set and answers as native BIND does apart from its own
    named classes (OTHER_CLASSES in bench/verify/other_classes.py), each of which the coverage
    set exercises;
  - a store update reaches each of them (after the reload its registry line asks for);
  - the runner's thread knob becomes each server's own setting;
  - Ctrl-C of a bench command leaves no pdns_server, nsd or knotd behind;
  - a port in use is refused with one line.
"""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import dns.name
import pytest

from base.paths import REPO_ROOT
from base.process import free_port
from bench.measure.runner import wait_for_txt
from bench.measure.serving import LoadedStore, loaded_store
from bench.verify.compare import UNEXPLAINED, Comparison, compare_servers
from servers import REFERENCE, SERVERS, get_server
from servers.dlz import DlzNamed
from servers.dnsserver import DnsServer
from tests.benchcli import bench_env, interrupt_when, processes_under
from zonedata.derive import derive_queries
from zonedata.generator import coverage_zones
from zonedata.model import Zone, make_record

OTHERS = [s.name for s in SERVERS if not isinstance(s, DlzNamed) and s.name != REFERENCE]
PROGRAMS = ("pdns_server", "nsd", "knotd")
# One row of each program; PowerDNS over its MariaDB store, a database server for Ctrl-C to
# stop too (PostgreSQL's is tests/test_runner.py's Ctrl-C).
ONE_OF_EACH_PROGRAM = ["pdns-gmysql", "nsd", "knot"]
THREADS = 2


@dataclass
class Fleet:
    zones: list[Zone]
    stores: dict[str, LoadedStore]
    servers: dict[str, DnsServer]


@pytest.fixture(scope="module")
def fleet(run_dir: Path) -> Iterator[Fleet]:
    """Every row serving the coverage set; the rows over one store share one load of it (the
    PowerDNS rows with and without caches one database server, native BIND, NSD, Knot and
    PowerDNS's bind backend one directory of zone files), as `scale` serves them."""
    zones = coverage_zones()
    with ExitStack() as stack:
        by_store: dict[str, LoadedStore] = {}
        stores = {}
        for d in [REFERENCE, *OTHERS]:
            kind = get_server(d)
            if kind.store not in by_store:
                by_store[kind.store] = stack.enter_context(
                    loaded_store(kind, lambda: iter(zones), run_dir / kind.store))
            stores[d] = dataclasses.replace(by_store[kind.store], server=kind)
        servers = {d: stack.enter_context(s.dns_server(run_dir / d, threads=THREADS))
                   for d, s in stores.items()}
        yield Fleet(zones, stores, servers)


@pytest.fixture(scope="module")
def verified(fleet: Fleet) -> dict[str, Comparison]:
    results = compare_servers(fleet.servers, derive_queries(fleet.zones), fleet.zones)
    for result in results.values():
        print(f"\n{result.summary()}", end="")
    return results


@pytest.mark.parametrize("driver", OTHERS)
def test_answers_match_native_but_for_named_classes(verified: dict[str, Comparison],
                                                    driver: str) -> None:
    result = verified[driver]
    assert result.total > 1500 and result.identical > 0.5 * result.total, result.summary()
    assert UNEXPLAINED not in result.classes, (f"{result.summary()}; first ones:\n"
                                               + "\n".join(result.differences[:5]))
    # Every class the server is said to show is shown: none is there by assumption.
    seen = {part for cls in result.classes for part in cls.split("+")}
    assert seen == set(get_server(driver).answer_classes), result.summary()


@pytest.mark.parametrize("driver", OTHERS)
def test_store_update_is_answered(fleet: Fleet, driver: str) -> None:
    loaded, server = fleet.stores[driver], fleet.servers[driver]
    zone = next(z for z in fleet.zones if z.origin == dns.name.from_text("child.cov.test."))
    marker = dns.name.from_text(f"update-{driver}", zone.origin)
    value = f'"{time.time_ns()}"'
    changed = dataclasses.replace(zone, records=[*zone.records,
                                                 make_record(marker, 60, "TXT", value)])
    try:
        loaded.loader.update(changed, loaded.target)
        if loaded.server.needs_reload:
            server.reload()
        assert wait_for_txt(server, marker, value, 10), f"{driver} never saw the update"
    finally:
        loaded.loader.update(zone, loaded.target)
        if loaded.server.needs_reload:
            server.reload()


@pytest.mark.parametrize(("driver", "setting"), [
    ("pdns-gpgsql", "receiver-threads=3\n"), ("pdns-bind", "receiver-threads=3\n"),
    ("nsd", "server-count: 3\n"), ("knot", "udp-workers: 3\n")])
def test_thread_knob_is_the_servers_own(fleet: Fleet, run_dir: Path, driver: str,
                                        setting: str) -> None:
    loaded = fleet.stores[driver]
    server = loaded.dns_server(run_dir / "knob", threads=3)
    assert setting in server.conf_path.read_text()


def test_ctrl_c_leaves_no_server(run_root: Path) -> None:
    """Interrupted while a row of each program runs (verify keeps them all up at once); the
    rows of one program are one server class, stopped by the same code."""
    root = run_root / "interrupted"
    proc = subprocess.Popen([sys.executable, "-m", "bench", "verify", "--coverage",
                             "--servers", ",".join(ONE_OF_EACH_PROGRAM)], cwd=REPO_ROOT,
                            env=bench_env(root), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    interrupt_when(proc, lambda: all(any(program in line for line in processes_under(root))
                                     for program in PROGRAMS))
    assert processes_under(root) == []


# `serve` refuses a taken --port before it looks at the server (bench/commands/serve.py): the
# same check for every row, so one row of each program is asked.
@pytest.mark.parametrize("driver", ONE_OF_EACH_PROGRAM)
def test_port_in_use_is_refused(run_root: Path, driver: str) -> None:
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", port))
        done = subprocess.run([sys.executable, "-m", "bench", "serve", "--server", driver,
                               "--coverage", "--port", str(port)], cwd=REPO_ROOT,
                              env=bench_env(run_root / "refused"), capture_output=True,
                              text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == "" and done.stderr.splitlines() == [
        f"error: port {port} on 127.0.0.1 is in use (leave out --port to get a free one)"]
