"""`instructions`: Valgrind's instructions per answered query (bench/measure/instructions.py).

The command is run for real (named under callgrind, slapd under callgrind for ldap) on a tiny
data set, in two runs at once; the report section is also rendered from a synthetic file.
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path

import pytest

from base.paths import REPO_ROOT
from bench.measure.instructions import (
    Counted,
    Instructions,
    Repeat,
    ServerInstructions,
)
from bench.measure.results import Results, load_results, read_results_file, save_results
from bench.report.render import render_markdown
from tests.at_once import results_at_once
from tests.benchcli import processes_under, run_bench

# Two repeats are two fresh named processes counting the same queries: what differs between
# them is the start (hash seeds, memory layout, what the warm-up left), not the machine's
# speed, which instructions do not see. Measured here at 0.08-0.35% for native, memory and
# ldap over 200 queries; the bound is loose because a 50-query set weighs each query's
# differences four times as much, and it still catches a method that counts time (this VM's
# speed drifts 2x between boots) or a window that misses part of the queries.
AGREEMENT_BOUND = 0.05

needs_valgrind = pytest.mark.skipif(shutil.which("callgrind_control") is None,
                                    reason="valgrind is not installed")


# The runs: native and memory in one (their figures are compared, so inside one run), ldap in
# another (slapd under callgrind too), the two at once, each with servers of its own. Each is
# one process under callgrind at a time, one core's work, so on 2 cores the pair takes about
# the longer run's time: all three in one command took 113 s of the suite (2 vCPUs).
RUNS = (("native", "memory"), ("ldap",))


def _count(root: Path, servers: tuple[str, ...]) -> Results:
    """The servers counted twice each over 50 queries of 5 small zones, in one command."""
    root.mkdir()
    out = root / "out"
    done = run_bench(root, "instructions", "--servers", ",".join(servers), "--generate", "5",
                     "--records", "10", "--queries", "50", "--repeat", "2", "--idle", "1",
                     "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert not processes_under(root), "a server outlived the command"
    return load_results(out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], Results]:
    """Each of RUNS' results, the runs made at once."""
    root = tmp_path_factory.mktemp("instructions")
    return results_at_once({servers: partial(_count, root / "-".join(servers), servers)
                            for servers in RUNS})


@pytest.fixture(scope="module")
def counted(runs: dict[tuple[str, ...], Results]) -> dict[str, Results]:
    """The results of the run that counted each server, by server."""
    return {server: results for servers, results in runs.items() for server in servers}


def _entry(results: Results, server: str) -> ServerInstructions:
    assert results.instructions is not None
    entry = results.instructions.server(server)
    assert entry is not None and entry.status == "ok", entry
    return entry


@needs_valgrind
@pytest.mark.parametrize("server", ["native", "memory", "ldap"])
def test_every_query_is_answered_and_costs_instructions(counted: dict[str, Results],
                                                        server: str) -> None:
    entry = _entry(counted[server], server)
    assert len(entry.repeats) == 2
    for repeat in entry.repeats:
        assert repeat.answered == repeat.sent == 50
        assert repeat.named_per_query is not None and repeat.named_per_query > 0


@needs_valgrind
@pytest.mark.parametrize("server", ["native", "memory", "ldap"])
def test_two_fresh_named_agree(counted: dict[str, Results], server: str) -> None:
    agreement = _entry(counted[server], server).agreement("total")
    assert agreement is not None and agreement < AGREEMENT_BOUND


@needs_valgrind
def test_the_database_is_counted_where_it_runs_under_valgrind(
        counted: dict[str, Results]) -> None:
    ldap = _entry(counted["ldap"], "ldap")
    assert ldap.database_counted and ldap.database == "slapd"
    assert all((r.database_per_query or 0) > 0 for r in ldap.repeats)
    memory = _entry(counted["memory"], "memory")
    assert not memory.database_counted
    assert all(r.database is None for r in memory.repeats)


