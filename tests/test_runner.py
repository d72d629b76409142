"""The runner end to end on the tiny profile (2 rounds, a fresh start before each): real
servers, real dnsperf, every figure present.

No test here asserts a speed: only that each figure exists, is consistent with the raw runs it
came from, and that an interrupted run (made at the same time, with servers of its own) stops
every process and keeps what it gathered.
"""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

from base.errors import UserError
from bench.measure.catalogue import figures_of
from bench.measure.results import load_results
from servers import get_server
from tests.benchcli import interrupt_when, processes_under, start_bench

# native BIND plus one driver of each family, and native BIND 9.20 (Debian 13's, from the
# root every machine has for dnsperf 2.14) interleaved with 9.18's in the same rounds.
DRIVERS = ["native", "memory", "pg", "ldap", "fs", "bdbhpt-c", "native@9.20"]


@dataclass
class Interrupted:
    """The Ctrl-C'ed run: its results directory, the processes left under its run root once
    it had exited, and what went wrong interrupting it (None: it ended with status 130)."""

    out: Path
    left: list[str]
    failure: BaseException | None


def _interrupted_run(run_root: Path, out: Path) -> Interrupted:
    """A tiny run of native and pg, Ctrl-C'ed once the first round is saved, with PostgreSQL
    running for the second."""
    proc = start_bench(run_root, "run", "--profile", "tiny", "--servers", "native,pg", "--out",
                       str(out))
    try:
        interrupt_when(proc, lambda: _rounds_saved(out) >= 1
                       and any("postgres -D" in c for c in processes_under(run_root)))
    except Exception as failure:  # an assertion of interrupt_when's, or its time-out
        return Interrupted(out, processes_under(run_root), failure)
    return Interrupted(out, processes_under(run_root), None)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory,
         run_root: Path) -> tuple[subprocess.Popen[bytes], bytes, Path, Interrupted]:
    """The tiny run of DRIVERS and, made at the same time with servers of its own, the run the
    Ctrl-C test interrupts: both are mostly fixed-length dnsperf runs and servers' starts, so
    they overlap (one after the other: 53 s of the suite on 2 vCPUs)."""
    missing = [d for d in DRIVERS if not get_server(d).is_built()]
    assert not missing, f"drivers not built: {missing} (run `make build`)"
    out = tmp_path_factory.mktemp("tiny")
    proc = start_bench(run_root / "tiny", "run", "--profile", "tiny", "--servers",
                       ",".join(DRIVERS), "--out", str(out))
    with ThreadPoolExecutor(1) as pool:
        interrupted = pool.submit(_interrupted_run, run_root / "ctrl-c",
                                  tmp_path_factory.mktemp("ctrl-c") / "out")
        output, _ = proc.communicate(timeout=900)
        ctrl_c = interrupted.result()
    return proc, output, out, ctrl_c


@pytest.fixture(scope="module")
def tiny_run(runs: tuple[subprocess.Popen[bytes], bytes, Path, Interrupted]) -> Path:
    proc, output, out, _ = runs
    assert proc.returncode == 0, output.decode(errors="replace")[-3000:]
    return out


def test_every_cell_has_every_figure(tiny_run: Path) -> None:
    results = load_results(tiny_run)
    assert sorted(c.server for c in results.cells) == sorted(DRIVERS)
    for cell in results.cells:
        assert cell.status == "ok", (cell.server, cell.error)
        assert cell.startup_ms is not None and cell.startup_ms > 0
        assert len(cell.qps_runs) == 2
        assert [r.round for r in cell.qps_rounds] == [0, 1]
        # Two fresh starts, before round 0 and round 1, each warmed up.
        assert [s.round for s in cell.starts] == [0, 1]
        assert [r.start for r in cell.qps_rounds] == [0, 1]
        assert all(2 <= len(s.warmup_runs) <= 3 for s in cell.starts)
        assert all(s.steady == (len(s.warmup_runs) >= 2 and abs(
            s.warmup_runs[-1].qps / s.warmup_runs[-2].qps - 1) <= 0.10) for s in cell.starts)
        assert cell.latency_unloaded is not None and cell.latency_loaded is not None
        assert cell.update_visibility_ms is not None, (cell.server, cell.error)
        # The tiny profile's 2 updates, each timed; the figure is their median.
        assert len(cell.update_visibility_runs_ms) == 2, cell.update_visibility_runs_ms
        assert cell.update_visibility_ms == pytest.approx(
            sum(cell.update_visibility_runs_ms) / 2)
        assert cell.cpu_us_per_query["server"] and cell.cpu_us_per_query["dnsperf"]
        assert cell.peak_rss_kb["server"]
        has_db = get_server(cell.server).loader().database.has_server
        assert (cell.cpu_us_per_query["db"] is not None) == has_db
    assert results.prober_floor is not None and results.prober_floor.count == 100
    assert results.meta["rounds"]["done"] == 2 and results.meta["boot_id"]
    # tiny starts afresh before every round (restart_every 1): both starts at the profile's
    # spacing, recorded with the seconds a start and a round were expected to take.
    starts = results.meta["rounds"]["starts"]
    assert [(d["round"], d["runs_per_start"]) for d in starts] == [(0, 1), (1, 1)]
    assert all(d["why"] and d["start_s"] > d["round_s"] > 0 for d in starts)
    calibration = results.meta["calibration"]
    native = results.cell("native", 1).qps_by_round()
    assert (calibration["first_round_qps"], calibration["last_round_qps"]) == (native[0], native[1])
    for key in ("bind", "postgresql", "mariadb", "slapd", "berkeley_db", "dnsperf", "cpu_model"):
        assert results.meta.get(key), key


