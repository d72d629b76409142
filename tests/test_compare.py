"""`compare A B` over every section of results.json (bench/report/sections.py): each committed
example of a section compared with a copy of itself changed in one known figure, one entry
left out, and the same or another boot. No server runs: the figures are the committed runs'
(docs/results), read only.

The cells' verdicts ("changed", "the same", "undecided" on the cost per query, its ratio, QPS
and the QPS ratios) are tested here on the two committed `make bench` runs of one boot and on
hand-made cells; the table's own rules (intervals from rounds) in tests/test_report.py.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest

from base.paths import REPO_ROOT
from bench.commands.compare import compare
from bench.load.dnsperf import DnsperfRun
from bench.measure.cells import Cell, QpsSummary, RoundRun
from bench.measure.cost import machine_by_start
from bench.measure.results import SECTIONS, Results, load_results
from bench.measure.stats import Interval
from bench.report.comparing import DIFFERENT_BOOT, UNDECIDED_OVERLAP
from bench.report.cost import cost_notes
from bench.report.format import Notes
from bench.report.sections import REPORTS

RESULTS = REPO_ROOT / "docs" / "results"
# A committed run holding each section.
EXAMPLES = {
    "cells": "quick-2026-11-26",
    "startup_scaling": "startup-2026-11-21",
    "capacity": "capacity-2026-11-26",
    "tuning": "tune-2026-11-24/pg-rtt0",
    "scale": "scale-2026-11-25",
    "signed": "signed-2026-11-25",
    "instructions": "instructions-2026-11-26",
    "faults": "faults-pg-2026-11-26",
    "writes": "writes-2026-11-26",
    "updates": "updates-2026-11-26",
}
Row = tuple[str, str, str, str]  # A, B, change, change %


@pytest.fixture(scope="module")
def examples() -> dict[str, Results]:
    return {key: load_results(RESULTS / name) for key, name in EXAMPLES.items()}


def _pair(results: Results, edit: Callable[[Results], object],
          boot: str = "boot-a") -> tuple[Results, Results]:
    """The run as A (on boot-a) and a copy edited as B (on `boot`)."""
    a = copy.deepcopy(results)
    a.meta["boot_id"] = "boot-a"
    b = copy.deepcopy(a)
    b.meta["boot_id"] = boot
    edit(b)
    return a, b


def _table(text: str) -> dict[tuple[str, str, str], Row]:
    """(server, where, figure) -> (A, B, change, change %) of compare's table."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 7 and cells[0] != "server":
            rows[cells[0], cells[1], cells[2]] = tuple(cells[3:])
    return rows


def test_every_section_has_an_example_and_is_compared(examples) -> None:
    """A section of results.json without a report (markdown, plots, comparison) or without a
    committed example here fails: a new measurement cannot be left out of `compare`."""
    assert [r.key for r in REPORTS] and {r.key for r in REPORTS} == set(SECTIONS)
    assert set(EXAMPLES) == set(SECTIONS)
    for report in REPORTS:
        results = examples[report.key]
        assert report.compare(results, copy.deepcopy(results)).rows, report.key
        assert report.compare(results, Results()).rows == [], report.key


def test_cells_match_by_server_threads_and_connections(examples) -> None:
    def edit(b: Results) -> None:
        b.cells[0].qps.min *= 2
        b.cells[-1].startup_ms = 2 * (b.cells[-1].startup_ms or 1)
        b.cells.pop(1)
    a, b = _pair(examples["cells"], edit)
    rows = _table(compare(a, b))
    first, last, gone = a.cells[0], a.cells[-1], a.cells[1]
    assert rows[first.server, "1", "QPS min"][3] == "+100.0%"
    assert rows[last.server, "1", "startup (ms)"][3] == "+100.0%"
    assert f"- {gone.server} at 1 thread(s): only in A" in compare(a, b)
    assert not any(key[0] == gone.server for key in rows)


def test_startup_points_match_by_server_and_zones(examples) -> None:
    def edit(b: Results) -> None:
        point = b.startup_scaling[0]
        point.server_rss_kb = 2 * point.server_rss_kb
        point.records_per_second = 3.0
    a, b = _pair(examples["startup_scaling"], edit, boot="boot-b")
    point = a.startup_scaling[0]
    rows = _table(compare(a, b))
    assert rows[point.server, f"{point.zones} zones", "server RSS (kB)"][3] == "+100.0%"
    # The load's records per second is a throughput: not divided across boots.
    assert rows[point.server, f"{point.zones} zones", "load (records/s)"][2] == DIFFERENT_BOOT


