"""results.json round trip, results.md, plots and compare.

Two kinds of input, kept apart:
- `measured`: figures of real runs made here (prober floor, a tiny named probed and loaded
  by dnsperf for a second or two). They are only checked for being complete and rendered,
  never for their size: no claim of speed.
- `handwritten()`: invented numbers for every driver, to check the layout, the % columns,
  WRONG/FAILED cells and loss flags exactly. They describe no machine.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import lzma
import math
import re
import statistics
from pathlib import Path

import pytest

from base.errors import UserError
from base.paths import REPO_ROOT
from bench.commands.cli import main
from bench.commands.compare import compare
from bench.load.dnsperf import DnsperfRun, run_dnsperf, start_background
from bench.load.prober import LatencyStats, measure_floor, probe
from bench.measure import accounting, metadata
from bench.measure.cells import Cell, QpsSummary, RoundRun
from bench.measure.results import (
    SECTIONS,
    Results,
    load_results,
    read_results_file,
    results_path,
    save_results,
)
from bench.measure.rounds import update_ratios
from bench.measure.serial import to_json
from bench.measure.starts import StartDecision
from bench.measure.startup import StartupPoint
from bench.report.render import render_markdown, render_plots, write_report
from bench.report.sections import REPORTS
from servers import server_names
from tests.test_measure import tiny_named, write_query_file

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- measured figures

@pytest.fixture(scope="module")
def measured(run_dir: Path) -> Results:
    """One real cell (native BIND, 1 thread) measured the way the runner will."""
    query_file = write_query_file(run_dir)
    floor = measure_floor(100)
    with tiny_named(run_dir / "named") as named:
        startup_ms = 1000 * named.wait_answers("example.test", "SOA")
        unloaded = probe("127.0.0.1", named.port, query_file, 100)
        warmup = run_dnsperf("127.0.0.1", named.port, query_file, duration=0.5,
                             queue_depth=10)
        with accounting.CpuMeter(named.pids()) as named_cpu:
            run = run_dnsperf("127.0.0.1", named.port, query_file, duration=1,
                              queue_depth=10)
        with start_background("127.0.0.1", named.port, query_file, queue_depth=10) as load:
            loaded = probe("127.0.0.1", named.port, query_file, 100)
            loaded_run = load.stop()
        rss = accounting.peak_rss_kb(named.pids())
    cell = Cell(server="native", threads=1, connections=1, startup_ms=startup_ms,
                warmup_run=warmup, qps_runs=[run], qps=QpsSummary.from_runs([run]),
                latency_unloaded=unloaded, latency_loaded=loaded, loaded_run=loaded_run,
                cpu_us_per_query={
                    "server": accounting.us_per_query(named_cpu.seconds,
                                                     run.queries_completed),
                    "db": None,
                    "dnsperf": accounting.us_per_query(run.cpu_s, run.queries_completed)},
                peak_rss_kb={"server": rss, "db": None})
    meta = metadata.collect() | {"profile": "test", "threads": [1], "runs": 1,
                                 "duration": 1, "queue_depth": 10, "clients": 1}
    return Results(meta=meta, prober_floor=floor, cells=[cell])


def test_measured_results_round_trip(measured, tmp_path):
    path = save_results(measured, tmp_path)
    assert path.name == "results.json.xz"
    assert load_results(tmp_path).to_dict() == measured.to_dict()


def test_results_are_written_compressed_and_older_plain_files_still_read(tmp_path):
    """New files are results.json.xz; a directory of an earlier version (results.json) still
    loads, and saving into it replaces the plain file; a broken file is one clear error."""
    results = handwritten()
    older = tmp_path / "older"
    older.mkdir()
    (older / "results.json").write_text(json.dumps(results.to_dict(), indent=1) + "\n")
    assert results_path(older).name == "results.json"
    assert load_results(older).to_dict() == results.to_dict()
    assert load_results(older / "results.json").to_dict() == results.to_dict()
    assert save_results(load_results(older), older).name == "results.json.xz"
    assert sorted(p.name for p in older.iterdir()) == ["results.json.xz"]
    with lzma.open(older / "results.json.xz", "rt") as stream:
        assert json.load(stream) == results.to_dict()
    (older / "results.json.xz").write_bytes(b"not xz")
    with pytest.raises(UserError, match="cannot read .*results.json.xz"):
        load_results(older)


def test_measured_results_render(measured, tmp_path):
    markdown = write_report(measured, tmp_path)
    assert (tmp_path / "results.md").read_text() == markdown
    table = _table_after(markdown, "## 1 thread")
    assert table[0][1:] == ["native"]
    for label, value in _rows(table):
        assert value[0] not in ("", "None", "nan"), label
    assert _row(table, "QPS % of native") == ["100.0%"]
    assert "Prober floor" in markdown and "None" not in markdown
    _assert_pngs(tmp_path, ["qps.png", "latency.png", "cpu.png"])


# ---------------------------------------------------------------- hand-written figures

def _run(qps: float, sent: int = 10000, lost: int = 0) -> DnsperfRun:
    completed = sent - lost
    return DnsperfRun(argv=["handwritten"], queries_sent=sent, queries_completed=completed,
                      queries_lost=lost, rcodes={"NOERROR": completed}, run_time_s=1.0,
                      qps=qps, stopped_by="time limit")


def _latency(base_us: float) -> LatencyStats:
    return LatencyStats.from_samples([int(base_us * 1000 * (1 + i / 100)) for i in range(100)])


def handwritten() -> Results:
    """Invented numbers (no machine measured them): every driver at 1 and 2 threads."""
    qps = {"native": 10000, "memory": 8000, "pg": 400, "mysql": 600, "ldap": 80, "fs": 200,
           "bdb-btree": 1000, "bdb-hash": 900, "bdbhpt-t": 4000, "bdbhpt-c": 5000,
           "bdbhpt-p": 6000, "pdns-gpgsql": 300, "pdns-gpgsql-cached": 3000,
           "pdns-gmysql": 200, "pdns-gmysql-cached": 2500, "pdns-lmdb": 4000, "pdns-bind": 5000,
           "nsd": 12000, "knot": 11000, "pg+cache": 5000, "mysql+cache": 5000,
           "ldap+cache": 5000}
    cells = []
    for threads in (1, 2):
        for driver, value in qps.items():
            runs = [_run(value * 0.9), _run(value), _run(value * 1.1)]
            cells.append(Cell(
                server=driver, threads=threads, connections=threads, startup_ms=5.0,
                qps_runs=runs, qps=QpsSummary.from_runs(runs),
                latency_unloaded=_latency(50), latency_loaded=_latency(900),
                update_visibility_ms=None if driver == "native" else 2.5,
                cpu_us_per_query={"server": 20.0, "db": None if driver == "native" else 30.0,
                                  "dnsperf": 5.0},
                peak_rss_kb={"server": 20000, "db": None if driver == "native" else 50000}))
    _by(cells, "ldap", 2).status, _by(cells, "ldap", 2).error = "failed", "slapd exited"
    wrong = _by(cells, "fs", 2)
    wrong.status, wrong.mismatches, wrong.error = "wrong", 3, "www.example.test/A differs"
    lossy = _by(cells, "mysql", 1)
    lossy.qps_runs[1] = _run(600, sent=10000, lost=500)
    return Results(meta={"profile": "handwritten", "runs": 3, "duration": 1, "boot_id": "boot-a"},
                   prober_floor=_latency(10), cells=cells,
                   startup_scaling=[StartupPoint(d, z, startup_ms=z / 10, server_rss_kb=z + 9000,
                                                 store_bytes=z * 300)
                                    for d in ("native", "pg") for z in (10, 100, 1000)])


def _by(cells: list[Cell], driver: str, threads: int) -> Cell:
    return next(c for c in cells if (c.server, c.threads) == (driver, threads))


def _table_after(markdown: str, heading: str) -> list[list[str]]:
    """The first table after the heading line starting with `heading`, as cells."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return [rows[0]] + rows[2:]  # drop the alignment row