def test_figures_agree_with_raw_runs(tiny_run: Path) -> None:
    for cell in load_results(tiny_run).cells:
        for run in cell.qps_runs:
            assert run.queries_completed > 0
            assert run.qps == pytest.approx(run.queries_completed / run.run_time_s, rel=0.01)
        medians = sorted(r.qps for r in cell.qps_runs)
        assert cell.qps.min == medians[0] and cell.qps.max == medians[-1]
        assert cell.qps.min <= cell.qps.median <= cell.qps.max
        # 2 runs are too few for a 95% interval; the report says so instead of inventing one.
        assert cell.qps.low is None and cell.qps.high is None
        answered = sum(r.queries_completed for r in cell.qps_runs)
        named_s = sum(r.server_cpu_s for r in cell.qps_rounds)
        assert cell.cpu_us_per_query["server"] == pytest.approx(named_s * 1e6 / answered)
        for stats in (cell.latency_unloaded, cell.latency_loaded):
            assert stats.p50_us <= stats.p90_us <= stats.p99_us <= stats.max_us
            assert stats.count + stats.lost == 100


def test_every_run_records_its_span_its_cpu_split_and_the_machine(tiny_run: Path) -> None:
    """What the cost per query and its ratio are made of, and what says the machine moved:
    each QPS run's monotonic span (the runs of a round one after another, round after round),
    the server's and the database's CPU split into user and system time, every CPU's time
    over the run, and dnsperf asked for its responses per second."""
    results = load_results(tiny_run)
    spans = []
    for cell in results.cells:
        has_db = get_server(cell.server).loader().database.has_server
        for where, run in zip(cell.qps_rounds, cell.qps_runs, strict=True):
            assert where.began_s is not None and where.ended_s is not None
            assert where.began_s < where.ended_s
            spans.append((where.began_s, where.ended_s, where.round))
            assert where.server_user_s is not None and where.server_system_s is not None
            assert where.server_user_s + where.server_system_s == pytest.approx(
                where.server_cpu_s)
            assert (where.db_user_s is not None) == (where.db_system_s is not None) == has_db
            if has_db:
                assert where.db_user_s + where.db_system_s == pytest.approx(where.db_cpu_s)
            assert where.cpus and all(t.total > 0 for t in where.cpus)
            assert "-S" in run.argv and run.argv[run.argv.index("-S") + 1] == "1"
    spans.sort()
    assert all(end <= after for (_, end, _), (after, _, _) in pairwise(spans))
    assert [r for *_, r in spans] == sorted(r for *_, r in spans)  # round after round
    markdown = (tiny_run / "results.md").read_text()
    assert "| Cost us/query (server + db) |" in markdown
    cost = next(ln for ln in markdown.splitlines() if ln.startswith("| Cost us/query"))
    # Two rounds, a fresh start before each: an interval over the two starts in every cell.
    assert cost.count(" [") == len(DRIVERS), cost
    assert "| server user | server system | db user | db system |" in markdown


def test_ratios_pair_the_runs_of_each_round(tiny_run: Path) -> None:
    results = load_results(tiny_run)
    native = results.cell("native", 1).qps_by_round()
    memory = results.cell("memory", 1).qps_by_round()
    for cell in results.cells:
        mine = cell.qps_by_round()
        expected = {"native": native, "memory": memory}
        assert set(cell.ratios) == {"native", "memory"} - {cell.server}
        for reference, ratio in cell.ratios.items():
            pairs = sorted(mine[r] / expected[reference][r] for r in (0, 1))
            assert ratio.n == 2 and ratio.estimate == pytest.approx(sum(pairs) / 2)
            assert not cell.ratio_target_met[reference]  # no interval from 2 rounds


