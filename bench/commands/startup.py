"""`python3 -m bench startup`: named's startup time and memory against the number of zones."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench import metadata
from bench.commands import positive_counts
from bench.commands.verify import selected_drivers
from bench.report import write_report
from bench.results import Results, save_results
from bench.servers.process import REPO_ROOT, new_run_dir
from bench.startup import measure_count


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("startup", help="time named's startup against zone count, every driver")
    p.add_argument("--zones-counts", default="1000,10000,100000,1000000",
                   help="comma list of zone counts (default 1000,10000,100000,1000000)")
    p.add_argument("--drivers", default="all",
                   help="'all' (native and every built driver) or a comma list")
    p.add_argument("--records", type=int, default=10, help="records per generated zone")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=3600.0,
                   help="seconds to wait for named to answer for the last zone")
    p.add_argument("--out", type=Path, default=None,
                   help="results directory (default: results/startup-<timestamp>)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    counts = positive_counts(args.zones_counts, "--zones-counts")
    drivers = ["native", *[d for d in selected_drivers(args.drivers) if d != "native"]]
    out = args.out or REPO_ROOT / "results" / time.strftime("startup-%Y%m%d-%H%M%S")
    results = Results(meta={**metadata.collect(), "command": "startup", "drivers": drivers,
                            "zone_counts": counts, "records_per_zone": args.records,
                            "seed": args.seed, "timeout_s": args.timeout})
    run_dir = new_run_dir("startup")
    try:
        for count in counts:
            results.startup_scaling += measure_count(drivers, count, args.records, args.seed,
                                                     run_dir, args.timeout, _progress)
            save_results(results, out)
    except KeyboardInterrupt:
        print("interrupted: keeping the results gathered so far", file=sys.stderr)
        save_results(results, out)
        write_report(results, out)
        return 130
    print(write_report(results, out))
    return 0


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