def _rows(table: list[list[str]]) -> list[tuple[str, list[str]]]:
    return [(row[0], row[1:]) for row in table[1:]]


def _row(table: list[list[str]], label: str) -> list[str]:
    return next(values for name, values in _rows(table) if name == label)


def _notes_after(markdown: str, heading: str) -> str:
    section = markdown.split(heading, 1)[1]
    return section.split("\n## ", 1)[0]


@pytest.mark.check
def test_tables_have_seed_003_layout_and_every_cell():
    markdown = render_markdown(handwritten())
    for threads, title in ((1, "## 1 thread "), (2, "## 2 threads ")):
        table = _table_after(markdown, title)
        assert table[0][1:] == server_names()
        assert [name for name, _ in _rows(table)] == [
            "Cost us/query (server + db)", "Cost % of native", "Cost % of memory", "QPS",
            "QPS % of native", "QPS % of memory", "QPS per server core",
            "Closed-loop loaded (us)", "Unloaded (us)", "Startup (ms)", "Update visible (ms)"]
        for name, values in _rows(table):
            assert len(values) == len(server_names()) and all(values), (threads, name)


@pytest.mark.check
def test_tables_name_their_column_groups_in_order():
    markdown = render_markdown(handwritten())
    line = next(line for line in markdown.splitlines() if line.startswith("Columns: "))
    groups = [part.split(": ")[0] for part in line.removeprefix("Columns: ").split(" | ")]
    assert groups == ["native BIND", "BIND DLZ drivers", "BIND DLZ drivers, cached",
                      "PowerDNS backends", "NSD, Knot"]
    assert "PowerDNS backends: pdns-gpgsql, pdns-gpgsql-cached, " in line


