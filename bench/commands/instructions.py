"""`python3 -m bench instructions`: instructions per answered query, counted by Valgrind, for
named and (where it runs under Valgrind) the database behind it (docs/method/instructions.md)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import new_run_dir
from bench.commands import (
    add_data_set_options,
    add_out_option,
    add_store_url_options,
    progress,
    store_urls,
)
from bench.measure import metadata
from bench.measure.datasets import Stream, describe, zone_source
from bench.measure.instructions import (
    METHOD,
    Instructions,
    QuerySet,
    counts_named,
    measure_server,
    valgrind_version,
)
from bench.measure.results import Results, save_results
from bench.measure.serving import loaded_store
from bench.report.render import write_report
from servers import REFERENCE, get_server, selected_servers
from zonedata import queries

# Default data set and query set: large enough that every kind of answer (hit, NXDOMAIN,
# NODATA) in every zone shape is asked, small enough that named starts under callgrind in
# seconds.
DEFAULT_ZONES = 1000
DEFAULT_QUERIES = 1000
DEFAULT_REPEATS = 2
DEFAULT_IDLE_S = 5.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("instructions", help="instructions per answered query under Valgrind "
                                            "(named and the database), every server")
    p.add_argument("--servers", "--drivers", dest="servers", default="all",
                   help="'all' (native BIND and every built DLZ driver) or a comma list")
    p.add_argument("--queries", type=int, default=DEFAULT_QUERIES, metavar="N",
                   help=f"the fixed query set's size, derived from the data set "
                        f"(default {DEFAULT_QUERIES})")
    p.add_argument("--repeat", type=int, default=DEFAULT_REPEATS, metavar="K",
                   help=f"repeats per server, each a fresh named (default {DEFAULT_REPEATS})")
    p.add_argument("--idle", type=float, default=DEFAULT_IDLE_S, metavar="SECONDS",
                   help=f"the idle window subtracted (default {DEFAULT_IDLE_S:g})")
    add_data_set_options(p, str(DEFAULT_ZONES))
    add_out_option(p, "instructions-<timestamp>")
    add_store_url_options(p)
    p.set_defaults(func=run)


def named_servers(text: str) -> list[str]:
    """--servers: 'all' is every built named-based server, native first; naming another
    server (PowerDNS, NSD, Knot) is an error."""
    if text == "all":
        names = [n for n in selected_servers("all") if counts_named(get_server(n))]
        return [REFERENCE, *[n for n in names if n != REFERENCE]]
    names = selected_servers(text)
    for name in names:
        if not counts_named(get_server(name)):
            raise UserError(f"instructions counts named's instructions: {name} is not named "
                            "(native BIND or a DLZ driver)")
    return names


def _check_counts(args: argparse.Namespace) -> None:
    if args.queries < 1:
        raise UserError(f"--queries {args.queries}: needs at least 1 query")
    if args.repeat < 1:
        raise UserError(f"--repeat {args.repeat}: needs at least 1 repeat")
    if args.idle <= 0:
        raise UserError(f"--idle {args.idle:g}: the idle window needs a positive length")


def run(args: argparse.Namespace) -> int:
    _check_counts(args)
    servers = named_servers(args.servers)
    urls = store_urls(args)
    if args.zones is None and args.named_conf is None and not args.coverage \
            and args.generate is None:
        args.generate = DEFAULT_ZONES
    stream, _ = zone_source(args)
    version = valgrind_version()
    out = args.out or REPO_ROOT / "results" / time.strftime("instructions-%Y%m%d-%H%M%S")
    run_dir = new_run_dir("instructions")
    query_set = _query_set(stream, run_dir / "queries.txt", args.queries, args.seed)
    section = Instructions(method=METHOD, valgrind=version, queries=len(query_set),
                           queries_sha256=query_set.sha256, idle_seconds=args.idle,
                           dataset=describe(args))
    results = Results(meta={**metadata.collect(), "command": "instructions",
                            "servers": servers, "dataset": section.dataset,
                            "repeats": args.repeat, "idle_s": args.idle},
                      instructions=section)
    progress(f"dlzbench instructions: {', '.join(servers)}; {len(query_set)} queries "
              f"(sha256 {query_set.sha256[:12]}), {args.repeat} repeats; results in {out}")
    try:
        for name in servers:
            with loaded_store(name, stream, run_dir / name, store_urls=urls) as loaded:
                section.servers.append(measure_server(
                    loaded, query_set, run_dir / name, repeats=args.repeat,
                    idle_seconds=args.idle, progress=progress))
            save_results(results, out)
    except KeyboardInterrupt:
        print("interrupted: keeping the results gathered so far", file=sys.stderr)
        save_results(results, out)
        write_report(results, out)
        return 130
    save_results(results, out)
    print(write_report(results, out))
    return 0


def _query_set(stream: Stream, path: Path, count: int, seed: int) -> QuerySet:
    """The fixed queries, sampled from the data set as `run` samples its query file (same
    mix, same seed: the same data set gives the same set and hash)."""
    for _ in queries.write_query_file(stream(), path, count, seed=seed):
        pass
    found = queries.read_query_file(path)
    if not found:
        raise UserError("the data set gives no queries to ask")
    return QuerySet(tuple(found))
