"""A server row that is no line of the registry: the memory driver again, under a name of its
own and with a driver argument of its own, registered for this module only
(servers.registered). It goes through run, verify, writes (into its store and as RFC 2136
updates), faults, report and compare, each command run in this process as `python3 -m bench`
runs it, with nothing under bench/ knowing the row: every answer a command needs about it
comes from its kind (what it can do) and the registry (its name, its group, its order).

Real servers throughout, on the smallest data sets and shortest profiles the commands' own
tests use.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from base.errors import UserError
from bench.commands.cli import main
from bench.measure.results import Results, load_results
from servers import (
    DLZ_CEILING,
    REFERENCE,
    get_server,
    group_of,
    registered,
    report_order,
    server_names,
)
from servers.dlz import DlzNamed
from tests.benchcli import processes_under

NAME = "memory-again"
# The memory driver with a switch of its own: refuse an update whose rdata is this file's first
# line, while the file exists (drivers/memory/dlz_memory.c). It never exists here, so the row
# answers and takes updates as the memory row does, through its own driver arguments.
REFUSE_FILE = "/nonexistent/dlzbench-refuse"
ROW = DlzNamed(NAME, store="memory", library="memory", needs_reload=True,
               options={"refuse_file": REFUSE_FILE})
DATA = ["--generate", "5", "--records", "10"]


@pytest.fixture(scope="module", autouse=True)
def row(run_root: Path) -> Iterator[DlzNamed]:
    """The row registered, and the commands' servers under run_root, for this module."""
    if not ROW.is_built():
        pytest.skip("the memory driver is not built")
    with registered(ROW), pytest.MonkeyPatch.context() as patch:
        patch.setenv("DLZBENCH_RUN_DIR", str(run_root / "run"))
        yield ROW


def _bench(*args: str) -> None:
    assert main(list(args)) == 0, args


@pytest.fixture(scope="module")
def ran(run_root: Path) -> Path:
    """`run --profile tiny` over the row (and native BIND, the reference); its results."""
    out = run_root / "run-out"
    _bench("run", "--profile", "tiny", "--servers", NAME, *DATA, "--out", str(out))
    return out


def test_the_registry_knows_the_row_as_a_line_of_its_own() -> None:
    assert get_server(NAME) is ROW and server_names()[-1] == NAME
    assert group_of(NAME) == group_of(DLZ_CEILING)
    assert sorted([NAME, REFERENCE], key=report_order) == [REFERENCE, NAME]
    with pytest.raises(UserError, match="taken"):
        with registered(ROW):
            pass
    assert f"refuse_file={REFUSE_FILE}" in ROW.body(Path("/tmp/store"), 1)


def test_a_registered_row_is_gone_after_its_block() -> None:
    other = DlzNamed("memory-once", store="memory", library="memory", needs_reload=True)
    with registered(other):
        assert get_server("memory-once") is other
    with pytest.raises(UserError, match="unknown server 'memory-once'"):
        get_server("memory-once")


def test_run_measures_the_row(ran: Path) -> None:
    results = load_results(ran)
    cell = results.cell(NAME, 1)
    assert cell is not None and cell.status == "ok", cell
    assert cell.qps.median and cell.startup_ms is not None
    assert [c.server for c in results.cells] == [REFERENCE, NAME]
    assert f"| threads 1 | {REFERENCE} | {NAME} |" in (ran / "results.md").read_text()


def test_report_renders_the_row_again(ran: Path, capsys: pytest.CaptureFixture[str]) -> None:
    written = (ran / "results.md").read_text()
    capsys.readouterr()
    _bench("report", str(ran))
    assert capsys.readouterr().out == written
    assert NAME in written


def test_compare_pairs_the_rows_cells(ran: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    again = tmp_path / "again"
    shutil.copytree(ran, again)
    capsys.readouterr()
    _bench("compare", str(ran), str(again))
    assert f"| {NAME} | 1 | QPS median |" in capsys.readouterr().out


def test_verify_holds_the_row_to_the_memory_drivers_answers(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A DLZ row is asked beside the memory driver and must answer as it does (the exit
    status is 1 on any driver difference); from native BIND it differs only by BIND's DLZ
    path's known classes."""
    capsys.readouterr()
    _bench("verify", "--servers", NAME, *DATA)
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("verifying ") and f"{DLZ_CEILING}, {NAME}" in line
               for line in lines), lines
    [summary] = [line for line in lines if line.startswith(f"{NAME}: ")]
    assert int(summary.split()[1].split("/")[1]) > 0, summary
    assert "UNEXPLAINED DIFFERENCES" not in summary, summary


def _writes(run_root: Path, out: str, *extra: str) -> Results:
    _bench("writes", "--servers", NAME, "--profile", "tiny", "--generate", "10", "--records",
           "5", "--queries", "100", "--out", str(run_root / out), *extra)
    return load_results(run_root / out)


def test_writes_into_its_store_are_not_applicable(run_root: Path) -> None:
    """It reads its file once and is told of no write: n/a, as the memory row."""
    results = _writes(run_root, "writes-store")
    assert results.writes is not None
    [entry] = results.writes.servers
    assert entry.status == "n/a" and "reads its store once" in (entry.error or ""), entry


def test_writes_as_updates_are_measured(run_root: Path) -> None:
    """Its driver takes RFC 2136 updates (the memory store's loader says how): counted,
    visible, answered as native BIND answers given the same changes."""
    results = _writes(run_root, "writes-update", "--via", "update")
    assert results.writes is not None
    [entry] = results.writes.servers
    assert entry.status == "ok", entry.error
    for run in entry.runs:
        assert (run.writes > 0) == (run.rate != 0) and run.write_errors == 0, run.first_error
    assert entry.checked > 0 and entry.differing == [], entry.differing


def test_faults_restart_the_row(run_root: Path) -> None:
    out = run_root / "faults"
    _bench("faults", "--server", NAME, "--profile", "tiny", "--script", "1:server-restart",
           "--duration", "3", *DATA, "--queries", "200", "--out", str(out))
    results = load_results(out)
    assert results.faults is not None
    entry = results.faults.server(NAME)
    assert entry is not None and entry.status == "ok", entry
    [fault] = entry.faults
    assert fault.error is None and fault.note.startswith("ready "), fault
    assert f"### {NAME}" in (out / "results.md").read_text()


@pytest.mark.parametrize("script, says", [
    ("1:db-cold", "reads its data only as it starts"),
    ("1:writer-kill:0.5", "only the transactional Berkeley DB"),
    ("1:kill-backends", "has no database server"),
])
def test_faults_its_store_cannot_have_are_refused(script: str, says: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["faults", "--server", NAME, "--script", script, "--duration", "3"]) == 1
    assert says in capsys.readouterr().err


def test_nothing_the_commands_started_outlives_them(run_root: Path) -> None:
    assert processes_under(run_root) == []
