"""`bench startup` scaled down: the same code path as a million zones, at 200 and 2,000.

Checks that named answered for the last zone with every driver, that every figure is there, and
that each loader's peak memory stays flat when the zone count grows tenfold (the rows in two
runs at once, each store's in one of them). No speed asserted.
"""

from __future__ import annotations

import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from base.paths import REPO_ROOT
from bench.measure.results import load_results
from bench.measure.startup import StartupPoint, combined
from servers import SERVERS, get_server
from tests.at_once import results_at_once
from tests.benchcli import bench_env

TINY, SMALL, LARGE = 100, 200, 2000
STARTS = 2


def _startup(run_root: Path, *args: str) -> None:
    """`python3 -m bench startup ...`, which must succeed."""
    done = subprocess.run([sys.executable, "-m", "bench", "startup", *args], cwd=REPO_ROOT,
                          env=bench_env(run_root),
                          capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def _built_drivers() -> list[str]:
    return [s.name for s in SERVERS if s.is_built()]


def _halves_by_store(servers: list[str]) -> list[tuple[str, ...]]:
    """The servers in two halves, every server of a store in the same one, so that each store
    is loaded once at each count (split server by server, 5 of the 11 stores were loaded in
    both runs); each store goes to the half with less to do so far, a load counted as two
    servers' starts."""
    stores: dict[str, list[str]] = {}
    for name in servers:
        stores.setdefault(get_server(name).store, []).append(name)
    halves: list[list[str]] = [[], []]
    work = [0, 0]
    for members in stores.values():
        lighter = work.index(min(work))
        halves[lighter] += members
        work[lighter] += 2 + len(members)
    return [tuple(half) for half in halves if half]


@pytest.fixture(scope="module")
def startup_runs(tmp_path_factory: pytest.TempPathFactory,
                 run_root: Path) -> dict[tuple[str, ...], Path]:
    """Every row at both counts, half of the rows in each of two `startup` runs made at once
    (each with servers of its own), the rows of a store in one run: a row mostly waits on its
    database server and the load into it, so the two overlap. Each run's results directory,
    by its servers."""
    halves = _halves_by_store(_built_drivers())
    outs = {half: tmp_path_factory.mktemp("startup") for half in halves}
    results_at_once({half: partial(_startup, run_root, "--zones-counts", f"{SMALL},{LARGE}",
                                   "--servers", ",".join(half), "--starts", str(STARTS),
                                   "--out", str(out))
                     for half, out in outs.items()})
    return outs


@pytest.fixture(scope="module")
def startup_run(startup_runs: dict[tuple[str, ...], Path]) -> Path:
    """The run that measured the memory driver, which a later run adds to."""
    return next(out for servers, out in startup_runs.items() if "memory" in servers)


def test_last_zone_answers_with_every_driver(
        startup_runs: dict[tuple[str, ...], Path]) -> None:
    assert sorted(s for servers in startup_runs for s in servers) == sorted(_built_drivers())
    for servers, out in startup_runs.items():
        points = load_results(out).startup_scaling
        assert sorted((p.server, p.zones) for p in points) == sorted(
            (d, n) for d in servers for n in (SMALL, LARGE))
        for p in points:
            assert p.status == "ok", (p.server, p.zones, p.error)
            assert p.startup_ms and p.server_rss_kb and p.store_bytes
            assert p.load_seconds and p.records_per_second and p.loader_rss_kb


def test_each_point_is_its_starts_with_an_interval(
        startup_runs: dict[tuple[str, ...], Path]) -> None:
    for out in startup_runs.values():
        for p in load_results(out).startup_scaling:
            assert len(p.starts_ms) == STARTS, (p.server, p.zones, p.starts_ms)
            interval = p.interval()
            assert interval is not None and interval.n == STARTS
            assert interval.low is not None and interval.high is not None
            assert interval.low <= p.startup_ms <= interval.high
            assert min(p.starts_ms) <= p.startup_ms <= max(p.starts_ms)
        assert f"A point is {STARTS} fresh starts" in (out / "results.md").read_text()


def test_loader_memory_is_flat_for_ten_times_the_zones(
        startup_runs: dict[tuple[str, ...], Path]) -> None:
    rss = {(p.server, p.zones): p.loader_rss_kb
           for out in startup_runs.values() for p in load_results(out).startup_scaling}
    for driver in _built_drivers():
        small, large = rss[driver, SMALL], rss[driver, LARGE]
        assert large <= small * 1.15 + 8 * 1024, (driver, small, large)


def test_each_report_has_the_scaling_table_and_plot(
        startup_runs: dict[tuple[str, ...], Path]) -> None:
    for out in startup_runs.values():
        markdown = (out / "results.md").read_text()
        assert "## Startup against zone count" in markdown
        assert "## 1 thread" not in markdown  # no QPS tables in a startup-only run
        assert "dnsperf runs" not in markdown  # nor their method
        assert (out / "startup.png").read_bytes()[:4] == b"\x89PNG"


def test_a_later_run_adds_its_points(startup_run: Path, run_root: Path) -> None:
    before = load_results(startup_run).startup_scaling
    _startup(run_root, "--zones-counts", f"{TINY},{SMALL}", "--servers", "memory", "--add-to",
             str(startup_run))
    results = load_results(startup_run)
    after = {(p.server, p.zones): p for p in results.startup_scaling}
    assert set(after) == {(p.server, p.zones) for p in before} | {("memory", TINY)}
    assert after["memory", TINY].status == "ok"
    assert [r["servers"] for r in results.meta["added_runs"]] == [["memory"]]
    assert results.meta["added_runs"][0]["differs"] == {}  # the same machine, minutes later
    assert "same versions and machine" in (startup_run / "results.md").read_text()


def test_a_named_still_loading_at_the_timeout_is_a_result(tmp_path: Path,
                                                          run_root: Path) -> None:
    _startup(run_root, "--zones-counts", str(TINY), "--servers", "native", "--timeout", "0.001",
             "--starts", "3", "--out", str(tmp_path))
    [point] = load_results(tmp_path).startup_scaling
    assert point.status == "timeout", point
    assert not point.starts_ms and point.interval() is None
    assert point.startup_ms is None and point.server_rss_kb, point
    assert "TIMEOUT" in (tmp_path / "results.md").read_text()


def test_a_failed_start_is_the_point_and_times_combine_geometrically() -> None:
    ok = [StartupPoint("pg", 10, startup_ms=ms, server_rss_kb=kb)
          for ms, kb in ((100.0, 5), (400.0, 7))]
    point = combined(ok)
    assert point.startup_ms == pytest.approx(200.0) and point.server_rss_kb == 7
    assert point.starts_ms == [100.0, 400.0]
    late = StartupPoint("pg", 10, status="timeout", error="no answer", server_rss_kb=9)
    assert combined([*ok, late]) is late
