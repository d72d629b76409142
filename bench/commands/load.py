"""`python3 -m bench load`: put one data set into stores, reporting records/s per store."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from base.paths import REPO_ROOT
from bench.commands import add_store_url_options, store_urls
from bench.measure.datasets import add_data_options, zone_source
from bench.measure.loading import LoadStats, timed_load
from bench.measure.progress import ZoneProgress
from loaders import get_loader
from servers import parse_store_list


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("load", help="load zone data into stores")
    add_data_options(p)
    p.add_argument("--stores", default="all",
                   help="'all' or a comma list, e.g. pg,mysql,ldap,fs,bdb,bdbhpt")
    p.add_argument("--data", type=Path, default=REPO_ROOT / "run" / "data",
                   help="directory holding every store's instance (default: run/data)")
    add_store_url_options(p)
    p.add_argument("--json", type=Path, default=None,
                   help="also write the per-store figures to this JSON file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    loaders = [get_loader(name) for name in parse_store_list(args.stores)]
    urls = store_urls(args)
    stream, total = zone_source(args)
    results: list[LoadStats] = []
    for loader in loaders:
        with urls.server(loader.database, args.data / loader.name) as target:
            print(f"{loader.name}: loading into {urls.place(loader.name, args.data / loader.name)}",
                  flush=True)
            progress = ZoneProgress(f"loading {loader.name}", total)
            stats = timed_load(loader, progress.wrap(stream()), target)
            results.append(stats)
            print(f"{loader.name}: {stats.zones} zones, {stats.records} records in "
                  f"{stats.seconds:.1f}s ({stats.records_per_second:,.0f} records/s)", flush=True)
    print_summary(results)
    if args.json is not None:
        peak_kb = own_peak_rss_kb()
        args.json.write_text(json.dumps([{**vars(s), "records_per_second": s.records_per_second,
                                          "peak_rss_kb": peak_kb} for s in results]) + "\n")
    return 0


def own_peak_rss_kb() -> int:
    """This program's peak resident memory (with several stores, the peak over all of them).

    VmHWM, not getrusage: Linux carries ru_maxrss over exec, so a loader started from a big
    parent would report the parent's peak; and the servers and tools (slapadd) the loader
    starts are other processes, not counted.
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def print_summary(results: list[LoadStats]) -> None:
    print(f"\n{'store':<8} {'zones':>9} {'records':>11} {'seconds':>9} {'records/s':>11}")
    for s in results:
        print(f"{s.store:<8} {s.zones:>9} {s.records:>11} {s.seconds:>9.1f} "
              f"{s.records_per_second:>11,.0f}")
