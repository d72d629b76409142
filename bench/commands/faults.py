"""`python3 -m bench faults`: a steady offered load through a script of database faults
(backends killed, the server stopped, restarted, crashed; a Berkeley DB writer stuck or killed
holding a lock; a cache's change channel cut), what the DNS server answered second by second
(docs/method/faults.md)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import new_run_dir
from bench.commands import (
    add_data_set_options,
    add_out_option,
    measure_then_report,
    progress,
)
from bench.measure import metadata
from bench.measure.datasets import Stream, describe, zone_source
from bench.measure.faults import (
    KINDS,
    METHOD,
    PROFILES,
    Faults,
    check_script,
    measure_server,
    parse_script,
    script_for,
)
from bench.measure.results import Results
from bench.measure.serving import loaded_store
from servers import get_server
from zonedata import queries

DEFAULT_PROFILE = "default"
DEFAULT_ZONES = 1000
# Enough distinct queries that the server's caches (PowerDNS's, the database's) see the data
# set, not a handful of names; cycled by the prober.
DEFAULT_QUERIES = 10000
# A query unanswered after this long is lost: past a resolver's first retries (BIND's first
# is at about 0.8 s), above every driver's default bound on one query.
DEFAULT_TIMEOUT_S = 2.0
DEFAULT_THREADS = 2


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("faults", help="a steady load through database faults (killed backends, "
                                      "stopped, restarted, crashed server, stuck writer, a "
                                      "cache's change channel cut) or cold starts: answers, "
                                      "SERVFAIL and loss per second")
    p.add_argument("--server", "--driver", dest="server", required=True, metavar="S",
                   help="the server: for the database faults a DLZ driver or PowerDNS row "
                        "with a database server (pg, mysql, ldap, pdns-gpgsql, pdns-gmysql, "
                        "...) or bdbhpt-t, and a row with a change channel (pg+cache, "
                        "mysql+cache) for channel-cut too; for the cold starts (--profile "
                        "cold-start) any")
    p.add_argument("--profile", choices=sorted(PROFILES), default=DEFAULT_PROFILE,
                   help=f"the load, length and script (default {DEFAULT_PROFILE}: every "
                        "database fault; cold-start: the server restarted, then its database "
                        "over a dropped page cache, 60 s each; tiny, cold-start-tiny: the "
                        "tests' few seconds)")
    p.add_argument("--qps", type=float, metavar="N",
                   help="queries per second offered (default: the profile's)")
    p.add_argument("--duration", type=float, metavar="SECONDS",
                   help="the load's length (default: the profile's)")
    p.add_argument("--script", metavar="AT:KIND[:SECONDS],...",
                   help=f"the faults instead of the profile's, KIND one of {', '.join(KINDS)} "
                        "(channel-cut:SECONDS keeps the channel from reconnecting that long; "
                        "without, it reconnects at once)")
    add_open_loop_options(p)
    add_data_set_options(p, str(DEFAULT_ZONES))
    add_out_option(p, "faults-<server>-<timestamp>")
    p.set_defaults(func=run)


def add_open_loop_options(p: argparse.ArgumentParser, *, reads: bool = False) -> None:
    """--threads, --timeout and --queries of the open-loop load (faults', and the reads of
    `writes`, which say "read" where a query is one)."""
    sent = "read" if reads else "query"
    p.add_argument("--threads", type=int, default=DEFAULT_THREADS, metavar="N",
                   help=f"the server's threads and connections (default {DEFAULT_THREADS})")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help=f"a {sent} unanswered this long is lost (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--queries", type=int, default=DEFAULT_QUERIES, metavar="N",
                   help=f"the {'read ' if reads else ''}query set's size, cycled (default "
                        f"{DEFAULT_QUERIES})")


def _check_numbers(args: argparse.Namespace, qps: float, duration: float) -> None:
    if qps <= 0:
        raise UserError(f"--qps {qps:g}: needs a positive rate")
    if duration <= 0:
        raise UserError(f"--duration {duration:g}: needs a positive length")
    if args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout:g}: needs a positive time")
    if args.threads < 1:
        raise UserError(f"--threads {args.threads}: needs at least 1 thread")
    if args.queries < 1:
        raise UserError(f"--queries {args.queries}: needs at least 1 query")


def run(args: argparse.Namespace) -> int:
    server = get_server(args.server)
    if not server.is_built():
        raise UserError(f"{server.name} is not built (run `make build`)")
    profile = PROFILES[args.profile]
    qps = args.qps if args.qps is not None else profile.qps
    duration = args.duration if args.duration is not None else profile.duration_s
    _check_numbers(args, qps, duration)
    script = parse_script(args.script) if args.script else script_for(server, profile)
    check_script(server, script, duration)
    if args.zones is None and args.named_conf is None and not args.coverage \
            and args.generate is None:
        args.generate = DEFAULT_ZONES
    stream, _ = zone_source(args)
    out = args.out or REPO_ROOT / "results" / time.strftime(
        f"faults-{server.name}-%Y%m%d-%H%M%S")
    run_dir = new_run_dir("faults")
    query_file = _query_file(stream, run_dir / "queries.txt", args.queries, args.seed)
    section = Faults(method=METHOD, qps=qps, duration_s=duration, timeout_s=args.timeout,
                     profile=args.profile, dataset=describe(args),
                     script=[fault.text for fault in script])
    results = Results(meta={**metadata.collect(), "command": "faults", "server": server.name,
                            "profile": args.profile, "qps": qps, "duration_s": duration,
                            "timeout_s": args.timeout, "threads": args.threads,
                            "script": section.script, "dataset": section.dataset},
                      faults=section)
    progress(f"dlzbench faults: {server.name}, {qps:,.0f} QPS for {duration:g} s through "
              f"{', '.join(section.script) or 'no fault'}; results in {out}")

    def measure() -> None:
        with loaded_store(server.name, stream, run_dir / server.name) as loaded:
            section.servers.append(measure_server(
                loaded, query_file, run_dir / server.name, qps=qps, duration_s=duration,
                timeout_s=args.timeout, threads=args.threads, script=script,
                progress=progress))
    return measure_then_report(measure, results, out)


def _query_file(stream: Stream, path: Path, count: int, seed: int) -> Path:
    """The queries, sampled from the data set as `run` samples its query file."""
    for _ in queries.write_query_file(stream(), path, count, seed=seed):
        pass
    if not queries.read_query_file(path):
        raise UserError("the data set gives no queries to ask")
    return path