def test_capacity_throughputs_keep_the_same_boot_rule(examples) -> None:
    def edit(b: Results) -> None:
        b.capacity[0].closed_loop_qps *= 1.1
        b.capacity.pop()
    a, b = _pair(examples["capacity"], edit)
    curve, gone = a.capacity[0], a.capacity[-1]
    text = compare(a, b)
    assert _table(text)[curve.server, "1", "capacity: closed-loop QPS"][3] == "+10.0%"
    assert f"- capacity of {gone.server} at 1 thread(s): only in A" in text
    a, b = _pair(examples["capacity"], edit, boot="boot-b")
    row = _table(compare(a, b))[curve.server, "1", "capacity: closed-loop QPS"]
    assert row[2:] == (DIFFERENT_BOOT, DIFFERENT_BOOT)


def test_tune_points_and_recommendations(examples) -> None:
    def edit(b: Results) -> None:
        assert b.tuning is not None
        b.tuning.recommendations[0].threads = 2
        b.tuning.scaling.pop()
    a, b = _pair(examples["tuning"], edit)
    assert a.tuning is not None
    text = compare(a, b)
    rows = _table(text)
    assert rows["pg", "recommended", "threads"] == ("1", "2", "+1.00", "+100.0%")
    assert rows["pg", "1 processes", "QPS"][3] == "+0.0%"
    gone = a.tuning.scaling[-1]
    assert f"- pg with {gone.count} {gone.kind}: only in A" in text
    assert "- tune's scaling and recommendations: only in A" in compare(a, Results())


def test_scale_cells_match_by_data_set_and_mix(examples) -> None:
    def edit(b: Results) -> None:
        b.scale[0].store_bytes = 2 * b.scale[0].store_bytes
        b.scale[1].not_measured = "would not fit in memory"
    a, b = _pair(examples["scale"], edit)
    first, second = a.scale[0], a.scale[1]
    rows = _table(compare(a, b))
    place = f"{first.zones:,} x {first.records_per_zone:,}, {first.mix}"
    assert rows[first.server, place, "store size (bytes)"][3] == "+100.0%"
    assert rows[first.server, place, "QPS median"][3] == "+0.0%"
    place = f"{second.zones:,} x {second.records_per_zone:,}, {second.mix}"
    assert rows[second.server, place, "status"][:2] == ("OK", "NOT MEASURED")


def test_signed_cells_compare_the_figures_of_their_table(examples) -> None:
    def edit(b: Results) -> None:
        b.signed[0].truncated = b.signed[0].replies
        b.signed.pop()
    a, b = _pair(examples["signed"], edit)
    point, gone = a.signed[0], a.signed[-1]
    text = compare(a, b)
    rows = _table(text)
    place = f"{point.variant}, {point.cell.threads} thread(s)"
    assert rows[point.server, place, "UDP replies truncated (check queries)"][:2] == (
        f"{point.truncated}", f"{point.replies}")
    assert rows[point.server, place, "reply size (bytes, dnsperf)"][3] == "+0.0%"
    assert (f"- {gone.server} {gone.variant} at {gone.cell.threads} thread(s): only in A"
            in text)


def test_instructions_per_server_over_one_query_set(examples) -> None:
    def edit(b: Results) -> None:
        assert b.instructions is not None
        for repeat in b.instructions.servers[0].repeats:
            repeat.named.query_ir += repeat.answered * 1000
    a, b = _pair(examples["instructions"], edit, boot="boot-b")
    assert a.instructions is not None
    entry = a.instructions.servers[0]
    rows = _table(compare(a, b))
    # Instructions do not depend on the boot: compared across boots.
    assert rows[entry.server, "instructions", "named Ir/query"][2] == "+1,000.00"
    assert (entry.server, "instructions", "database Ir/query") not in rows  # none counted

    def other_queries(b: Results) -> None:
        assert b.instructions is not None
        b.instructions.queries_sha256 = "0" * 64
    text = compare(*_pair(examples["instructions"], other_queries))
    assert "- instructions: counted over different query sets" in text
    assert "| instructions |" not in text


def test_faults_match_by_their_place_in_the_script(examples) -> None:
    def edit(b: Results) -> None:
        assert b.faults is not None
        faults = b.faults.servers[0].faults
        faults[1].recovered_s = 2 * faults[1].recovered_s
        faults.pop(0)
    a, b = _pair(examples["faults"], edit)
    text = compare(a, b)
    rows = _table(text)
    assert rows["pg", "sigstop 5 s at 20 s", "recovered after (s)"][3] == "+100.0%"
    assert rows["pg", "crash 3 s at 55 s", "SERVFAIL"][2] == "+0.00"
    assert rows["pg", "faults: steady", "answered before the first fault (%)"][0] == "100.00"
    assert "- pg: kill-backends at 10 s: only in A" in text