@needs_valgrind
def test_the_memory_driver_costs_named_more_than_native_bind(
        counted: dict[str, Results]) -> None:
    # BIND's DLZ path re-parses every record's text (dns_sdlz_putrr) on every query, where
    # native BIND answers from its parsed database: 5.7x here, so no run comes near equal.
    assert counted["native"] is counted["memory"]  # one run's figures
    native = _entry(counted["native"], "native").mean("named")
    memory = _entry(counted["memory"], "memory").mean("named")
    assert native is not None and memory is not None and memory > native


@needs_valgrind
def test_each_report_has_the_section(runs: dict[tuple[str, ...], Results]) -> None:
    for servers, results in runs.items():
        text = render_markdown(results)
        assert "## Instructions per answered query" in text
        assert all(f"| {server} |" in text for server in servers), servers
        assert "## Cost per query" not in text  # not a `run` file: none of run's tables


@pytest.mark.parametrize("servers, says", [
    ("nosuch", "unknown server 'nosuch'"),
    ("native,nsd", "nsd is not named"),
])
def test_a_server_it_cannot_count_is_one_line(tmp_path: Path, servers: str, says: str) -> None:
    done = run_bench(tmp_path, "instructions", "--servers", servers, "--generate", "1",
                     "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and says in done.stderr
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


# --- the report, from a synthetic file -------------------------------------------------------


def _repeat(per_query: int, idle_ir: int = 1000, database: int | None = None) -> Repeat:
    """A repeat of 100 answered queries over a 4 s window after a 2 s idle one, whose idle
    instructions scale to 2 x idle_ir over the window."""
    def counted(figure: int) -> Counted:
        return Counted(idle_ir=idle_ir, query_ir=figure * 100 + 2 * idle_ir)
    return Repeat(sent=100, answered=100, idle_seconds=2.0, query_seconds=4.0,
                  named=counted(per_query),
                  database=None if database is None else counted(database))


def _synthetic() -> Results:
    section = Instructions(method="callgrind", valgrind="valgrind-3.19.0", queries=100,
                           queries_sha256="ab" * 32, idle_seconds=2.0, dataset="5 zones")
    section.servers = [
        ServerInstructions("memory", "none", repeats=[_repeat(200_000), _repeat(200_000)]),
        ServerInstructions("native", "none", repeats=[_repeat(40_000), _repeat(40_200)]),
        ServerInstructions("ldap", "slapd", database_counted=True,
                           repeats=[_repeat(300_000, database=100_000),
                                    _repeat(310_000, database=100_000)]),
        ServerInstructions("pg", "not counted: reason", status="failed", error="it broke"),
    ]
    return Results(meta={"command": "instructions"}, instructions=section)


@pytest.mark.check
def test_idle_instructions_are_subtracted_in_proportion() -> None:
    assert _repeat(40_000, idle_ir=123_456).named_per_query == pytest.approx(40_000)


@pytest.mark.check
def test_the_section_renders_from_a_synthetic_file(tmp_path: Path) -> None:
    save_results(_synthetic(), tmp_path)
    text = render_markdown(load_results(tmp_path))
    assert "| native | 40,100 | – | 40,100 | 20.1% | 0.50% | 2 |" in text
    assert "| memory | 200,000 | – | 200,000 | 100.0% | 0.00% | 2 |" in text
    # ldap's repeats (400,000 and 410,000 in all) are 2.5% apart: marked, with a note.
    assert "| ldap | 305,000 | 100,000 | 405,000 | 202.5% | 2.50% ⚠[2] | 2 |" in text
    assert "2. ldap: its repeats differ by more than 1%" in text
    assert "| pg | FAILED [1] |" in text and "1. pg: failed: it broke" in text
    # Rows (and their notes) in registry order, whatever order the file has them in.
    assert (text.index("| native |") < text.index("| memory |") < text.index("| pg |")
            < text.index("| ldap |"))
    assert render_markdown(load_results(tmp_path)) == text


@pytest.mark.check
def test_a_file_without_the_section_has_none() -> None:
    older = sorted((REPO_ROOT / "docs" / "results").glob("*/results.json*"))[0].parent
    assert "instructions" not in read_results_file(older)
    text = render_markdown(load_results(older))
    assert "Instructions per answered query" not in text
    assert "instructions" not in Results().to_dict()
