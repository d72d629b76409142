"""Every named worker is measured: the prober and dnsperf reach all of named's sockets.

named -n N listens with N UDP sockets on the same address and port (SO_REUSEPORT, one per
worker); the kernel picks one per datagram by hashing the sender's address and port. The test
freezes named (SIGSTOP) so that what each socket received stays in its receive queue, sends,
and reads the queues (`ss -uanp`): a behaviour, not a timing (docs/loaded-latency.md).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.load import dnsperf, prober
from bench.measure.runner import PROFILES, clients_for
from bench.measure.serving import serving
from servers.named import Named
from zonedata.generator import generate
from zonedata.queries import write_query_file

THREADS = 4


@pytest.fixture(scope="module")
def named(run_dir: Path) -> Iterator[Named]:
    with serving("native", lambda: generate(20), run_dir, threads=THREADS) as served:
        yield served.server


@pytest.fixture(scope="module")
def query_file(run_dir: Path) -> Path:
    path = run_dir / "queries.txt"
    for _ in write_query_file(generate(20), path, 200):
        pass
    return path


def receive_queues(named: Named) -> dict[int, int]:
    """Bytes waiting in each of named's UDP sockets on its port, by file descriptor."""
    listing = subprocess.run(["ss", "-uanp"], capture_output=True, text=True,
                             check=True).stdout
    queues = {}
    for line in listing.splitlines():
        fd = re.search(rf"pid={named.pids()[0]},fd=(\d+)", line)
        if fd and f"127.0.0.1:{named.port} " in line:
            queues[int(fd.group(1))] = int(line.split()[1])
    return queues


@contextmanager
def frozen(named: Named) -> Iterator[None]:
    """named stopped: datagrams wait in the socket the kernel chose for them."""
    pid = named.pids()[0]
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
        named.wait_answers("z000000.bench.test.", timeout=30)  # the queues are drained


def test_named_has_one_socket_per_worker(named: Named) -> None:
    assert len(receive_queues(named)) == THREADS


def test_prober_queries_leave_from_many_ports_and_reach_every_worker(
        named: Named, query_file: Path) -> None:
    with frozen(named):
        stats = prober.probe("127.0.0.1", named.port, query_file, 40, timeout=0.001)
        queues = receive_queues(named)
    assert stats.source_ports is not None and stats.source_ports >= THREADS
    assert all(queues.values()), f"a worker socket got no probe: {queues}"


def test_dnsperf_with_the_runners_clients_reaches_every_worker(
        named: Named, query_file: Path) -> None:
    clients = clients_for(PROFILES["quick"], THREADS)
    with frozen(named):
        run = dnsperf.run_dnsperf("127.0.0.1", named.port, query_file, duration=0.5,
                                  clients=clients, queue_depth=4 * clients, timeout=0.2)
        time.sleep(0.1)
        queues = receive_queues(named)
    assert run.queries_sent >= clients
    assert all(queues.values()), f"a worker socket got no dnsperf query: {queues}"