@pytest.mark.check
def test_percent_columns_come_from_the_same_run():
    table = _table_after(render_markdown(handwritten()), "## 1 thread ")
    columns = table[0][1:]
    native = dict(zip(columns, _row(table, "QPS % of native"), strict=True))
    memory = dict(zip(columns, _row(table, "QPS % of memory"), strict=True))
    assert (native["native"], native["memory"], native["pg"]) == ("100.0%", "80.0%", "4.0%")
    assert (memory["memory"], memory["pg"], memory["bdbhpt-p"]) == ("100.0%", "5.0%", "75.0%")
    qps = dict(zip(columns, _row(table, "QPS"), strict=True))
    assert qps["native"] == "10,000 (9,000–11,000)"


@pytest.mark.check
def test_wrong_and_failed_cells_show_no_number_and_give_the_reason():
    markdown = render_markdown(handwritten())
    table = _table_after(markdown, "## 2 threads ")
    columns = table[0][1:]
    for name, values in _rows(table):
        cells = dict(zip(columns, values, strict=True))
        assert re.fullmatch(r"FAILED \[\d+\]", cells["ldap"]), name
        assert re.fullmatch(r"WRONG \[\d+\]", cells["fs"]), name
    notes = _notes_after(markdown, "## 2 threads ")
    assert "ldap, 2 thread(s): FAILED: slapd exited" in notes
    assert "fs, 2 thread(s): WRONG: 3 answers differ from native BIND's" in notes
    percentiles = _table_after(markdown, "## Latency percentiles")
    failed_row = next(r for r in percentiles if r[:2] == ["ldap", "2"])
    assert set(failed_row[2:]) == {"FAILED"}


@pytest.mark.check
def test_lossy_run_is_flagged():
    markdown = render_markdown(handwritten())
    table = _table_after(markdown, "## 1 thread ")
    qps = dict(zip(table[0][1:], _row(table, "QPS"), strict=True))
    assert "⚠" in qps["mysql"] and "⚠" not in qps["pg"]
    assert "mysql, 1 thread(s): run 2 lost 5.0% of its queries (threshold 1%)" in \
        _notes_after(markdown, "## 1 thread ")


@pytest.mark.check
def test_detail_tables_are_present():
    markdown = render_markdown(handwritten())
    costs = _table_after(markdown, "## Cost per query")
    assert costs[0][:3] == ["server", "threads", "CPU us/query server"]
    assert len(costs) == 1 + 2 * len(server_names())  # every driver at 1 and 2 threads
    startup = _table_after(markdown, "## Startup against zone count")
    assert len(startup) == 1 + 6
    assert "Prober floor" in markdown


