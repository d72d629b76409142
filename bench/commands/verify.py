"""`python3 -m bench verify`: every driver's answers against native BIND and the memory driver."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path

import dns.name

from bench.datasets import add_data_options, zone_source
from bench.errors import UserError
from bench.servers.process import new_run_dir
from bench.serving import Served, serving
from bench.verify import (
    BIND_CLASSES,
    Comparison,
    Query,
    ZoneFacts,
    ask,
    classify,
    compare_answers,
    derive_queries,
    transfer,
)
from loaders import all_drivers, store_for_driver
from loaders.model import Zone
from loaders.queries import read_query_file

REFERENCE = ("native", "memory")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="compare every driver's answers with native BIND")
    add_data_options(p)
    p.add_argument("--queries", type=Path, metavar="FILE",
                   help="dnsperf-format query file (default: queries derived from the zones)")
    p.add_argument("--drivers", default="all",
                   help="'all' (every driver that is built) or a comma list")
    p.add_argument("--threads", type=int, default=2, help="named worker threads")
    p.add_argument("--no-axfr", action="store_true", help="skip the zone transfer comparison")
    p.set_defaults(func=run)


def selected_drivers(text: str) -> list[str]:
    """Drivers to check besides the references, in registry order."""
    if text == "all":
        return [d for d in all_drivers() if d not in REFERENCE and _built(d)]
    names = [d.strip() for d in text.split(",") if d.strip() and d.strip() not in REFERENCE]
    for name in names:
        if not _built(name):
            raise UserError(f"driver {name} is not built (run `make build`)")
    return names


def _built(driver: str) -> bool:
    store, variant = store_for_driver(driver)
    return store.is_built(variant)


def load_queries(args: argparse.Namespace, zones: list[Zone]) -> list[Query]:
    if args.queries is None:
        return derive_queries(zones, args.seed)
    return [(dns.name.from_text(name), rdtype) for name, rdtype in read_query_file(args.queries)]


def run(args: argparse.Namespace) -> int:
    stream, _ = zone_source(args)
    zones = list(stream())
    drivers = selected_drivers(args.drivers)
    queries = load_queries(args, zones)
    run_dir = new_run_dir("verify")
    with ExitStack() as stack:
        served = {d: stack.enter_context(serving(d, lambda: iter(zones), run_dir / d,
                                                 threads=args.threads))
                  for d in [*REFERENCE, *drivers]}
        print(f"verifying {len(queries)} queries over {len(zones)} zones: "
              f"{', '.join(served)}", flush=True)
        results = compare_queries(served, queries, ZoneFacts.of(zones))
        if not args.no_axfr:
            compare_transfers(served, zones, results)
    return report(results)


def compare_queries(served: dict[str, Served], queries: list[Query],
                    facts: ZoneFacts) -> dict[str, Comparison]:
    results = {d: Comparison(d) for d in served if d != "native"}
    for query in queries:
        native = ask(served["native"].named, query)
        memory = ask(served["memory"].named, query)
        diff = compare_answers(query, native, memory)
        results["memory"].add(None if diff is None else classify(query, *diff, facts),
                              _detail(query, diff))
        for driver in results:
            if driver == "memory":
                continue
            diff = compare_answers(query, memory, ask(served[driver].named, query))
            results[driver].add(None if diff is None else "driver", _detail(query, diff))
    return results


def compare_transfers(served: dict[str, Served], zones: list[Zone],
                      results: dict[str, Comparison]) -> None:
    for zone in zones:
        query: Query = (zone.origin, "AXFR")
        native = transfer(served["native"].named, zone.origin)
        memory = transfer(served["memory"].named, zone.origin)
        cls = "root-zone" if zone.origin == dns.name.root else "driver"
        results["memory"].add(None if native == memory else cls,
                              _detail(query, (native, memory)))
        for driver in results:
            if driver != "memory":
                got = transfer(served[driver].named, zone.origin)
                results[driver].add(None if got == memory else "driver",
                                    _detail(query, (memory, got)))


def _detail(query: Query, diff: tuple | None) -> str:
    if diff is None:
        return ""
    expected, got = diff
    return (f"{query[0]} {query[1]}\n    expected {expected.describe()}\n"
            f"    got      {got.describe()}")


def report(results: dict[str, Comparison]) -> int:
    seen_classes: set[str] = set()
    for comparison in results.values():
        print(comparison.summary())
        seen_classes.update(c for c in comparison.classes if c != "driver")
        for detail in comparison.differences:
            print(f"  {detail}")
    for cls in sorted(seen_classes):
        print(f"  {cls}: {BIND_CLASSES[cls]}")
    return 1 if any(c.driver_differences for c in results.values()) else 0
