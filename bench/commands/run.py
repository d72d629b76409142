"""`python3 -m bench run`: the benchmark; results.json, results.md and plots in one directory."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from base.paths import REPO_ROOT
from base.process import new_run_dir
from bench import metadata
from bench.commands import add_store_url_options, positive_counts, store_urls
from bench.datasets import zone_source
from bench.report import write_report
from bench.results import Results, save_results
from bench.runner import PROFILES, Profile, Runner, Setup, clients_for
from servers import REFERENCE, get_server, selected_servers
from zonedata import queries
from zonedata.model import Zone


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the benchmark and write results.json, results.md, plots")
    add_run_options(p)
    p.set_defaults(func=run)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of `run`, shared by the commands that measure the way it does."""
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                   help="quick (default, minutes), full (the BIND-DLZ page's method), tiny (tests)")
    p.add_argument("--drivers", default="all", help="'all' (every built driver) or a comma list; "
                   "native BIND is always measured first, as the reference")
    p.add_argument("--threads", default=None, help="comma list of named thread counts "
                   "(default from the profile: 1,2,4)")
    p.add_argument("--connections", type=int, default=None,
                   help="driver connections (default: one per thread)")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True,
                   help="server (named + database) and load generator on separate CPUs")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--zones", type=Path, metavar="DIR", help="zone files instead of generated")
    src.add_argument("--generate", type=int, metavar="N", help="generated zones (profile default)")
    src.add_argument("--coverage", action="store_true", help="the coverage data set")
    p.add_argument("--records", type=int, default=None, help="records per generated zone")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--queries", type=Path, metavar="FILE",
                   help="dnsperf query file (default: derived from the data set)")
    p.add_argument("--out", type=Path, default=None,
                   help="results directory (default: results/<timestamp>)")
    add_store_url_options(p)


def prepare(args: argparse.Namespace, command: str,
            threads: tuple[int, ...] | None = None) -> tuple[Profile, Setup, Results]:
    """The profile, the set-up and the (empty) results of a run from `run`'s options."""
    profile = PROFILES[args.profile]
    urls = store_urls(args)
    if args.zones is None and not args.coverage and args.generate is None:
        args.generate = profile.zones
    if args.records is None:
        args.records = profile.records
    stream, _ = zone_source(args)
    # The reference is always measured, first: every ratio in the report is to it.
    drivers = [REFERENCE, *[d for d in selected_servers(args.drivers) if d != REFERENCE]]
    if args.threads is not None:
        threads = tuple(positive_counts(args.threads, "--threads"))
    threads = threads or profile.threads
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or REPO_ROOT / "results" / (stamp if command == "run" else f"{command}-{stamp}")
    run_dir = new_run_dir("bench")
    query_file = args.queries or _derive_query_file(stream, run_dir, profile.queries, args.seed)
    setup = Setup(reference=get_server(REFERENCE), servers=[get_server(d) for d in drivers[1:]],
                  stream=stream, dataset=_describe(args), query_file=query_file,
                  run_dir=run_dir, out_dir=out, threads=threads, connections=args.connections,
                  pin=args.pin, store_urls=urls)
    results = Results(meta={**metadata.collect(), "command": command, "profile": profile.name,
                            "parameters": {**profile.__dict__, "threads": list(setup.threads)},
                            "dnsperf_clients": {str(t): clients_for(profile, t)
                                                for t in setup.threads},
                            "connections": args.connections or "threads", "pin": args.pin,
                            "dataset": setup.dataset, "drivers": drivers,
                            **({"store_urls": urls.described()} if urls.urls else {})})
    print(f"dlzbench {command} {profile.name}: {', '.join(drivers)}; threads "
          f"{','.join(map(str, setup.threads))}; results in {out}", file=sys.stderr)
    return profile, setup, results


def run(args: argparse.Namespace) -> int:
    profile, setup, results = prepare(args, "run")
    return measure(Runner(profile, setup, results))


def measure(runner: Runner) -> int:
    """Run, keep what was gathered on Ctrl-C, write the report; the exit status."""
    try:
        runner.run()
    except KeyboardInterrupt:
        print("interrupted: keeping the results gathered so far", file=sys.stderr)
        _finish(runner.results, runner.setup.out_dir)
        return 130
    print(_finish(runner.results, runner.setup.out_dir))
    return 0


def _finish(results: Results, out: Path) -> str:
    save_results(results, out)
    return write_report(results, out)


def _derive_query_file(stream: Callable[[], Iterator[Zone]], run_dir: Path, count: int,
                       seed: int) -> Path:
    path = run_dir / "queries.txt"
    for _ in queries.write_query_file(stream(), path, count, seed=seed):
        pass
    return path


def _describe(args: argparse.Namespace) -> str:
    if args.zones is not None:
        return f"zone files from {args.zones}"
    if args.coverage:
        return "coverage data set"
    return f"{args.generate} generated zones x ~{args.records} records (seed {args.seed})"