@pytest.mark.check
def test_plots_are_pngs(tmp_path):
    written = render_plots(handwritten(), tmp_path)
    assert sorted(p.name for p in written) == ["cpu.png", "latency.png", "qps.png",
                                               "startup.png"]
    _assert_pngs(tmp_path, ["cpu.png", "latency.png", "qps.png", "startup.png"])


def _assert_pngs(directory: Path, names: list[str]) -> None:
    for name in names:
        data = (directory / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name


@pytest.mark.check
def test_compare_gives_absolute_and_relative_change():
    base = handwritten()
    changed = copy.deepcopy(base)
    pg = _by(changed.cells, "pg", 1)
    pg.qps = QpsSummary(median=440, min=400, max=480)
    changed.cells.remove(_by(changed.cells, "bdb-hash", 2))
    text = compare(base, changed)
    assert "| pg | 1 | QPS median | 400 | 440 | +40.00 | +10.0% |" in text
    assert "| ldap | 2 | status | FAILED | FAILED | – | – |" in text
    assert "- bdb-hash at 2 thread(s): only in A" in text
    assert "| native | 10 zones | startup (ms) | 1.00 | 1.00 | +0.00 | +0.0% |" in text


@pytest.mark.check
def test_compare_names_what_differs_and_the_ratios_of_each_run():
    base = handwritten()
    base.meta["bind"] = "BIND 9.18.49"
    other = copy.deepcopy(base)
    other.meta["bind"] = "BIND 9.20.30"
    native = _by(other.cells, "native", 1)
    native.qps = QpsSummary(median=2 * native.qps.median, min=native.qps.min,
                            max=native.qps.max)
    text = compare(base, other)
    assert "| bind | BIND 9.18.49 | BIND 9.20.30 |" in text
    ratio = next(line for line in text.splitlines()
                 if line.startswith("| pg | 1 | QPS % of native |"))
    old, new = (float(v.rstrip("%").replace(",", "")) for v in ratio.split("|")[4:6])
    assert new == pytest.approx(old / 2, rel=0.01)
    assert "| pg | 1 | QPS % of memory |" in text
    assert "| native | 1 | QPS % of native |" not in text
    assert "Same software" in compare(base, copy.deepcopy(base))


@pytest.mark.check
def test_cli_report_and_compare(tmp_path, capsys):
    save_results(handwritten(), tmp_path / "a")
    save_results(handwritten(), tmp_path / "b")
    assert main(["report", str(tmp_path / "a")]) == 0
    printed = capsys.readouterr().out
    assert printed == (tmp_path / "a" / "results.md").read_text()
    _assert_pngs(tmp_path / "a", ["qps.png", "latency.png", "cpu.png", "startup.png"])
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "| pg | 1 | QPS median | 400 | 400 | +0.00 | +0.0% |" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "missing")]) == 1
    assert "no results found" in capsys.readouterr().err


