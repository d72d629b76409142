"""`python3 -m bench report DIR`: re-render DIR/results.md and the plots from results.json."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.measure.results import load_results, results_path
from bench.report.render import write_report


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="re-render results.md and the plots of a results "
                                      "directory, and print the markdown")
    p.add_argument("directory", type=Path,
                   help="a directory holding results.json.xz (or an older results.json)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    results = load_results(args.directory)
    print(write_report(results, results_path(args.directory).parent), end="")
    return 0