def test_a_row_on_another_bind_runs_it_and_pairs_with_its_own_row(tiny_run: Path,
                                                                  run_root: Path) -> None:
    results = load_results(tiny_run)
    assert results.meta["other_binds"]["9.20"].startswith("BIND 9.20"), results.meta
    assert results.meta["bind"].startswith("BIND 9.18")
    [run_dir] = (run_root / "tiny").glob("bench-*")
    assert b"starting BIND 9.20" in (run_dir / "named-native@9.20-1" / "named.log").read_bytes()
    assert b"starting BIND 9.18" in (run_dir / "named-native-1" / "named.log").read_bytes()
    row = results.cell("native@9.20", 1)
    assert row.ratios["native"].n == 2  # paired round by round with its own row on 9.18
    markdown = (tiny_run / "results.md").read_text()
    [line] = [ln for ln in markdown.splitlines()
              if ln.startswith("| QPS % of its row on BIND 9.18")]
    cells = [c.strip() for c in line.strip("|").split("|")][1:]
    columns = [c.strip() for c in next(ln for ln in markdown.splitlines()
                                        if ln.startswith("| threads 1")).strip("|").split("|")][1:]
    by_column = dict(zip(columns, cells, strict=True))
    assert by_column["native"] == "100.0%" and by_column["memory"] == "–"
    # Its paired ratio (2 rounds: no interval; bounded, or n/a, where the load generator
    # limited one row or both), never the dash of a row without one.
    paired = by_column["native@9.20"]
    assert "% (2 runs: no 95% interval)" in paired or paired.startswith("n/a (load generator"), \
        by_column
    # Its cost against its own row's runs next to it: a load generator's limit leaves the
    # cost per query standing.
    [line] = [ln for ln in markdown.splitlines()
              if ln.startswith("| Cost % of its row on BIND 9.18")]
    costs = dict(zip(columns, [c.strip() for c in line.strip("|").split("|")][1:], strict=True))
    assert costs["native"] == "100.0%" and costs["memory"] == "–", costs
    assert re.match(r"[\d.]+%", costs["native@9.20"]), costs
    [figure] = [f for f in figures_of(results) if f.metric == "cost.bind"]
    assert figure.server == "native@9.20" and figure.number and figure.number > 0


def test_report_and_plots_written(tiny_run: Path) -> None:
    markdown = (tiny_run / "results.md").read_text()
    for driver in DRIVERS:
        assert f"| {driver}" in markdown or f" {driver} |" in markdown, driver
    assert "% of native" in markdown and "% of memory" in markdown
    # Two fresh starts and two updates a cell: medians, too few for an interval, said so.
    startup = next(ln for ln in markdown.splitlines() if ln.startswith("| Startup (ms)"))
    assert startup.count("(2 starts: no 95% interval)") == len(DRIVERS), startup
    update = next(ln for ln in markdown.splitlines() if ln.startswith("| Update visible"))
    assert update.count("(2 updates: no 95% interval)") == len(DRIVERS), update
    for png in ("qps.png", "latency.png", "cpu.png"):
        assert (tiny_run / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_keeps_logs_and_deletes_loaded_data(tiny_run: Path, run_root: Path) -> None:
    [run_dir] = (run_root / "tiny").glob("bench-*")
    for store in {get_server(d).store for d in DRIVERS}:
        left = [p for p in (run_dir / store).rglob("*") if p.is_file() or p.is_symlink()]
        assert all(p.suffix == ".log" for p in left), f"{store} data left: {left[:5]}"
    assert (run_dir / "pg" / "postgres.log").stat().st_size > 0
    assert (run_dir / "ldap" / "slapd.log").exists()
    assert all((run_dir / f"named-{d}-1" / "named.log").exists() for d in DRIVERS)


def test_ctrl_c_stops_everything_and_keeps_results(
        runs: tuple[subprocess.Popen[bytes], bytes, Path, Interrupted]) -> None:
    interrupted = runs[3]
    if interrupted.failure is not None:
        raise interrupted.failure
    assert interrupted.left == []
    out = interrupted.out
    cells = load_results(out).cells
    assert [(c.server, c.status) for c in cells][:1] == [("native", "ok")]
    assert cells[0].qps_rounds and cells[0].qps_rounds[0].round == 0, \
        "the runs measured before Ctrl-C are kept"
    assert (out / "results.md").exists()


def _rounds_saved(out: Path) -> int:
    """Rounds the native cell of a results directory has runs of (0 before any is saved)."""
    try:
        cells = load_results(out).cells
    except UserError:  # not written yet
        return 0
    return len(cells[0].qps_rounds) if cells else 0