def test_writes_steps_match_by_rate_when_written_the_same_way(examples) -> None:
    def edit(b: Results) -> None:
        assert b.writes is not None
        b.writes.servers = b.writes.servers[:-1]
    a, b = _pair(examples["writes"], edit)
    assert a.writes is not None
    text = compare(a, b)
    rows = _table(text)
    # Six repeats a step: medians with intervals, which overlap with themselves.
    assert rows["pg", "writes 100/s", "reads answered/s"][2] == UNDECIDED_OVERLAP
    assert rows["pg", "writes 100/s", "visible p50 (ms)"][3] == "+0.0%"
    assert rows["pg", "writes ceiling", "writes/s achieved"][2] == UNDECIDED_OVERLAP
    assert f"- writes of {a.writes.servers[-1].server}: only in A" in text

    def via_update(b: Results) -> None:
        assert b.writes is not None
        b.writes.via = "update"
    text = compare(*_pair(examples["writes"], via_update))
    assert "- writes: A wrote via store, B via update: not compared" in text


def test_updates_cells_and_checks(examples) -> None:
    def edit(b: Results) -> None:
        assert b.updates is not None
        cell = b.updates.cell("pg", 1, False)
        assert cell is not None and cell.records_per_s is not None
        rate = cell.records_per_s.estimate
        cell.records_per_s = Interval(4 * rate, 3.9 * rate, 4.1 * rate, 6)
        b.updates.checks[0].identical -= 1
    a, b = _pair(examples["updates"], edit)
    assert a.updates is not None
    rows = _table(compare(a, b))
    row = rows["pg", "1 record(s)/message, no TSIG", "records/s"]
    assert row[3] == "+300.0%"  # intervals apart: the change is shown
    assert rows["pg", "1 record(s)/message, no TSIG", "messages/s"][2] == UNDECIDED_OVERLAP
    check = a.updates.checks[0]
    assert rows[check.server, "after the updates", "answers as native's"][2] == "-1.00"
    a, b = _pair(examples["updates"], edit, boot="boot-b")
    rows = _table(compare(a, b))
    assert rows["pg", "1 record(s)/message, no TSIG", "records/s"][2] == DIFFERENT_BOOT
    # The ratio to native BIND is within each run: compared across boots.
    assert rows["pg", "1 record(s)/message, no TSIG", "% of native"][2] != DIFFERENT_BOOT


def test_a_section_only_one_run_has_is_named(examples) -> None:
    text = compare(examples["faults"], examples["writes"])
    assert "- the faults section: only in A" in text
    assert "- the writes section: only in B" in text


def test_compare_reads_committed_directories(tmp_path: Path, capsys) -> None:
    from bench.commands.cli import main

    assert main(["compare", str(RESULTS / EXAMPLES["faults"]),
                 str(RESULTS / EXAMPLES["faults"])]) == 0
    assert "| pg | sigstop 5 s at 20 s | recovered after (s) |" in capsys.readouterr().out


# ---------------------------------------------------------------- the cells' verdicts

QUICK, RERUN = "quick-2026-11-26", "quick-2026-11-26-rerun"


@pytest.mark.check
def test_two_make_bench_runs_of_one_boot_judged_from_their_fresh_starts() -> None:
    """The committed pair, 23 minutes apart on one boot: ldap's cost per query the same within
    +-5%, no server's changed, the other ten undecided (six fresh starts a side); of the QPS
    ratios, pg's, fs's and bdb-btree's share of native changed. No line counts overlapping
    intervals as agreement, and the committed compare.md is what compare prints today."""
    a, b = load_results(RESULTS / QUICK), load_results(RESULTS / RERUN)
    text = compare(a, b, f"docs/results/{QUICK}", f"docs/results/{RERUN}")
    assert "\ncost per query: 1 of 11 servers the same within +-5%, 0 changed, 10 undecided\n" \
        in text
    rows = _table(text)
    cost = {server: row for (server, _, figure), row in rows.items()
            if figure == "cost us/query (server + db)"}
    assert {server for server, row in cost.items() if row[2] == "the same"} == {"ldap"}
    assert cost["ldap"][:2] == ("280.7", "277.4")
    assert cost["ldap"][3].startswith("shift -1.7% [")
    changed = {server for (server, _, figure), row in rows.items()
               if figure == "QPS % of native" and row[2] == "changed"}
    assert changed == {"pg", "fs", "bdb-btree"}
    assert rows["pg", "1", "cost % of memory"][:2] == ("388.2", "415.7")
    assert "agree" not in text and "not distinguishable" not in text
    assert text == (RESULTS / RERUN / "compare.md").read_text()


