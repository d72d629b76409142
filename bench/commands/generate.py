"""`python3 -m bench generate`: a synthetic data set as zone files plus a dnsperf query file."""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterator
from pathlib import Path

from base.errors import UserError
from zonedata.generator import appendix_b, coverage_zones, generate
from zonedata.model import Zone
from zonedata.queries import DEFAULT_QUERY_MIX, QuerySampler, parse_mix
from zonedata.signing import KEYS_DIR, SigningOptions, sign_zones
from zonedata.zonefiles import write_zone_dir

QUERY_FILE = "queries.txt"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="write a synthetic data set (zone files, query file)")
    p.add_argument("--zones", type=int, default=0, help="generated zones (z000000.bench.test, …)")
    p.add_argument("--records", type=int, default=10, help="records per generated zone")
    p.add_argument("--seed", type=int, default=1, help="same seed, same bytes (default 1)")
    p.add_argument("--appendix-b", type=int, metavar="HOSTS", default=0,
                   help="add Appendix B's set (Principled Technologies' report): zone pti. "
                        "with HOSTS A records + PTRs")
    p.add_argument("--coverage", action="store_true",
                   help="add the coverage set (every record type and awkward name)")
    p.add_argument("--out", type=Path, required=True, help="new or empty output directory")
    p.add_argument("--queries", type=int, default=10000, metavar="COUNT",
                   help=f"queries to sample into {QUERY_FILE} (0: none; default 10000)")
    p.add_argument("--mix", type=parse_mix, default=dict(DEFAULT_QUERY_MIX),
                   help="query mix, e.g. hit=0.8,nxdomain=0.1,nodata=0.1 (unknown=S: names "
                        "under no zone)")
    p.add_argument("--shard", type=int, default=1000,
                   help="sub-directories the zone files are spread over (1: none)")
    p.add_argument("--signed", action="store_true",
                   help="sign every zone with dnssec-keygen/dnssec-signzone (NSEC; keys under "
                        "OUT/.keys)")
    p.add_argument("--nsec3", action="store_true",
                   help="with --signed: NSEC3 (no salt, 0 iterations) instead of NSEC")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    zones = _selected_zones(args)
    records = 0

    def counted(stream: Iterator[Zone]) -> Iterator[Zone]:
        nonlocal records
        for zone in stream:
            records += len(zone.records)
            yield zone

    sampler = QuerySampler(args.queries, args.mix, args.seed)
    watched = sampler.watch(counted(zones))
    if args.signed:
        written = sign_zones(watched, args.out, SigningOptions(nsec3=args.nsec3),
                             shard=args.shard)
        chain = "NSEC3" if args.nsec3 else "NSEC"
        print(f"signed {written} zones ({records} records before signing, {chain}) under "
              f"{args.out}; keys and trust anchors in {args.out / KEYS_DIR}")
    else:
        written = write_zone_dir(watched, args.out, shard=args.shard)
        print(f"wrote {written} zones ({records} records) under {args.out}")
    if args.queries:
        per_kind = sampler.write(args.out / QUERY_FILE)
        kinds = ", ".join(f"{kind} {n}" for kind, n in per_kind.items())
        print(f"wrote {args.queries} queries ({kinds}) to {args.out / QUERY_FILE}")
    return 0


def _check_args(args: argparse.Namespace) -> None:
    if min(args.zones, args.records, args.appendix_b, args.queries) < 0:
        raise UserError("--zones, --records, --appendix-b and --queries must not be negative")
    if not (args.zones or args.appendix_b or args.coverage):
        raise UserError("nothing to generate: give --zones N, --appendix-b HOSTS or --coverage")
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        raise UserError(f"--out {args.out} exists and is not an empty directory")
    if args.nsec3 and not args.signed:
        raise UserError("--nsec3 only applies to --signed")


def _selected_zones(args: argparse.Namespace) -> Iterator[Zone]:
    sources: list[Iterator[Zone]] = []
    if args.coverage:
        sources.append(iter(coverage_zones(args.seed)))
    if args.appendix_b:
        sources.append(appendix_b(args.appendix_b, args.seed))
    if args.zones:
        sources.append(generate(args.zones, args.records, args.seed))
    return itertools.chain(*sources)
