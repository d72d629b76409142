"""`python3 -m bench advise`: which server meets a requirement, with which settings, how much
headroom and what to expect, from the results (docs/method/advise.md); the measurements it
lacks as the commands that take them. It measures nothing."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from base.errors import UserError
from bench.commands import progress
from bench.measure.advice import Requirement, advise
from bench.measure.catalogue import RESULTS_NAMES, Catalogue, results_directories
from bench.report.advise import page, plain, write_advice
from servers import selected_bind


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("advise", help="which server meets a requirement (zones, peak QPS, p99, "
                                      "round trip, writes), its settings, headroom, startup "
                                      "and memory, from the results; measures nothing")
    p.add_argument("--zones", required=True, metavar="N", help="zones to serve")
    p.add_argument("--peak-qps", required=True, metavar="Q", help="queries per second at peak")
    p.add_argument("--p99-ms", required=True, metavar="L",
                   help="the p99 latency the peak must keep under, in milliseconds")
    p.add_argument("--db-rtt", default="0", metavar="MS",
                   help="round trip to the database server, in milliseconds (default 0: beside "
                        "the DNS server)")
    p.add_argument("--writes", default="0", metavar="W",
                   help="changes written into the store per second (default 0)")
    p.add_argument("--signed", action="store_true", help="the zones are signed (DNSSEC)")
    p.add_argument("--servers", metavar="S,...",
                   help="only these servers (default: every server the results measure)")
    p.add_argument("--results", nargs="+", type=Path, metavar="DIR",
                   help="results directories to read instead of the committed ones "
                        "(docs/results); a directory holding several is read whole")
    p.add_argument("--machine", metavar="TEXT",
                   help="the committed results of the machine whose CPU model contains TEXT, "
                        "e.g. Intel or EPYC (default: the machine with the most of them); "
                        "figures of two machines are never mixed")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="also write advice.md, advice.png and a self-contained advice.html "
                        "there")
    p.set_defaults(func=run)


def requirement(args: argparse.Namespace) -> Requirement:
    return Requirement(zones=_whole(args.zones, "--zones"),
                       peak_qps=_number(args.peak_qps, "--peak-qps"),
                       p99_ms=_number(args.p99_ms, "--p99-ms"),
                       db_rtt_ms=_number(args.db_rtt, "--db-rtt"),
                       writes_per_s=_number(args.writes, "--writes"), signed=args.signed)


def _number(text: str, option: str) -> float:
    try:
        value = float(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise UserError(f"{option} {text!r}: expected a number") from None
    if not math.isfinite(value):
        raise UserError(f"{option} {text!r}: expected a finite number")
    return value


def _whole(text: str, option: str) -> int:
    value = _number(text, option)
    if not value.is_integer():
        raise UserError(f"{option} {text!r}: expected a whole number")
    return int(value)


def catalogue_of(directories: list[Path] | None) -> Catalogue:
    """The committed results, or the directories given (each results directory under one)."""
    if directories is None:
        return Catalogue.committed()
    catalogue = Catalogue({})
    for given in directories:
        if not given.is_dir():
            raise UserError(f"--results {given}: no such directory")
        own = any((given / name).is_file() for name in RESULTS_NAMES)
        found = [given] if own else results_directories(given)
        if not found:
            raise UserError(f"--results {given}: not a results directory (no "
                            f"{' or '.join(RESULTS_NAMES)} in it or below it)")
        for directory in found:
            catalogue.add(directory, name=directory.as_posix())
    return catalogue


def run(args: argparse.Namespace) -> int:
    wanted = requirement(args)
    servers = None if args.servers is None else [
        name.strip() for name in args.servers.split(",") if name.strip()]
    if servers is not None and not servers:
        raise UserError(f"--servers {args.servers!r}: names no server")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UserError(f"--out {args.out}: exists and is not a directory")
    advice = advise(catalogue_of(args.results), wanted,
                    bind=selected_bind(need_drivers=False).version,
                    given=args.results is not None, servers=servers, machine=args.machine)
    print(plain(page(advice, with_figure=False)), end="")
    if args.out is not None:
        for path in write_advice(advice, args.out):
            progress(f"wrote {path}")
    return 0
