"""`python3 -m bench writes`: reads at a fixed offered rate while a provisioning system writes
straight into each server's store through the store's own client: what reads pay, and how
fast each change shows (docs/method/writes.md)."""

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
from bench.commands.faults import _query_file, add_open_loop_options
from bench.measure import metadata
from bench.measure.datasets import describe, zone_source
from bench.measure.results import Results, load_results
from bench.measure.writes import (
    CEILING,
    METHOD,
    PROFILES,
    STALE_BOUND_MS,
    VIA_STORE,
    VIA_UPDATE,
    VIAS,
    Writes,
    measure_server,
    rate_text,
)
from servers import ServerKind, get_server

DEFAULT_PROFILE = "default"
# The reads are faults' open-loop load, with its --threads, --timeout and --queries and their
# defaults (bench/commands/faults.py says why each).
DEFAULT_SERVERS = "pg,mysql,ldap,fs,bdbhpt-t,native,pdns-gpgsql"
DEFAULT_ZONES = 1000


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("writes", help="reads at a fixed rate while the store is written "
                                      "(0, 10, 100, 1,000 writes/s and the ceiling): read "
                                      "QPS, loss, p50/p99/p99.9, writes/s, visibility delay")
    p.add_argument("--servers", "--drivers", dest="servers", default=DEFAULT_SERVERS,
                   metavar="S,...", help=f"the servers (default {DEFAULT_SERVERS}); a server "
                                         "whose store takes no writes is reported n/a")
    p.add_argument("--profile", choices=sorted(PROFILES), default=DEFAULT_PROFILE,
                   help=f"steps, their length, repeats and read rate (default "
                        f"{DEFAULT_PROFILE}; tiny: the tests' few seconds)")
    p.add_argument("--rates", metavar="N,...", help="write rates per second, 'ceiling' for as "
                                                    "fast as the writer goes (default: the "
                                                    "profile's)")
    p.add_argument("--read-qps", type=float, metavar="N",
                   help="reads offered per second, the same for every server (default: the "
                        "profile's)")
    p.add_argument("--read-share", type=float, metavar="F",
                   help="reads offered per second: this share of each server's read-only "
                        "breaking point in --capacity's results (e.g. 0.5), instead of "
                        "--read-qps")
    p.add_argument("--capacity", type=Path, metavar="DIR",
                   help="a `capacity` results directory, for --read-share")
    p.add_argument("--via", choices=VIAS, default=VIA_STORE,
                   help="store (default): writes straight into the store through its own "
                        "client; update: each record change an RFC 2136 UPDATE message to "
                        "the server, which writes its store itself (add, change and delete "
                        "of records only; servers that take no updates are n/a)")
    p.add_argument("--stale-bound-ms", type=float, default=STALE_BOUND_MS, metavar="MS",
                   help="the staleness check: a sampled answer that misses a write committed "
                        f"this long before its query is stale (default {STALE_BOUND_MS:g}, "
                        "the +cache rows' stated bound)")
    p.add_argument("--step", type=float, metavar="SECONDS", help="a step's length")
    p.add_argument("--repeats", type=int, metavar="N", help="repeats of every step")
    add_open_loop_options(p, reads=True)
    add_data_set_options(p, str(DEFAULT_ZONES))
    add_out_option(p, "writes-<timestamp>")
    p.set_defaults(func=run)


def parse_rates(text: str) -> tuple[int, ...]:
    rates = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part == "ceiling":
            rates.append(CEILING)
            continue
        try:
            rate = int(part)
        except ValueError:
            raise UserError(f"--rates: {part!r} is not a whole number or 'ceiling'") from None
        if rate < 0:
            raise UserError(f"--rates: {rate} is negative")
        rates.append(rate)
    if not rates or len(set(rates)) != len(rates):
        raise UserError(f"--rates {text!r}: give each rate once")
    return tuple(rates)


