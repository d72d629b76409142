"""`python3 -m bench updates`: RFC 2136 dynamic updates per second by records per message, with
and without TSIG, every server that takes updates measured in interleaved rounds, and its
answers afterwards against native BIND's (docs/method/updates-rate.md)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import new_run_dir
from bench.commands import add_data_set_options, add_out_option, positive_counts, progress
from bench.measure import metadata
from bench.measure.datasets import describe, zone_source
from bench.measure.results import Results, save_results
from bench.measure.updates import METHOD, PROFILES, Profile, Updates, measure
from bench.report.render import write_report
from servers import REFERENCE, ServerKind, get_server, registered_servers

DEFAULT_PROFILE = "default"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("updates", help="RFC 2136 dynamic updates per second by records per "
                                       "message, with and without TSIG, per server")
    p.add_argument("--servers", "--drivers", dest="servers", default="all", metavar="LIST",
                   help="comma list of servers that take updates (default: all of them but "
                        "PowerDNS's cached rows); native BIND is always measured")
    p.add_argument("--profile", choices=sorted(PROFILES), default=DEFAULT_PROFILE,
                   help=f"batch sizes, names, senders and rounds (default {DEFAULT_PROFILE}; "
                        "tiny: the tests' few seconds)")
    p.add_argument("--batches", metavar="N,N,...",
                   help="records per update message (default: the profile's, 1,10,100)")
    p.add_argument("--names", type=int, metavar="N",
                   help="names each repeat adds and then deletes (default: the profile's)")
    p.add_argument("--senders", type=int, metavar="N",
                   help="concurrent senders, each over a TCP connection of its own")
    p.add_argument("--rounds", type=int, metavar="N",
                   help="repeats of every cell, interleaved (6 give a 95%% interval)")
    p.add_argument("--threads", type=int, metavar="N", help="the servers' threads")
    add_data_set_options(p, "the profile's")
    add_out_option(p, "updates-<timestamp>")
    p.set_defaults(func=run)


def chosen_profile(args: argparse.Namespace) -> Profile:
    """The profile with the command line's changes, checked."""
    profile = PROFILES[args.profile]
    changes: dict[str, object] = {}
    if args.batches:
        changes["batch_sizes"] = tuple(positive_counts(args.batches, "--batches"))
    for option, name in (("names", "records"), ("senders", "senders"), ("rounds", "rounds"),
                         ("threads", "threads")):
        value = getattr(args, option)
        if value is not None:
            if value < 1:
                raise UserError(f"--{option} {value}: needs at least 1")
            changes[name] = value
    return dataclasses.replace(profile, **changes)


def chosen_servers(text: str) -> list[ServerKind]:
    """Native BIND first, then the servers named (or every one that takes updates)."""
    if text == "all":
        names = [s.name for s in registered_servers() if s.takes_updates() and s.is_built()
                 and not s.caches_answers()]
    else:
        names = [n.strip() for n in text.split(",") if n.strip()]
    servers = [get_server(name) for name in dict.fromkeys([REFERENCE, *names])]
    for server in servers:
        if not server.takes_updates():
            raise UserError(f"{server.name} takes no dynamic updates in this suite")
        if not server.is_built():
            raise UserError(f"{server.name} is not built (run `make build`)")
    return servers


def run(args: argparse.Namespace) -> int:
    profile = chosen_profile(args)
    servers = chosen_servers(args.servers)
    if args.zones is None and args.named_conf is None and not args.coverage \
            and args.generate is None:
        args.generate = profile.zones
    stream, _ = zone_source(args)
    out = args.out or REPO_ROOT / "results" / time.strftime("updates-%Y%m%d-%H%M%S")
    section = Updates(method=METHOD, profile=args.profile, dataset=describe(args),
                      senders=profile.senders, records=profile.records,
                      batch_sizes=list(profile.batch_sizes), open_zone="", keyed_zone="",
                      threads=profile.threads)
    results = Results(meta={**metadata.collect(), "command": "updates",
                            "servers": [s.name for s in servers], "profile": args.profile,
                            "batch_sizes": list(profile.batch_sizes),
                            "names": profile.records, "senders": profile.senders,
                            "update_rounds": profile.rounds, "threads": profile.threads,
                            "dataset": section.dataset},
                      updates=section)
    progress(f"dlzbench updates: {', '.join(s.name for s in servers)}; "
              f"{profile.rounds} round(s) of {len(servers) * len(profile.batch_sizes) * 2} "
              f"cells; results in {out}")
    try:
        measure(servers, stream, new_run_dir("updates"), profile, section,
                lambda: save_results(results, out), progress)
    except KeyboardInterrupt:
        kept = (f"the {section.rounds_done} round(s) done are in {out}" if section.rounds_done
                else "nothing measured to keep")
        print(f"interrupted: {kept}", file=sys.stderr)
        return 130
    save_results(results, out)
    print(write_report(results, out))
    return 0
