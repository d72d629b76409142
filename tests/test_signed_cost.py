"""`run --signed` (issue 14, part 3) on the tiny profile: the same zones unsigned and signed,
every query with the DO bit, through native BIND, the memory driver and the PostgreSQL driver.
Real servers, real dnsperf; behaviour only, no timing asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from base.paths import REPO_ROOT
from bench.commands import signable_servers
from bench.load.dnsperf import DnsperfRun
from bench.measure.cells import Cell
from bench.measure.results import Results, load_results, save_results
from bench.measure.signed_cells import SignedCell
from bench.report.signed import render_signed, reply_bytes, reply_mbits
from servers import SERVERS as REGISTRY
from servers import get_server, selected_servers
from servers.dlz import DlzNamed
from servers.pdns import PdnsServer
from tests.benchcli import bench_env, processes_under, start_bench
from zonedata.zonefiles import read_zone_dir

DRIVERS = ("memory", "pg")
SERVERS = ("native", *DRIVERS)
VARIANTS = ("unsigned", "signed")


def _one_error_line(run_root: Path, *args: str) -> str:
    proc = start_bench(run_root, *args)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, output.decode(errors="replace")[-2000:]
    lines = output.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.fixture(scope="module")
def signed_run(tmp_path_factory: pytest.TempPathFactory, run_root: Path) -> Path:
    out = tmp_path_factory.mktemp("signed-run")
    proc = start_bench(run_root / "run", "run", "--signed", "--profile", "tiny", "--generate", "5",
                        "--servers", ",".join(DRIVERS), "--out", str(out))
    output, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, output.decode(errors="replace")[-3000:]
    return out


def _points(out: Path) -> dict[tuple[str, str], SignedCell]:
    return {(p.server, p.variant): p for p in load_results(out).signed}


def test_every_server_is_measured_over_both_variants(signed_run: Path,
                                                     run_root: Path) -> None:
    points = _points(signed_run)
    assert set(points) == {(s, v) for s in SERVERS for v in VARIANTS}
    for (server, variant), point in points.items():
        cell = point.cell
        assert cell.status == "ok", (server, variant, cell.error)
        assert cell.qps.median and cell.qps.median > 0
        assert cell.latency_unloaded is not None and cell.latency_unloaded.count > 0
        assert cell.latency_loaded is not None and cell.latency_loaded.count > 0
        assert cell.cpu_us_per_query["server"] and cell.cpu_us_per_query["server"] > 0
        assert point.zones == 5 and point.load_seconds is not None
        assert point.store_bytes and point.store_bytes > 0
        assert point.replies > 0 and point.reply_bytes and point.reply_bytes > 0
    assert points["pg", "signed"].cell.cpu_us_per_query["db"] is not None
    assert load_results(signed_run).cells == []
    assert processes_under(run_root / "run") == []


def test_every_query_carries_the_do_bit(signed_run: Path) -> None:
    for point in _points(signed_run).values():
        runs = [*point.cell.qps_runs, point.cell.warmup_run, point.cell.loaded_run]
        assert all(run is not None and "-D" in run.argv for run in runs)


def test_stores_hold_more_when_signed(signed_run: Path) -> None:
    points = _points(signed_run)
    for server in SERVERS:
        unsigned, signed = points[server, "unsigned"], points[server, "signed"]
        assert signed.records > unsigned.records, server
    # Stores whose files are nothing but the data (a database server's files also hold its
    # logs and preallocated WAL, which a few kilobytes of signatures need not change).
    for server in ("native", "memory"):
        assert points[server, "signed"].store_bytes > points[server, "unsigned"].store_bytes


def test_native_signed_replies_are_larger_and_dlz_ones_are_not_signed(
        signed_run: Path) -> None:
    """With DO native BIND adds signatures and proofs; a DLZ driver adds neither, so its
    signed replies stay smaller than native BIND's."""
    points = _points(signed_run)
    native_unsigned = reply_bytes(points["native", "unsigned"])
    native_signed = reply_bytes(points["native", "signed"])
    assert native_unsigned and native_signed and native_signed > native_unsigned
    assert points["native", "signed"].reply_bytes > points["native", "unsigned"].reply_bytes
    for driver in DRIVERS:
        dlz_signed = reply_bytes(points[driver, "signed"])
        assert dlz_signed and dlz_signed < native_signed, driver