@pytest.mark.check
def test_the_intel_pair_the_same_by_share_of_the_reference_more_than_by_cost() -> None:
    """The second committed pair (Intel Xeon VM, one boot, 5 minutes apart): 5 of 11 costs
    the same, none changed; 8 of 10 shares of the adjacent reference the same (memory's share
    of native changed as native's cost fell); 7 QPS shares of native changed, none the
    same; what its README says, and compare.md is what compare prints today."""
    text, rows = _committed_pair("quick-2026-11-27", "quick-2026-11-27-rerun")
    assert "\ncost per query: 5 of 11 servers the same within +-5%, 0 changed, 6 undecided\n" \
        in text
    assert "\ncost % of the adjacent reference: 8 of 10 servers the same within +-5%, " \
        "1 changed, 1 undecided\n" in text
    same = {server for (server, _, figure), row in rows.items()
            if figure == "cost us/query (server + db)" and row[2] == "the same"}
    assert same == {"mysql", "bdb-btree", "bdb-hash", "bdbhpt-c", "bdbhpt-p"}
    assert rows["memory", "1", "cost % of native"][2] == "changed"
    qps = [row[2] for (_, _, figure), row in rows.items() if figure == "QPS % of native"
           and row[2] != "–"]
    assert (qps.count("changed"), qps.count("undecided"), qps.count("the same")) == (7, 3, 0)


@pytest.mark.check
def test_the_adaptive_starts_pair_changed_where_the_machine_did() -> None:
    """The third committed pair (Intel Xeon VM, one boot, back to back, rounds split between
    fresh starts by the variance): every server's cost fell in the rerun, so all 11 changed
    and none is the same; of the shares of the adjacent reference, pg's, mysql's and ldap's
    changed (their database servers moved more than the memory driver's named) while the
    memory driver's share of native and three Berkeley DB rows' shares stayed the same; what
    its README says, and compare.md is what compare prints today."""
    text, rows = _committed_pair("quick-2026-11-28", "quick-2026-11-28-rerun")
    assert "\ncost per query: 0 of 11 servers the same within +-5%, 11 changed, 0 undecided\n" \
        in text
    assert "\ncost % of the adjacent reference: 4 of 10 servers the same within +-5%, " \
        "3 changed, 3 undecided\n" in text
    shares = {server: row[2] for (server, _, figure), row in rows.items()
              if figure.startswith("cost % of")}
    assert {s for s, verdict in shares.items() if verdict == "changed"} == {"pg", "mysql", "ldap"}
    assert {s for s, verdict in shares.items() if verdict == "the same"} == \
        {"memory", "fs", "bdb-btree", "bdb-hash"}


def _committed_pair(first: str, rerun: str) -> tuple[str, dict[tuple[str, str, str], Row]]:
    """compare's text for two committed runs, held to the rerun's committed compare.md, and
    its table by (server, where, figure)."""
    a, b = load_results(RESULTS / first), load_results(RESULTS / rerun)
    text = compare(a, b, f"docs/results/{first}", f"docs/results/{rerun}")
    assert text == (RESULTS / rerun / "compare.md").read_text()
    return text, _table(text)


