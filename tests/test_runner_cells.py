"""The runner's "failed" and "wrong" cells, fast: the memory driver's outage switch (a file
whose presence makes every backend call fail, as a database that is down) instead of a broken
database. No mocks: real named, real memory driver, real dnsperf.

- down from the start: named never answers for the last zone, so the cell is FAILED at startup;
- down right after startup (a phase added to the runner's own phase table): the answers check
  sees SERVFAIL where native BIND answers, so the cell is WRONG and is not timed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.measure.results import Results
from bench.measure.runner import (
    PHASES,
    PROFILES,
    STARTUP,
    Measuring,
    Phase,
    Runner,
    Setup,
    inserted_after,
)
from servers import REFERENCE, get_server
from servers.dlz import DlzNamed
from zonedata.generator import generate
from zonedata.queries import write_query_file

# The tiny profile, with a short wait for a server that will never answer.
PROFILE = dataclasses.replace(PROFILES["tiny"], startup_timeout_s=3.0)


@dataclass(frozen=True)
class MemoryWithOutage(DlzNamed):
    """The memory driver, told to fail every call while `outage` exists."""

    outage: Path = Path("/nonexistent")

    def body(self, target: Any, connections: int, *, library: Path | None = None,
             extra: Mapping[str, str] | None = None) -> str:
        return super().body(target, connections, library=library,
                            extra={**(extra or {}), "outage_file": str(self.outage)})


def _down(name: str, outage: Path) -> MemoryWithOutage:
    return MemoryWithOutage(name, store="memory", library="memory", needs_reload=True,
                            outage=outage)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory, run_dir: Path) -> Results:
    work = tmp_path_factory.mktemp("cells")
    down_from_start = work / "down-from-start"
    down_from_start.touch()
    down_after_startup = work / "down-after-startup"

    def database_goes_down(runner: Runner, m: Measuring) -> None:
        if m.loaded.server.name == "memory-down-after-startup":
            down_after_startup.touch()

    def stream() -> Any:
        return generate(PROFILE.zones, PROFILE.records)

    query_file = work / "queries.txt"
    for _ in write_query_file(stream(), query_file, PROFILE.queries):
        pass
    setup = Setup(reference=get_server(REFERENCE),
                  servers=[_down("memory-down-from-start", down_from_start),
                           _down("memory-down-after-startup", down_after_startup)],
                  stream=stream, dataset="tiny", query_file=query_file, run_dir=run_dir,
                  out_dir=work / "out", threads=(1,), pin=False)
    phases = inserted_after(PHASES, STARTUP,
                            Phase("database goes down", lambda p: 0.0, database_goes_down))
    return Runner(PROFILE, setup, Results(), phases=phases).run()


def _cell(results: Results, driver: str) -> Any:
    cell = results.cell(driver, 1)
    assert cell is not None, driver
    return cell


def test_reference_is_measured_whole(results: Results) -> None:
    native = _cell(results, REFERENCE)
    assert native.status == "ok" and native.qps.median and native.latency_loaded is not None


def test_server_down_from_the_start_is_failed_at_startup(results: Results) -> None:
    cell = _cell(results, "memory-down-from-start")
    assert cell.status == "failed"
    assert "authoritative answer" in (cell.error or "")  # named exits, or never answers
    assert cell.startup_ms is None and not cell.qps_runs and cell.warmup_run is None


def test_server_that_answers_wrongly_is_wrong_and_not_timed(results: Results) -> None:
    cell = _cell(results, "memory-down-after-startup")
    assert cell.status == "wrong"
    assert cell.startup_ms is not None
    assert cell.mismatches == PROFILE.check_queries
    assert cell.warmup_run is None and not cell.qps_runs and cell.latency_unloaded is None


def test_every_cell_is_saved(results: Results) -> None:
    assert [c.server for c in results.cells] == [
        REFERENCE, "memory-down-from-start", "memory-down-after-startup"]
