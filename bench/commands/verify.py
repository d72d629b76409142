"""`python3 -m bench verify`: every server's answers against native BIND (and a DLZ driver's
against the memory driver's)."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path

import dns.name

from base.errors import UserError
from base.process import new_run_dir
from bench.commands import add_store_url_options, signable_servers, store_urls
from bench.measure.datasets import (
    add_data_options,
    add_query_source_options,
    traffic_queries,
    zone_source,
)
from bench.measure.serving import serving
from bench.verify.compare import (
    KNOWN_CLASSES,
    UNEXPLAINED,
    Comparison,
    compare_servers,
    references_for,
)
from servers import REFERENCE, selected_servers
from zonedata.derive import Query, derive_queries
from zonedata.model import Zone
from zonedata.queries import read_query_file


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="compare every server's answers with native BIND")
    add_data_options(p)
    queries = p.add_mutually_exclusive_group()
    queries.add_argument("--queries", type=Path, metavar="FILE",
                         help="dnsperf-format query file (default: queries derived from the "
                              "zones)")
    add_query_source_options(p, queries)
    p.add_argument("--servers", "--drivers", dest="servers", default="all",
                   help="'all' (every server that is built) or a comma list")
    p.add_argument("--threads", type=int, default=2, help="server worker threads")
    p.add_argument("--no-axfr", action="store_true", help="skip the zone transfer comparison")
    add_store_url_options(p)
    p.add_argument("--dnssec", action="store_true",
                   help="set the DO bit on every query (signed data: RRSIGs and NSEC/NSEC3 "
                        "proofs are compared too)")
    p.set_defaults(func=run)


def load_queries(args: argparse.Namespace, zones: list[Zone], run_dir: Path) -> list[Query]:
    traffic = traffic_queries(args, lambda: iter(zones), run_dir)
    path = traffic[0] if traffic else args.queries
    if path is None:
        return derive_queries(zones, args.seed)
    return [(dns.name.from_text(name), rdtype) for name, rdtype in read_query_file(path)]


def run(args: argparse.Namespace) -> int:
    urls = store_urls(args)
    # Over signed data, only the servers that can serve a signed zone: chosen before signing.
    names = (signable_servers(args.servers, "verify of signed data") if args.sign or args.signed
             else selected_servers(args.servers))
    judged = [n for n in names if n != REFERENCE]
    if not judged:
        raise UserError(f"verify compares servers with {REFERENCE}: --servers names no other")
    stream, _ = zone_source(args)
    zones = list(stream())
    run_dir = new_run_dir("verify")
    queries = load_queries(args, zones, run_dir)
    with ExitStack() as stack:
        served = {d: stack.enter_context(serving(d, lambda: iter(zones), run_dir / d,
                                                 threads=args.threads, store_urls=urls))
                  for d in dict.fromkeys([*references_for(judged), *judged])}
        print(f"verifying {len(queries)} queries over {len(zones)} zones"
              f"{' with the DO bit' if args.dnssec else ''}: {', '.join(served)}", flush=True)
        results = compare_servers({d: s.server for d, s in served.items()}, queries, zones,
                                  transfers=not args.no_axfr, dnssec=args.dnssec)
    return report(results)


def report(results: dict[str, Comparison]) -> int:
    """A line per server, every unexplained difference, what each class seen means; 1 on any
    unexplained difference."""
    seen_classes: set[str] = set()
    for comparison in results.values():
        print(comparison.summary())
        # A difference several behaviours explain together is counted under "a+b".
        seen_classes.update(part for c in comparison.classes if c != UNEXPLAINED
                            for part in c.split("+"))
        for text in comparison.differences:
            print(f"  {text}")
    for cls in sorted(seen_classes):
        print(f"  {cls}: {KNOWN_CLASSES[cls].describe()}")
    return 1 if any(c.unexplained for c in results.values()) else 0
