"""`python3 -m bench startup`: each server's startup time and memory against the number of
zones."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import new_run_dir
from bench.commands import add_out_option, positive_counts, progress
from bench.measure import metadata
from bench.measure.results import Results, load_results, save_results
from bench.measure.startup import StartupPoint, measure_count
from bench.report.render import write_report
from servers import selected_servers


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("startup", help="time each server's startup against zone count")
    p.add_argument("--zones-counts", default="1000,10000,100000,1000000",
                   help="comma list of zone counts (default 1000,10000,100000,1000000)")
    p.add_argument("--servers", "--drivers", dest="servers", default="all",
                   help="'all' (native and every built server) or a comma list, e.g. native,pg")
    p.add_argument("--records", type=int, default=10, help="records per generated zone")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--starts", type=int, default=5,
                   help="fresh starts of each server at each count (default 5): the time is "
                        "their geometric mean with a 95%% interval over them")
    p.add_argument("--timeout", type=float, default=3600.0,
                   help="seconds to wait for a server to answer for the last zone")
    add_out_option(p, "startup-<timestamp>")
    p.add_argument("--add-to", type=Path, default=None, metavar="DIR",
                   help="add the points to the results in DIR, of `startup` or of `run` (a "
                        "server and count measured again replaces its old point)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    counts = positive_counts(args.zones_counts, "--zones-counts")
    if args.starts < 1:
        raise UserError(f"--starts {args.starts}: at least one start")
    names = selected_servers(args.servers)
    if args.add_to is not None and args.out is not None:
        raise UserError("--out and --add-to are exclusive: --add-to writes into its directory")
    out = args.add_to or args.out or REPO_ROOT / "results" / time.strftime("startup-%Y%m%d-%H%M%S")
    params = {"command": "startup", "servers": names, "zone_counts": counts,
              "records_per_zone": args.records, "seed": args.seed, "timeout_s": args.timeout,
              "starts": args.starts}
    if args.add_to is not None:
        results = earlier_results(args.add_to, params, names, counts)
    else:
        results = Results(meta={**metadata.collect(), **params})
    run_dir = new_run_dir("startup")

    def record(point: StartupPoint) -> None:
        results.startup_scaling.append(point)
        save_results(results, out)

    try:
        for count in counts:
            measure_count(names, count, args.records, args.seed, run_dir, args.timeout,
                          args.starts, progress, record)
    except KeyboardInterrupt:
        print("interrupted: keeping the results gathered so far", file=sys.stderr)
        save_results(results, out)
        write_report(results, out)
        return 130
    print(write_report(results, out))
    return 0


def earlier_results(directory: Path, params: dict, names: list[str],
                    counts: list[int]) -> Results:
    """The results in directory (of `startup`, or of `run`: its report then gains the startup
    tables), less the points about to be measured again; this run's commit, date and
    parameters are noted in the metadata beside the first run's."""
    results = load_results(directory)
    for key in ("records_per_zone", "seed"):
        if key in results.meta and results.meta[key] != params[key]:
            raise UserError(f"{directory} was measured with {key}={results.meta[key]}, "
                            f"not {params[key]}: its points would not be comparable")
    remeasured = {(s, n) for s in names for n in counts}
    results.startup_scaling = [p for p in results.startup_scaling
                               if (p.server, p.zones) not in remeasured]
    added = metadata.added_run(results.meta, metadata.collect())
    results.meta.setdefault("added_runs", []).append(
        {**added, "servers": names, "zone_counts": counts,
         "records_per_zone": params["records_per_zone"], "seed": params["seed"],
         "starts": params["starts"]})
    return results