def _handmade(costs: dict[str, list[float]], runs_per_start: int = 2) -> Results:
    """Invented cells in rounds (no machine measured them): each server's cost per query in
    its runs (us: 1,000 answers a run, named's CPU to match), a fresh start every
    `runs_per_start` runs, the QPS 1e6 / cost."""
    cells = []
    for server, values in costs.items():
        runs = [DnsperfRun(argv=["handmade"], queries_sent=1000, queries_completed=1000,
                           run_time_s=1.0, qps=1e6 / v) for v in values]
        cell = Cell(server, 1, 1, qps_runs=runs,
                    qps_rounds=[RoundRun(i, i // runs_per_start, server_cpu_s=v / 1000)
                                for i, v in enumerate(values)],
                    cpu_us_per_query={"server": sum(values) / len(values), "db": None})
        cell.qps = QpsSummary.from_runs(runs)
        cells.append(cell)
    return Results(meta={"boot_id": "boot-a", "cpu_model": "a CPU"}, cells=cells)


def _twice(values: list[float]) -> list[float]:
    """Two runs a start, both at the start's value."""
    return [v for v in values for _ in range(2)]


@pytest.mark.check
def test_cost_per_query_changed_the_same_or_undecided() -> None:
    steady = [20.0, 20.4, 19.6, 20.2, 19.8, 20.0]  # six starts within +-2%
    noisy = [30.0, 45.0, 38.0, 52.0, 33.0, 41.0]
    a = _handmade({"native": _twice(steady), "memory": _twice(noisy),
                   "pg": _twice([5 * v for v in steady])})
    b = _handmade({"native": _twice([1.01 * v for v in steady]),
                   "memory": _twice([40.0, 31.0, 50.0, 36.0, 44.0, 35.0]),
                   "pg": _twice([10 * v for v in steady])})
    text = compare(a, b)
    assert "cost per query: 1 of 3 servers the same within +-5%, 1 changed, 1 undecided" in text
    rows = _table(text)
    native = rows["native", "1", "cost us/query (server + db)"]
    assert native[2:] == ("the same", "shift +1.0% [-1.0%, +3.0%]")
    pg = rows["pg", "1", "cost us/query (server + db)"]
    assert pg[2] == "changed" and pg[3].startswith("shift +100.0% [")
    assert rows["memory", "1", "cost us/query (server + db)"][2] == "undecided"
    # The QPS follows the cost here (1e6 / cost): halved for pg, on the same boot.
    assert rows["pg", "1", "QPS median"][2:] == ("changed", "shift -50.0% [-51.0%, -49.0%]")
    b.meta["boot_id"] = "boot-b"
    assert _table(compare(a, b))["pg", "1", "QPS median"][2] == DIFFERENT_BOOT


@pytest.mark.check
def test_a_machine_that_slowed_changes_every_cost_but_not_the_shares_of_the_reference() -> None:
    """Run b's machine 10% slower for every server: each cost per query changed, each cost
    as a share of the reference measured beside it the same; both summary lines say so."""
    steady = [20.0, 20.4, 19.6, 20.2, 19.8, 20.0]
    other = [20.1, 19.7, 20.3, 19.9, 20.2, 19.8]
    costs = {"native": _twice(steady), "memory": _twice([2 * v for v in other]),
             "pg": _twice([6 * v for v in reversed(steady)])}
    a = _handmade(costs)
    b = _handmade({server: [1.1 * v for v in values] for server, values in costs.items()})
    text = compare(a, b)
    assert "\ncost per query: 0 of 3 servers the same within +-5%, 3 changed, 0 undecided\n" \
        in text
    assert "\ncost % of the adjacent reference: 2 of 2 servers the same within +-5%, " \
        "0 changed, 0 undecided\n" in text
    rows = _table(text)
    assert rows["pg", "1", "cost % of memory"][2] == "the same"
    assert rows["memory", "1", "cost % of native"][2] == "the same"


@pytest.mark.check
def test_the_report_says_when_every_server_moved_with_the_machine_between_starts() -> None:
    """Three servers whose costs follow one machine factor per start: the note gives the
    factors and a correlation of 1; servers that move apart get no such correlation."""
    machine = [1.04, 1 / 1.04, 1.02, 1 / 1.02, 1.05, 1 / 1.05]  # geometric mean 1
    a = _handmade({"native": _twice([20 * f for f in machine]),
                   "memory": _twice([40 * f for f in machine]),
                   "pg": _twice([120 * f for f in machine])})
    notes = Notes()
    cost_notes(a.cells, notes)
    text = "\n".join(notes.lines)
    assert "the 3 servers' per-start mean costs correlated at 1.00 (median of every pair)" \
        in text
    assert "was +4.0%, -3.8%, +2.0%, -2.0%, +5.0%, -4.8%." in text
    apart = _handmade({"native": _twice([20 * f for f in machine]),
                       "memory": _twice([40 * f for f in reversed(machine)]),
                       "pg": _twice([120.0, 118.0, 121.0, 119.0, 122.0, 120.0])})
    moved = machine_by_start(apart.cells)
    assert moved is not None and moved.correlation < 0.5


@pytest.mark.check
def test_runs_before_rounds_get_the_plain_change_and_no_verdict() -> None:
    before = load_results(RESULTS / "quick-2026-11-24")
    text = compare(before, copy.deepcopy(before))
    assert "cost per query: no server has a cost per run in both runs" in text
    assert _table(text)["pg", "1", "cost us/query (server + db)"][2:] == ("+0.00", "+0.0%")
