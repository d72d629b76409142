"""`python3 -m bench tune --server D`: QPS, p99 under load and CPU per query over a grid of
named threads x driver connections, processes against threads and QPS against server CPUs, with
the database on this host or its own (a network namespace) and an optional added round trip;
results.json, results.md, the heat map and the curves in one directory (bench/measure/tune.py)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from base.errors import UserError
from base.latency_proxy import parse_db_rtt
from base.paths import REPO_ROOT
from base.process import new_run_dir
from bench.commands import add_out_option, add_pin_option, positive_counts
from bench.commands.run import _derive_query_file
from bench.measure import metadata
from bench.measure.datasets import zone_source
from bench.measure.results import Results, as_read_back, save_results
from bench.measure.runner import PROFILES, Setup, cpu_split
from bench.measure.tune import DB_HOSTS, TOLERANCE, Plan, Tuner, default_processes, grid_pairs
from bench.report.render import write_report
from servers import REFERENCE, get_server, selected_servers

DEFAULT_THREADS = "1,2,4,8,16,32,64"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="find the named thread and DLZ driver connection counts "
                                    "that serve most queries, with the database local or "
                                    "remote")
    p.add_argument("--server", "--driver", dest="server", required=True,
                   help="the DLZ server to tune (one)")
    p.add_argument("--threads", default=None,
                   help=f"comma list of named thread counts (default {DEFAULT_THREADS})")
    p.add_argument("--connections", default=None,
                   help="comma list of DLZ driver connection counts, each measured with every "
                        "thread count (default: the thread counts); needs --threads")
    p.add_argument("--db-host", choices=DB_HOSTS, default="local",
                   help="local: the database beside named; netns: in a network namespace of "
                        "its own, reached over a veth pair (needs root)")
    p.add_argument("--db-rtt", default="0", metavar="MS",
                   help="round trip added between named and the database by a latency proxy "
                        "on the database's host (needs --db-host netns): 0 (none, the "
                        "default) or whole milliseconds 1-5")
    p.add_argument("--processes", default=None,
                   help="comma list of N for N one-thread processes on one port against one "
                        "N-thread process (default 1,2 and powers of two up to the server's "
                        "CPUs); 'none' skips them")
    p.add_argument("--cpu-scaling", action=argparse.BooleanOptionalAction, default=True,
                   help="QPS with 1 .. nproc-1 CPUs for the server side, the rest for dnsperf")
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                   help="quick (default), full, tiny (tests): data size and run lengths")
    p.add_argument("--probes", type=int, default=None, metavar="N",
                   help="prober queries per p99 under load (default: the profile's); each waits "
                        "behind dnsperf's queue, so at a long round trip and few threads this "
                        "phase dominates a cell's time")
    p.add_argument("--starts", type=int, default=3,
                   help="fresh starts of every setting (default 3): the grid is measured that "
                        "many times, in reversed order every other time, and each setting's QPS "
                        "and cost per query get a 95%% interval over its starts")
    add_pin_option(p)
    p.add_argument("--seed", type=int, default=1)
    add_out_option(p, "tune-<server>-<timestamp>")
    p.set_defaults(func=run)


def plan_from(args: argparse.Namespace, server_cpus: int) -> Plan:
    """The grid and the scaling runs the options ask for; bad values are one clear error."""
    if args.connections is not None and args.threads is None:
        raise UserError("--connections needs --threads: the grid pairs every thread count "
                        "with every connection count")
    threads = positive_counts(args.threads or DEFAULT_THREADS, "--threads")
    connections = (positive_counts(args.connections, "--connections")
                   if args.connections is not None else None)
    if args.processes == "none":
        processes: tuple[int, ...] = ()
    elif args.processes is not None:
        processes = tuple(positive_counts(args.processes, "--processes"))
    else:
        processes = default_processes(server_cpus)
    return Plan(pairs=tuple(grid_pairs(threads, connections)), db_host=args.db_host,
                db_rtt_ms=parse_db_rtt(args.db_rtt), processes=processes,
                cpu_scaling=args.cpu_scaling, starts=args.starts)


def run(args: argparse.Namespace) -> int:
    profile = PROFILES[args.profile]
    if args.probes is not None:
        if args.probes < 1:
            raise UserError(f"--probes {args.probes}: needs at least 1 query")
        profile = dataclasses.replace(profile, probes=args.probes)
    server_list, _ = cpu_split(args.pin)
    plan = plan_from(args, len(server_list.split(",")) if server_list else 1)
    if "," in args.server:
        raise UserError(f"--server {args.server}: tune measures one server at a time")
    (name,) = selected_servers(args.server)
    if name == REFERENCE:
        raise UserError(f"--server {name}: native BIND has no threads/connections "
                        "trade-off to tune (it is the reference the answers are checked with)")
    server = get_server(name)
    if plan.db_host == "netns" and not server.loader().database.has_server:
        raise UserError(f"--db-host netns: the {server.store} store of {name} has no "
                        "server to put on a host of its own")
    args.generate, args.records, args.coverage = profile.zones, profile.records, False
    args.zones = args.named_conf = None
    stream, _ = zone_source(args)
    out = args.out or REPO_ROOT / "results" / f"tune-{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir = new_run_dir("tune")
    query_file = _derive_query_file(stream, run_dir, profile.queries, args.seed)
    setup = Setup(reference=get_server(REFERENCE), servers=[server], stream=stream,
                  dataset=f"{profile.zones} generated zones x ~{profile.records} records "
                          f"(seed {args.seed})",
                  query_file=query_file, run_dir=run_dir, out_dir=out,
                  threads=tuple(sorted({t for t, _ in plan.pairs})), pin=args.pin)
    results = Results(meta={**metadata.collect(), "command": "tune", "profile": profile.name,
                            "parameters": as_read_back(dataclasses.asdict(profile)),
                            "dataset": setup.dataset,
                            "servers": [name], "pin": args.pin,
                            "pairs": [list(p) for p in plan.pairs],
                            "processes": list(plan.processes),
                            "cpu_scaling": plan.cpu_scaling, "db_host": plan.db_host,
                            "db_rtt_ms": plan.db_rtt_ms, "starts": plan.starts,
                            "tolerance": TOLERANCE,
                            "run_dir": str(run_dir)})
    print(f"dlzbench tune {profile.name}: {name}, {len(plan.pairs)} threads/connections "
          f"pairs, database {plan.db_host}, added round trip {plan.db_rtt_ms} ms; results in "
          f"{out}", file=sys.stderr)
    try:
        Tuner(profile, setup, results, plan).run()
    except KeyboardInterrupt:
        print("interrupted: keeping the results gathered so far", file=sys.stderr)
        _finish(results, out)
        return 130
    _finish(results, out)
    print(recommendation_text(results))
    return 0


def _finish(results: Results, out: Path) -> None:
    save_results(results, out)
    write_report(results, out)


def recommendation_text(results: Results) -> str:
    tuning = results.tuning
    if tuning is None or not tuning.recommendations:
        return "no recommendation: no setting answered correctly with a QPS figure"
    lines = []
    for r in tuning.recommendations:
        p99 = "–" if r.p99_us is None else f"{r.p99_us:,.0f} us"
        lines.append(f"{r.server}: threads {r.threads}, connections {r.connections}: "
                     f"{r.qps:,.0f} QPS (best {r.best_qps:,.0f} at {r.best_threads}/"
                     f"{r.best_connections}), p99 under load {p99}")
    return "\n".join(lines)