@pytest.mark.check
def test_ctrl_c_inside_a_c_extension_import_exits_as_interrupted(tmp_path, capsys,
                                                                  monkeypatch):
    """numpy's import turns a Ctrl-C into ImportError; that is still an interrupted run."""
    def import_interrupted(*args, **kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise ImportError("initialization failed") from exc

    def import_broken(*args, **kwargs):
        raise ImportError("no module named matplotlib")

    save_results(handwritten(), tmp_path / "a")
    monkeypatch.setattr("bench.commands.report.write_report", import_interrupted)
    assert main(["report", str(tmp_path / "a")]) == 130
    assert "interrupted" in capsys.readouterr().err
    monkeypatch.setattr("bench.commands.report.write_report", import_broken)
    with pytest.raises(ImportError, match="no module named matplotlib"):
        main(["report", str(tmp_path / "a")])


@pytest.mark.check
def test_empty_results_render(tmp_path):
    markdown = write_report(Results(), tmp_path)
    assert markdown.startswith("# dlzbench results")
    _assert_pngs(tmp_path, ["qps.png", "latency.png", "cpu.png"])


def in_rounds(qps: dict[str, list[float]], dnsperf_cpu_s: float = 0.1,
              runs_per_start: int = 3) -> Results:
    """Invented cells measured in rounds: each server's QPS in rounds 0, 1, ... (runs of 1 s,
    every server started afresh every `runs_per_start` rounds), dnsperf's CPU per run (nsd's
    0.9 s), the server busy 0.95 of its one pinned core."""
    cells = []
    for server, values in qps.items():
        runs = [_run(v, sent=int(v)) for v in values]
        for run in runs:
            run.cpu_s = dnsperf_cpu_s if server != "nsd" else 0.9
        us = 0.95e6 * len(values) / sum(values)  # 0.95 of a core over the runs
        cell = Cell(server=server, threads=1, connections=1, qps_runs=runs,
                    qps_rounds=[RoundRun(i, i // runs_per_start, 0.95, None)
                                for i in range(len(values))],
                    cpu_us_per_query={"server": us, "db": None, "dnsperf": 1.0})
        cell.qps = QpsSummary.from_runs(runs)
        cells.append(cell)
    results = Results(meta={"boot_id": "boot-a", "pin": True, "server_cpus": 1,
                            "rounds": {"done": len(values), "stopped": "test", "run_s": 1,
                                       "restart_every": 5, "steady_s": 1,
                                       "steady_within": 0.1, "target": 0.05}}, cells=cells)
    update_ratios(cells, 0.05, 1)
    return results


NATIVE_RUNS = [10000.0, 9000, 11000, 10500, 9500, 10200, 9800, 10100, 9900]
PG_RUNS = [q * r for q, r in zip(NATIVE_RUNS, (0.10, 0.11, 0.09, 0.10, 0.10, 0.12, 0.08, 0.10,
                                               0.10), strict=True)]


def _start_t_interval(values: list[float], per_start: int) -> tuple[float, float, float]:
    """The geometric mean of consecutive groups' geometric means, with the 95% t interval
    over the groups, computed here from its definition."""
    from scipy.stats import t

    logs = [statistics.fmean(math.log(v) for v in values[i:i + per_start])
            for i in range(0, len(values), per_start)]
    mean = statistics.fmean(logs)
    half = t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


@pytest.mark.check
def test_qps_and_ratios_carry_their_intervals():
    results = in_rounds({"native": NATIVE_RUNS, "memory": [q * 0.5 for q in NATIVE_RUNS],
                         "pg": PG_RUNS})
    table = _table_after(render_markdown(results), "## 1 thread ")
    columns = table[0][1:]
    qps = dict(zip(columns, _row(table, "QPS"), strict=True))
    native = dict(zip(columns, _row(table, "QPS % of native"), strict=True))
    # 9 runs: median 10,000, ranks 2 and 8 of the sorted runs: [9,500–10,500].
    assert qps["native"] == "10,000 [9,500–10,500]"
    assert native["memory"] == "50.0% [50.0–50.0%]"
    # pg's ratios sorted .08 .09 .10 .10 .10 .10 .10 .11 .12: [9.0–11.0%], +-10%: missed.
    assert native["pg"].startswith("10.0% [9.0–11.0%] [")
    assert "its ratio to native's interval is wider than the +-5% target" in \
        render_markdown(results)
    # 0.95 of a core in each 1-s run: per run 0.95e6 / QPS us per query. pg's runs by start
    # (3 each): 1000, 990, 990 | 1050, 950, 1224 | 784, 1010, 990 QPS; the geometric mean of
    # the starts' geometric means with a t interval (2 degrees of freedom) over them.
    us, low, high = _start_t_interval([0.95e6 / q for q in PG_RUNS], 3)
    cost = dict(zip(columns, _row(table, "Cost us/query (server + db)"), strict=True))
    assert cost["pg"] == f"{us:,.1f} [{low:,.1f}–{high:,.1f}]"
    per_core = dict(zip(columns, _row(table, "QPS per server core"), strict=True))
    assert per_core["pg"] == f"{1e6 / us:,.0f} [{1e6 / high:,.0f}–{1e6 / low:,.0f}]"
    # A DLZ driver's cost is divided by the memory driver's, the others' by native's, each
    # in its own row (tests/test_cost.py: which runs are next to which).
    by_memory = dict(zip(columns, _row(table, "Cost % of memory"), strict=True))
    by_native = dict(zip(columns, _row(table, "Cost % of native"), strict=True))
    assert (by_native["native"], by_native["pg"], by_memory["native"]) == ("100.0%", "–", "–")
    assert by_memory["memory"] == "100.0%" and by_native["memory"].startswith("200.0% [")
    assert re.fullmatch(r"\d+\.\d% \[\d+\.\d–\d+\.\d%\]", by_memory["pg"])


@pytest.mark.check
def test_a_cell_the_load_generator_limits_is_not_ranked():
    # nsd's dnsperf used 0.9 of its core per 1-s run: its QPS is dnsperf's limit.
    results = in_rounds({"native": NATIVE_RUNS, "nsd": [q * 1.3 for q in NATIVE_RUNS]})
    table = _table_after(render_markdown(results), "## 1 thread ")
    columns = table[0][1:]
    qps = dict(zip(columns, _row(table, "QPS"), strict=True))
    assert qps["nsd"] == ">= 13,000 [12,350–13,650] (load generator)"
    assert not qps["native"].startswith(">=")
    native = dict(zip(columns, _row(table, "QPS % of native"), strict=True))
    assert native["nsd"].startswith(">= 130.0% [") and native["nsd"].endswith("(load generator)")
    # Its cost is its own, which the load generator does not limit: no bound, no mark.
    cost = dict(zip(columns, _row(table, "Cost % of native"), strict=True))
    assert cost["nsd"].startswith("76.9% [") and cost["nsd"].endswith("%]")


@pytest.mark.check
def test_the_rounds_line_says_where_the_servers_started_afresh_and_why():
    results = in_rounds({"native": NATIVE_RUNS, "pg": PG_RUNS})
    # A file from before the run chose its starts: the profile's spacing, as it was written.
    assert "every server started afresh before every 5th round and warmed up until two" in \
        render_markdown(results)
    fixed = "the profile's spacing for the first 2 starts"
    starts = [StartDecision(0, 5, 80.5, 27.5, why=fixed),
              StartDecision(5, 5, 80.5, 27.5, why=fixed)]
    results.meta["rounds"]["starts"] = to_json(starts)
    assert ("every server started afresh before rounds 1 and 6 (the profile's spacing, 5 "
            "rounds: the rounds ended before a start chose its own) and warmed up") in \
        render_markdown(results)
    starts += [StartDecision(10, 2, 80.5, 27.5, 0.0003, 0.0007, 110, 2.61),
               StartDecision(12, 5, 80.5, 27.5, 0.0, 0.001, 132)]
    results.meta["rounds"]["starts"] = to_json(starts)
    assert ("every server started afresh before rounds 1, 6, 11 and 13 (the first 2 starts 5 "
            "rounds apart; at each later start, the rounds to the next m = √((c_s / c_r) × "
            "(σ_w² / σ_b²)) within 1–5: σ_b² and σ_w² the variance of the log cost per query "
            "between starts and within one over the runs so far, c_s a fresh start's and c_r a "
            "round's expected seconds (80.5 and 27.5 s); chosen: 2 (between-start share 0.30) "
            "and 5 (no variance between starts)) and warmed up until two") in \
        render_markdown(results)


@pytest.mark.check
def test_compare_never_divides_across_boots_and_names_overlaps():
    a = in_rounds({"native": NATIVE_RUNS, "memory": [q * 0.5 for q in NATIVE_RUNS]})
    b = in_rounds({"native": [q * 1.02 for q in NATIVE_RUNS],
                   "memory": [q * 0.52 for q in NATIVE_RUNS]})
    text = compare(a, b)
    # Three fresh starts a side: too few for a verdict on figures that vary.
    assert ("| native | 1 | QPS median | 10,000 | 10,200 | undecided | shift +2.0% (no "
            "interval) |") in text
    # Each run's ratio exactly 50% in A and 0.52 / 1.02 = 50.98% in B: within +-5%.
    assert ("| memory | 1 | QPS % of native | 50.0 | 51.0 | the same | shift +2.0% [+2.0%, "
            "+2.0%] |") in text
    b.meta["boot_id"] = "boot-b"
    text = compare(a, b)
    assert ("| native | 1 | QPS median | 10,000 | 10,200 | different boot: not divided | "
            "different boot: not divided |") in text
    assert "| memory | 1 | QPS % of native | 50.0 | 51.0 | the same | shift +2.0% " in text
    assert "| boot_id | boot-a | boot-b |" in text
    b.meta["cpu_model"] = "another CPU"
    text = compare(a, b)
    assert "| memory | 1 | cost us/query (server + db) | 190.3 | 183.0 | different CPU: " \
        "not compared |" in text
    assert "cost per query: not compared (different CPU: None and another CPU)" in text


@pytest.mark.check
def test_an_added_run_from_another_boot_is_not_divided():
    first = {"boot_id": "boot-a", "date": "d1", "git_commit": "a" * 40, "git_dirty": False}
    other = metadata.added_run(first, {**first, "boot_id": "boot-b", "date": "d2"})
    point = {"servers": ["pg"], "zone_counts": [1000], "records_per_zone": 10, "seed": 1}
    markdown = render_markdown(Results(meta={**first, "added_runs": [{**other, **point}]}))
    assert "(seed 1); different boot: not divided; differs: boot_id boot-b" in markdown


@pytest.mark.check
def test_an_added_run_says_what_differs_from_the_first():
    """`--add-to` points measured on another BIND or kernel must say so beside the first run's
    figures, not sit under a claim of the same machine and versions."""
    first = {"bind": "BIND 9.18.49", "kernel": "6.18.44-a", "postgresql": "15.18", "date": "d1",
             "git_commit": "a" * 40, "git_dirty": False}
    later = {**first, "bind": "BIND 9.20.30", "date": "d2", "git_commit": "b" * 40}
    same = metadata.added_run(first, {**first, "date": "d3"})
    other = metadata.added_run(first, later)
    assert same["differs"] == {} and other["differs"] == {"bind": "BIND 9.20.30"}
    point = {"servers": ["pg"], "zone_counts": [1000], "records_per_zone": 10, "seed": 1}
    results = Results(meta={**first, "added_runs": [{**same, **point}, {**other, **point}]})
    markdown = render_markdown(results)
    assert "zones of 10 records (seed 1); same versions and machine" in markdown
    assert "(seed 1); differs: bind BIND 9.20.30" in markdown


# ---------------------------------------------------------------- the sections, committed runs

def test_every_section_is_a_field_and_has_a_report() -> None:
    """SECTIONS (results.json), the fields of Results and the report's list name the same
    sections: a new one left out of any of them fails here."""
    fields = {f.name for f in dataclasses.fields(Results)}
    assert fields == {"meta", "prober_floor", "schema", *SECTIONS}
    assert sorted(r.key for r in REPORTS) == sorted(SECTIONS)
    assert len(REPORTS) == len(SECTIONS)


COMMITTED = REPO_ROOT / "docs" / "results"


def committed_runs() -> list[Path]:
    """Every committed results directory in the results schema (`fuzz` writes a file of its
    own, with no schema)."""
    return sorted({path.parent for path in COMMITTED.rglob("results.json*")
                   if "schema" in read_results_file(path)})


def test_committed_runs_load_and_render_as_committed() -> None:
    """Every committed run loads and renders to its committed results.md: a change of the
    report is a change of every results.md it touches, made with `python3 -m bench report DIR`."""
    runs = committed_runs()
    assert len(runs) >= 86
    for run in runs:
        rendered = render_markdown(load_results(run))
        assert rendered == (run / "results.md").read_text(), run.relative_to(COMMITTED)
