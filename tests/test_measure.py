"""The measuring building blocks against real processes: prober, dnsperf, accounting, metadata.

Nothing here asserts a speed: only that figures are complete, consistent and parsed right.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dns.message
import dns.name
import dns.rdatatype
import pytest

from base import versions
from base.errors import UserError
from base.process import free_port
from bench.load.dnsperf import run_dnsperf, start_background
from bench.load.prober import LatencyStats, build_prober, measure_floor, nearest_rank, probe
from bench.measure import accounting, metadata
from servers.named import Named

ZONE = """$TTL 300
@       SOA  ns.example.test. hostmaster.example.test. 1 3600 600 86400 300
@       NS   ns
ns      A    127.0.0.1
www     A    192.0.2.1
www     AAAA 2001:db8::1
a\\.b    TXT  "dotted label"
*.wild  A    192.0.2.9
"""

# Answered (NOERROR) and NXDOMAIN questions, escapes included, in dnsperf's format.
QUERIES = """; comment lines are skipped
www.example.test A
www.example.test AAAA
a\\.b.example.test TXT
x.wild.example.test A
example.test SOA
nothing.example.test A
"""


@contextmanager
def tiny_named(directory: Path) -> Iterator[Named]:
    """A private named serving one small zone from a zone file, one thread."""
    directory.mkdir(parents=True, exist_ok=True)
    zone_file = directory / "example.test.zone"
    zone_file.write_text(ZONE)
    body = f'zone "example.test" {{ type primary; file "{zone_file}"; }};\n'
    with Named(directory, body, threads=1) as named:
        yield named


def write_query_file(directory: Path) -> Path:
    path = directory / "queries.txt"
    path.write_text(QUERIES)
    return path


@pytest.fixture(scope="module")
def named(run_dir: Path) -> Iterator[Named]:
    with tiny_named(run_dir / "named") as server:
        yield server


@pytest.fixture(scope="module")
def query_file(run_dir: Path) -> Path:
    return write_query_file(run_dir)


# ---------------------------------------------------------------- prober

def test_prober_builds():
    path = build_prober()
    assert path.is_file() and os.access(path, os.X_OK)


@pytest.mark.check
def test_nearest_rank_percentiles():
    samples = list(range(1, 101))
    assert [nearest_rank(samples, p) for p in (50, 90, 99, 100)] == [50, 90, 99, 100]
    assert nearest_rank([7], 99) == 7
    stats = LatencyStats.from_samples([3000, 1000, 2000], lost=1)
    assert (stats.count, stats.lost, stats.p50_us, stats.max_us, stats.mean_us) == \
        (3, 1, 2.0, 3.0, 2.0)


def _echo_questions(sock: socket.socket, count: int, seen: list) -> None:
    """A responder that decodes each query with dnspython and echoes it back as a reply."""
    for _ in range(count):
        data, peer = sock.recvfrom(4096)
        message = dns.message.from_wire(data)
        seen.append((message.question[0].name, message.question[0].rdtype,
                     message.question[0].rdclass, message.flags))
        sock.sendto(data[:2] + bytes([data[2] | 0x80]) + data[3:], peer)


def test_prober_builds_wire_queries_like_dnspython(run_dir):
    lines = [("a\\.b.example.test", "TXT"), ("\\065bc.example.test", "a"),
             ("sp\\032ace.example.test.", "AAAA"), (".", "NS"), ("example.test", "TYPE65"),
             ("x.test", "CAA"), ("x.test", "NAPTR"), ("x.test", "SSHFP"), ("x.test", "DS"),
             ("x.test", "HINFO"), ("x.test", "LOC"), ("x.test", "DNAME"), ("x.test", "ANY"),
             ("x.test", "MX"), ("x.test", "SOA"), ("x.test", "CNAME"), ("x.test", "PTR"),
             ("x.test", "SRV")]
    query_path = run_dir / "wire.txt"
    query_path.write_text("".join(f"{name} {rdtype}\n" for name, rdtype in lines))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        seen: list = []
        responder = threading.Thread(target=_echo_questions, args=(sock, len(lines), seen))
        responder.start()
        stats = probe("127.0.0.1", sock.getsockname()[1], query_path, len(lines), timeout=5)
        responder.join()
    assert (stats.count, stats.lost) == (len(lines), 0)
    expected = [(dns.name.from_text(name), dns.rdatatype.from_text(rdtype.upper()))
                for name, rdtype in lines]
    assert [(name, rdtype) for name, rdtype, _, _ in seen] == expected
    assert all(rdclass == 1 and flags == 0x0100 for _, _, rdclass, flags in seen)


def test_prober_rejects_a_bad_query_file(run_dir):
    bad = run_dir / "bad.txt"
    bad.write_text("www.example.test BOGUSTYPE\n")
    with pytest.raises(UserError, match="unknown type"):
        probe("127.0.0.1", 9, bad, 1)


def test_measure_floor_gives_ordered_percentiles():
    stats = measure_floor(200)
    assert stats.count == 200 and stats.lost == 0 and len(stats.samples_ns) == 200
    assert 0 < stats.min_us <= stats.p50_us <= stats.p90_us <= stats.p99_us <= stats.max_us
    assert stats.min_us <= stats.mean_us <= stats.max_us


def test_probe_against_named_answers_every_query(named, query_file):
    stats = probe("127.0.0.1", named.port, query_file, 60)
    assert (stats.count, stats.lost) == (60, 0)


def test_probe_counts_lost_queries(query_file):
    stats = probe("127.0.0.1", free_port(), query_file, 3, timeout=0.2)
    assert (stats.count, stats.lost, stats.p50_us) == (0, 3, None)


# ---------------------------------------------------------------- dnsperf

def test_dnsperf_run_parses_every_figure(named, query_file):
    run = run_dnsperf("127.0.0.1", named.port, query_file, duration=1, clients=2,
                      queue_depth=10)
    assert run.stopped_by == "time limit" and run.returncode == 0
    assert run.queries_sent > 0
    assert run.queries_completed + run.queries_lost + run.queries_interrupted == \
        run.queries_sent
    assert run.qps == pytest.approx(run.queries_completed / run.run_time_s, rel=1e-4)
    assert sum(run.rcodes.values()) == run.queries_completed
    assert run.rcodes.get("NOERROR", 0) > 0 and run.rcodes.get("NXDOMAIN", 0) > 0
    assert 0 < run.latency_min_s <= run.latency_avg_s <= run.latency_max_s
    assert run.latency_stddev_s is not None
    assert run.request_bytes > 0 and run.response_bytes > 0
    assert run.cpu_s is not None and run.cpu_s > 0
    assert "Statistics:" in run.stdout


def test_dnsperf_background_load_stops_early(named, query_file):
    with start_background("127.0.0.1", named.port, query_file, duration=60,
                          queue_depth=10) as load:
        pid = load.pid
        time.sleep(0.5)
        run = load.stop()
    assert run.stopped_by == "interruption"
    assert run.run_time_s < 30
    assert run.queries_completed > 0
    assert run.queries_completed + run.queries_lost + run.queries_interrupted == \
        run.queries_sent
    assert not Path(f"/proc/{pid}").exists()


def test_dnsperf_background_load_is_killed_without_stop(named, query_file):
    with start_background("127.0.0.1", named.port, query_file, duration=60,
                          queue_depth=10) as load:
        pid = load.pid
    assert not Path(f"/proc/{pid}").exists()


def test_dnsperf_counts_every_query_lost_without_server(query_file):
    run = run_dnsperf("127.0.0.1", free_port(), query_file, duration=0.5, timeout=0.3,
                      queue_depth=5)
    assert run.queries_completed == 0 and run.queries_lost == run.queries_sent > 0
    assert run.rcodes == {} and run.latency_stddev_s is None and run.loss_fraction == 1.0


# ---------------------------------------------------------------- accounting

BUSY = ("import time\n"
        "while time.process_time() < 0.3: pass\n")


def _spawn(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_cpu_meter_counts_a_reaped_grandchild():
    # The child runs a busy grandchild to its end (and reaps it), then idles.
    parent = _spawn("import subprocess, sys, time\n"
                    f"subprocess.run([sys.executable, '-c', {BUSY!r}])\n"
                    "print('done', flush=True)\n"
                    "time.sleep(60)\n")
    try:
        with accounting.CpuMeter([parent.pid]) as meter:
            assert parent.stdout is not None and parent.stdout.readline() == "done\n"
        assert meter.seconds >= 0.25
    finally:
        parent.kill()
        parent.wait()


def test_cpu_meter_counts_a_live_child_forked_during_the_interval():
    parent = _spawn("import subprocess, sys, time\n"
                    f"subprocess.Popen([sys.executable, '-c', {BUSY!r} + "
                    "'print(\"busy\", flush=True)\\ntime.sleep(60)'])\n"
                    "time.sleep(60)\n")
    try:
        with accounting.CpuMeter([parent.pid]) as meter:
            assert parent.stdout is not None and parent.stdout.readline() == "busy\n"
            assert len(accounting.process_tree([parent.pid])) == 2
        assert meter.seconds >= 0.25
    finally:
        for pid in accounting.process_tree([parent.pid])[1:]:
            os.kill(pid, 9)
        parent.kill()
        parent.wait()


def test_cpu_seconds_of_a_gone_process_is_zero():
    child = _spawn("pass")
    child.wait()
    assert accounting.cpu_seconds([child.pid]) == 0.0


def test_memory_figures(named):
    assert accounting.peak_rss_kb(named.pids()) > 0
    with accounting.MemorySampler(named.pids(), interval=0.05) as sampler:
        time.sleep(0.2)
    assert sampler.peak_pss_kb > 0
    assert 0 < sampler.peak_hwm_kb <= accounting.peak_rss_kb(named.pids())
    assert accounting.us_per_query(0.5, 1000) == 500.0
    assert accounting.us_per_query(0.5, 0) is None


# ---------------------------------------------------------------- metadata

def test_metadata_has_every_key():
    meta = metadata.collect()
    assert set(meta) == set(metadata.METADATA_KEYS)
    assert meta["bind"].startswith("BIND 9.")
    assert meta["dnsperf"].startswith("dnsperf 2.")
    assert meta["cpu_count"] >= 1 and meta["memory_kb"] > 0
    assert all(value not in (None, "") for key, value in meta.items() if key != "git_dirty")


def test_metadata_missing_tool_is_not_installed():
    assert versions.command_output(["/nonexistent/tool", "--version"]) == versions.NOT_INSTALLED
    assert versions.package_version("no-such-package-dlzbench") == versions.NOT_INSTALLED