def read_rates(servers: list[ServerKind], args: argparse.Namespace,
               common: float) -> dict[str, float]:
    """Each server's offered read rate: the common one, or --read-share of its breaking
    point at --threads in the --capacity results."""
    if args.read_share is None:
        if args.capacity is not None:
            raise UserError("--capacity is read only with --read-share")
        return {server.name: common for server in servers}
    if args.capacity is None or not 0 < args.read_share <= 1:
        raise UserError("--read-share F needs 0 < F <= 1 and --capacity DIR")
    curves = load_results(args.capacity).capacity
    rates = {}
    for server in servers:
        curve = next((c for c in curves if c.server == server.name
                      and c.threads == args.threads), None)
        point = None if curve is None else curve.breaking_point()
        if point is None:
            raise UserError(f"{args.capacity} has no breaking point of {server.name} at "
                            f"{args.threads} thread(s)")
        rates[server.name] = args.read_share * point
    return rates


def _positive(name: str, value: float) -> float:
    if value <= 0:
        raise UserError(f"--{name} {value:g}: needs a positive value")
    return value


def run(args: argparse.Namespace) -> int:
    servers = [get_server(name.strip()) for name in args.servers.split(",") if name.strip()]
    if not servers:
        raise UserError("--servers: name at least one server")
    for server in servers:
        if not server.is_built():
            raise UserError(f"{server.name} is not built (run `make build`)")
    profile = PROFILES[args.profile]
    rates = parse_rates(args.rates) if args.rates else profile.rates
    common = _positive("read-qps", args.read_qps if args.read_qps is not None
                       else profile.read_qps)
    reads = read_rates(servers, args, common)
    step_s = _positive("step", args.step if args.step is not None else profile.step_s)
    repeats = int(_positive("repeats", args.repeats if args.repeats is not None
                            else profile.repeats))
    _positive("threads", args.threads)
    _positive("timeout", args.timeout)
    _positive("queries", args.queries)
    if args.zones is None and args.named_conf is None and not args.coverage \
            and args.generate is None:
        args.generate = DEFAULT_ZONES
    stream, _ = zone_source(args)
    out = args.out or REPO_ROOT / "results" / time.strftime("writes-%Y%m%d-%H%M%S")
    run_dir = new_run_dir("writes")
    query_file = _query_file(stream, run_dir / "queries.txt", args.queries, args.seed)
    stale_bound_ms = _positive("stale-bound-ms", args.stale_bound_ms)
    section = Writes(method=METHOD, profile=args.profile, dataset=describe(args),
                     step_s=step_s, repeats=repeats, rates=list(rates), via=args.via,
                     stale_bound_ms=stale_bound_ms)
    results = Results(meta={**metadata.collect(), "command": "writes",
                            "servers": [s.name for s in servers], "profile": args.profile,
                            "rates": [rate_text(r) for r in rates], "read_qps": reads,
                            "read_share": args.read_share,
                            "step_s": step_s, "repeats": repeats, "threads": args.threads,
                            "via": args.via, "stale_bound_ms": stale_bound_ms,
                            "timeout_s": args.timeout, "dataset": section.dataset},
                      writes=section)
    progress(f"dlzbench writes: {', '.join(s.name for s in servers)}; "
              f"{', '.join(f'{n} {q:,.0f}' for n, q in reads.items())} reads/s "
              f"with {', '.join(rate_text(r) for r in rates)} writes "
              f"({'RFC 2136 updates' if args.via == VIA_UPDATE else 'into the store'}), "
              f"{step_s:g} s a step, "
              f"{repeats} repeat(s); results in {out}")

    def measure() -> None:
        for server in servers:
            section.servers.append(measure_server(
                server, stream, query_file, run_dir, rates=rates, step_s=step_s,
                repeats=repeats, read_qps=reads[server.name], threads=args.threads,
                timeout_s=args.timeout, via=args.via, stale_bound_ms=stale_bound_ms,
                progress=progress))
    return measure_then_report(measure, results, out)