def test_report_has_a_table_per_driver_and_the_plot(signed_run: Path) -> None:
    markdown = (signed_run / "results.md").read_text()
    assert "## Signed vs unsigned (run --signed)" in markdown
    for server in SERVERS:
        assert f"### {server}, 1 thread\n" in markdown
    assert "## 1 thread" not in markdown  # run's own tables are not rendered empty
    assert (signed_run / "signed.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_data_that_cannot_be_signed_is_one_error_line(tmp_path: Path, run_root: Path) -> None:
    root = run_root / "bad"
    line = _one_error_line(root, "run", "--signed", "--nsec3", "--coverage", "--profile",
                           "tiny", "--servers", "memory")
    assert line.startswith("error: signing zone cov.test.: dnssec-signzone failed"), line
    signed_dir = tmp_path / "signed"
    done = subprocess.run([sys.executable, "-m", "bench", "generate", "--zones", "2", "--signed",
                           "--queries", "0", "--out", str(signed_dir)], cwd=REPO_ROOT,
                          env=bench_env(root), capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    line = _one_error_line(root, "run", "--signed", "--zones", str(signed_dir), "--profile",
                           "tiny", "--servers", "memory")
    # The first zone read (shard directories are hashed: not necessarily z000000).
    first = next(read_zone_dir(signed_dir)).origin
    assert line.startswith(f"error: zone {first} is signed already (it holds DNSKEY, "), line
    assert _one_error_line(root, "run", "--nsec3", "--profile", "tiny") == \
        "error: --nsec3 only applies to --signed"
    assert processes_under(root) == []


def test_a_server_that_cannot_serve_signed_zones_is_one_error_line(run_root: Path) -> None:
    line = _one_error_line(run_root / "pdns", "run", "--signed", "--profile", "tiny",
                           "--servers", "memory,pdns-gpgsql")
    assert line.startswith("error: run --signed cannot measure pdns-gpgsql: PowerDNS serves "
                           "stored RRSIGs only for zones marked PRESIGNED"), line


@pytest.mark.check
def test_all_is_every_server_that_can_serve_a_signed_zone(
        capsys: pytest.CaptureFixture[str]) -> None:
    chosen = signable_servers("all", "run --signed")
    assert chosen == [name for name in selected_servers("all")
                      if get_server(name).cannot_serve_signed is None]
    pdns = [s.name for s in REGISTRY if isinstance(s, PdnsServer)]
    assert pdns and not set(pdns) & set(chosen)
    assert "native" in chosen
    built_dlz = [s.name for s in REGISTRY if isinstance(s, DlzNamed) and s.is_built()]
    assert set(built_dlz) <= set(chosen)
    # NSD and Knot read the signed zone files as they read any other.
    assert {"nsd", "knot"} & set(selected_servers("all")) <= set(chosen)
    note = capsys.readouterr().out.strip().splitlines()
    assert len(note) == 1 and note[0].startswith("run --signed leaves out pdns-"), note


# --- the report's figures on hand-written results (no server) ---------------------------------


def _point(variant: str, response_bytes: float) -> SignedCell:
    run = DnsperfRun(argv=["dnsperf", "-D"], queries_completed=1000, response_bytes=response_bytes,
                     run_time_s=2.0, qps=500.0, latency_avg_s=0.0001)
    cell = Cell("native", 1, 1, qps_runs=[run, run])
    return SignedCell(variant, cell, zones=1, records=10 if variant == "unsigned" else 30,
                      store_bytes=4096, load_seconds=0.5, replies=50, truncated=2,
                      reply_bytes=response_bytes)


@pytest.mark.check
def test_reply_figures_are_dnsperfs_own(tmp_path: Path) -> None:
    point = _point("signed", 250.0)
    assert reply_bytes(point) == 250.0
    assert reply_mbits(point) == pytest.approx(250 * 2000 * 8 / 4.0 / 1e6)
    results = Results(meta={"signed": {"algorithm": "ECDSAP256SHA256", "chain": "NSEC"}},
                      signed=[_point("unsigned", 100.0), point])
    save_results(results, tmp_path)
    again = load_results(tmp_path)
    assert again.signed == results.signed
    markdown = "\n".join(render_signed(again))
    assert "| reply size (bytes, dnsperf) | 100 | 250 | +150.0% |" in markdown
    assert "| records held | 10 | 30 | +200.0% |" in markdown
    assert "| UDP replies truncated (check queries) | 2 of 50 | 2 of 50 | – |" in markdown
