"""`python3 -m bench series` over committed runs (docs/results): each column labelled by the
run's traffic, each server's % of native from its own run's round-paired ratio (never a QPS of
another run), load-generator bounds as the run's own table marks them, a server a run lacks
left empty, and directories that are not `run` results refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.commands.cli import main
from bench.measure.results import load_results
from bench.report.run import interval_text
from bench.report.series import render_series, run_label

# Starts no process: part of `make check` (tests/conftest.py holds it to that).
pytestmark = pytest.mark.check

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"
NXDOMAIN_100 = RESULTS / "nxdomain-100-2026-11-26"
FLOOD = RESULTS / "flood-2000-2026-11-26"


def _row(lines: list[str], heading: str, server: str) -> list[str]:
    """The cells of `server`'s row in the table under `heading`."""
    start = lines.index(heading)
    row = next(line for line in lines[start:] if line.startswith(f"| {server} |"))
    return [cell.strip() for cell in row.strip("|").split("|")][1:]


def test_labels_say_each_runs_traffic() -> None:
    assert run_label(load_results(NXDOMAIN_100)) == "udp, NXDOMAIN 100%"
    assert run_label(load_results(FLOOD)) == "udp, NXDOMAIN 10%, flood 2,000 q/s"


def test_shares_come_from_each_runs_own_ratios() -> None:
    runs = [(str(d), load_results(d)) for d in (NXDOMAIN_100, FLOOD)]
    lines = render_series(runs)
    heading = "## QPS as % of native's in the same run"
    assert _row(lines, heading, "native") == ["100.0%", "100.0%"]
    flood_pg = next(c for c in runs[1][1].cells if c.server == "pg")
    assert _row(lines, heading, "pg")[1] == interval_text(flood_pg.ratios["native"], 100, 1, "%")
    # In the 100% NXDOMAIN run dnsperf limited native: the drivers' shares are upper bounds,
    # and Knot (limited too) has none.
    assert _row(lines, heading, "pg")[0].startswith("<= ")
    assert _row(lines, heading, "knot")[0] == "n/a (load generator on both)"
    # pdns-gpgsql-cached ran in the first run only.
    assert _row(lines, heading, "pdns-gpgsql-cached")[1] == "–"
    cost = _row(lines, "## Server CPU per answered query (us)", "pg")
    assert all("[" in text for text in cost)


def test_cli_writes_the_table(tmp_path: Path) -> None:
    out = tmp_path / "series.md"
    assert main(["series", str(NXDOMAIN_100), str(FLOOD), "--out", str(out)]) == 0
    assert "| 2: udp, NXDOMAIN 10%, flood 2,000 q/s |" in out.read_text()


def test_what_is_not_run_results_is_one_error_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["series", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (f"error: {tmp_path}: no results file (a `run` results "
                                       "directory?)\n")
    cold = RESULTS / "cold-start-pg-2026-11-26"
    assert main(["series", str(NXDOMAIN_100), str(cold)]) == 1
    assert capsys.readouterr().err == f"error: {cold}: results of `faults`, not `run`\n"
