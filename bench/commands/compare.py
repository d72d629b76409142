"""`python3 -m bench compare A B`: the change of every figure from results A to results B.

First what differs between the two runs (BIND version, CPU, database versions, boot, commit),
then the prober's floor and every section both runs have (bench/report/sections.py: cells,
tune's scaling, capacity, startup, scale, signed, instructions, faults, writes, updates), its
entries matched by what identifies them (a cell by server, threads and connections, a fault
by its place in the script, ...), each figure with its change. A section's line on the whole
of it comes before the table (the cells': how many servers' cost per query is the same,
changed or undecided); entries only one run has are listed after the table, then a section's
own tables.

The cells' cost per query, cost ratio, QPS and QPS ratios are judged from their runs
("changed", "the same" within +-5%, "undecided", with the shift and its interval:
bench/report/cost.py); runs on different CPUs are not judged. Same-boot rule: a throughput of
A is never divided by one of B measured on another boot (or one not recorded): its change
says "different boot: not divided". Where a section keeps only 95% intervals and they overlap,
the change says "undecided: intervals overlap" (bench/report/comparing.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.measure.metadata import METADATA_KEYS
from bench.measure.results import Results, load_results
from bench.report.comparing import HEADER, row
from bench.report.sections import REPORTS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="print the change of every figure between two "
                                       "results directories")
    p.add_argument("a", type=Path, help="results directory (or its results file) A, the base")
    p.add_argument("b", type=Path, help="results directory (or its results file) B")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(compare(load_results(args.a), load_results(args.b), str(args.a), str(args.b)),
          end="")
    return 0


def what_differs(a: Results, b: Results) -> list[str]:
    """The software, machine and repository facts that differ between the two runs."""
    rows = [f"| {key} | {a.meta.get(key, '–')} | {b.meta.get(key, '–')} |"
            for key in METADATA_KEYS if key != "date" and a.meta.get(key) != b.meta.get(key)]
    if not rows:
        return ["Same software, machine and commit in both runs.", ""]
    return ["| what differs | A | B |", "|---|---|---|", *rows, ""]


def prober_floor_rows(a: Results, b: Results) -> list[str]:
    if a.prober_floor is None or b.prober_floor is None:
        return []
    return [row("prober floor", "–", attr, getattr(a.prober_floor, attr),
                getattr(b.prober_floor, attr)) for attr in ("mean_us", "p50_us", "p99_us")]


def compare(a: Results, b: Results, a_name: str = "A", b_name: str = "B") -> str:
    """A markdown report of every figure's change from `a` to `b`, section by section."""
    parts = [report.compare(a, b) for report in REPORTS]
    lines = [f"# Changes from A = {a_name} to B = {b_name}", "", *what_differs(a, b),
             *(line for part in parts for line in part.summary), *HEADER,
             *prober_floor_rows(a, b), *(line for part in parts for line in part.rows)]
    only = [line for part in parts for line in part.only]
    if only:
        lines += ["", "Not compared:", *only]
    lines += [line for part in parts for line in part.after]
    return "\n".join(lines) + "\n"

