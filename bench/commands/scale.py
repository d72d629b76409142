"""`python3 -m bench scale`: QPS and latency against data size, uniform and popular query mixes,
and zone shape (bench/measure/scale.py)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import new_run_dir
from bench.commands import add_out_option, add_pin_option, positive_counts
from bench.commands.run import (
    add_load_from_options,
    listen_for,
    load_from_urls,
    measure,
    open_load_hosts,
)
from bench.measure import metadata
from bench.measure.datasets import add_traffic_mix_options
from bench.measure.results import Results, load_results
from bench.measure.runner import PROFILES, Setup, clients_for
from bench.measure.scale import (
    DEFAULT_ZONE_COUNTS,
    DataSet,
    Plan,
    ScaleRunner,
    merge_into,
    parse_shapes,
)
from servers import REFERENCE, get_server, selected_servers
from zonedata.mixes import DEFAULT_EXPONENT, MIXES, check_exponent, parse_mixes
from zonedata.queries import traffic_mix


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scale", help="QPS and latency against zone count (1,000 to 1,000,000), "
                                     "uniform and popular query mixes, zone shape")
    p.add_argument("--zones-counts", default=None,
                   help="comma list of zone counts (default "
                        f"{','.join(map(str, DEFAULT_ZONE_COUNTS))}; none when only --shapes "
                        "is given)")
    p.add_argument("--records", type=int, default=10,
                   help="records per zone of the --zones-counts data sets (default 10)")
    p.add_argument("--shapes", default=None, metavar="ZxR,...",
                   help="data sets of Z zones x R records each, to compare the same records "
                        "as few large or many small zones, e.g. 10x100000,100000x10")
    p.add_argument("--servers", "--drivers", dest="servers", default="all",
                   help="'all' (native and every built server) or a comma list, e.g. native,pg")
    p.add_argument("--mixes", default=",".join(MIXES),
                   help=f"query mixes over the whole data set (default {','.join(MIXES)})")
    p.add_argument("--zipf", type=float, default=DEFAULT_EXPONENT, metavar="S",
                   help="the popular mix's exponent: rank r is asked for with weight 1/r^S "
                        f"(default {DEFAULT_EXPONENT:g}; 0 makes it uniform at random)")
    p.add_argument("--queries", type=int, default=None, metavar="N",
                   help="lines per query file (default: the profile's, and at least one per "
                        "zone)")
    p.add_argument("--threads", type=int, default=1, help="server worker threads (default 1)")
    add_traffic_mix_options(p)
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                   help="run lengths: quick (default), full, tiny (tests)")
    p.add_argument("--timeout", type=float, default=3600.0,
                   help="seconds to wait for a server to answer for the last zone (default 3600: "
                        "native BIND takes minutes at a million zones)")
    add_pin_option(p)
    p.add_argument("--seed", type=int, default=1)
    add_out_option(p, "scale-<timestamp>")
    add_load_from_options(p)
    p.add_argument("--add-to", type=Path, default=None, metavar="DIR",
                   help="add the cells to the results in DIR (a cell measured again replaces "
                        "its old one as soon as it is measured)")
    p.set_defaults(func=run)


def datasets_from(args: argparse.Namespace) -> list[DataSet]:
    """The zone-count curve and the shapes asked for; bad values are one clear error."""
    if args.records < 1:
        raise UserError(f"--records {args.records}: needs at least 1 record per zone")
    counts_text = args.zones_counts
    if counts_text is None and args.shapes is None:
        counts_text = ",".join(map(str, DEFAULT_ZONE_COUNTS))
    datasets: dict[tuple[int, int], DataSet] = {}
    if counts_text is not None:
        for n in positive_counts(counts_text, "--zones-counts"):
            datasets[n, args.records] = DataSet(n, args.records)
    # A shape that is also a point of the curve is one data set, measured once.
    for shape in parse_shapes(args.shapes) if args.shapes is not None else []:
        datasets[shape.zones, shape.records] = shape
    return list(datasets.values())


def plan_from(args: argparse.Namespace) -> Plan:
    datasets = datasets_from(args)
    if args.queries is not None and args.queries < 1:
        raise UserError(f"--queries {args.queries}: needs at least 1 query")
    if args.threads < 1:
        raise UserError(f"--threads {args.threads}: needs at least 1 thread")
    mixes, exponent = parse_mixes(args.mixes), check_exponent(args.zipf)
    kinds = traffic_mix(args.nxdomain_share, args.unknown_zone_share)
    return Plan(datasets=tuple(datasets), servers=tuple(selected_servers(args.servers)),
                mixes=mixes, exponent=exponent, queries=args.queries, threads=args.threads,
                seed=args.seed, kinds=kinds)


def run(args: argparse.Namespace) -> int:
    plan = plan_from(args)  # every bad option stops here, before anything starts
    load_from = load_from_urls(args)
    listen_for(load_from, args)
    if args.add_to is not None and args.out is not None:
        raise UserError("--out and --add-to are exclusive: --add-to writes into its directory")
    if args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout:g}: needs a positive number of seconds")
    profile = dataclasses.replace(PROFILES[args.profile], startup_timeout_s=args.timeout)
    out = args.add_to or args.out or REPO_ROOT / "results" / time.strftime("scale-%Y%m%d-%H%M%S")
    meta = {**metadata.collect(), "command": "scale",
            "scale": {"profile": profile.name, "seed": plan.seed, "records": args.records,
                      "zipf_exponent": plan.exponent, "threads": plan.threads,
                      "mixes": list(plan.mixes), "queries": plan.queries or "profile, >= zones",
                      "query_kinds": dict(plan.kinds),
                      "dnsperf_clients": clients_for(profile, plan.threads),
                      "duration": profile.duration_s, "runs": profile.runs,
                      "warmup_s": profile.warmup_s, "probes": profile.probes}}
    if args.add_to is not None:
        results = merge_into(load_results(args.add_to), plan, meta)
    else:
        results = Results(meta={**meta, "servers": list(plan.servers),
                                "datasets": [d.name for d in plan.datasets],
                                "runs": profile.runs, "duration": profile.duration_s})
    hosts = open_load_hosts(load_from, args)
    results.meta.update(metadata.load_from(hosts))
    if args.listen is not None:
        results.meta["listen"] = args.listen
    run_dir = new_run_dir("scale")
    first = plan.datasets[0]
    # The runner's Setup; scale gives each cell its own query file and data set as it goes.
    setup = Setup(reference=get_server(REFERENCE), servers=[get_server(n) for n in plan.servers],
                  stream=first.stream(plan.seed), dataset="scale", query_file=run_dir,
                  run_dir=run_dir, out_dir=out, threads=(plan.threads,),
                  pin=args.pin and not hosts, load_hosts=hosts)
    print(f"dlzbench scale {profile.name}: {', '.join(plan.servers)}; data sets "
          f"{', '.join(d.name for d in plan.datasets)}; mixes {', '.join(plan.mixes)}; results "
          f"in {out}", file=sys.stderr)
    return measure(ScaleRunner(profile, setup, results, plan))
