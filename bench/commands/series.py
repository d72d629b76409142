"""`python3 -m bench series DIR [DIR ...]`: runs of the same servers under different traffic,
side by side (bench/report/series.py): each server's QPS as % of native BIND's in its own run
and its CPU per answered query, one column per run."""

from __future__ import annotations

import argparse
from pathlib import Path

from base.errors import UserError
from bench.measure.results import has_results, load_results
from bench.report.series import render_series


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("series", help="runs under different traffic side by side: each "
                                      "server's %% of native in its own run and its CPU per "
                                      "query")
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR",
                   help="results directories of `run`, in the order of the columns")
    p.add_argument("--out", type=Path, help="write the Markdown here (default: print it)")
    p.set_defaults(func=series)


def series(args: argparse.Namespace) -> int:
    runs = []
    for directory in args.dirs:
        if not has_results(directory):
            raise UserError(f"{directory}: no results file (a `run` results directory?)")
        results = load_results(directory)
        if results.meta.get("command") != "run":
            raise UserError(f"{directory}: results of `{results.meta.get('command')}`, not "
                            "`run`")
        runs.append((str(directory), results))
    text = "\n".join(render_series(runs)) + "\n"
    if args.out is None:
        print(text, end="")
    else:
        args.out.write_text(text)
    return 0
