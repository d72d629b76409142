"""Where a command's zone data comes from: a zone-file directory or the generator.

Every command that takes data (`load`, `serve`, `verify`, `run`, `startup`) uses these options,
so a data set is named the same way everywhere and can be streamed again for each store.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path

from base.errors import UserError
from zonedata.model import Zone


def add_data_options(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--zones", type=Path, metavar="DIR", help="directory of RFC 1035 zone files")
    src.add_argument("--generate", type=int, metavar="N", help="generate N zones")
    src.add_argument("--coverage", action="store_true",
                     help="the small data set covering every record type and awkward name")
    parser.add_argument("--records", type=int, default=10, help="records per generated zone")
    parser.add_argument("--seed", type=int, default=1, help="generator seed")


def zone_source(args: argparse.Namespace) -> tuple[Callable[[], Iterator[Zone]], int | None]:
    """A function that streams the data set afresh on every call, and its zone count if known."""
    from zonedata import generator, zonefiles

    if args.zones is not None:
        if not args.zones.is_dir():
            raise UserError(f"zone directory {args.zones} does not exist")
        return (lambda: zonefiles.read_zone_dir(args.zones)), None
    if args.coverage:
        return (lambda: iter(generator.coverage_zones(args.seed))), None
    if args.generate < 1:
        raise UserError("--generate needs at least 1 zone")
    return (lambda: generator.generate(args.generate, args.records, args.seed)), args.generate
