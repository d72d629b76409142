"""Where a command's zone data comes from: a zone-file directory or the generator.

Every command that takes data (`load`, `serve`, `verify`, `run`, `startup`) uses these options,
so a data set is named the same way everywhere and can be streamed again for each store.

Signed data (zonedata/signing.py): `--sign` signs whatever the source gives with BIND's own
tools, once, into a run directory (keys beside the zones, under `.keys/`), before any store
sees a record, and every store then loads the signed files; `--signed` says a `--zones`
directory is signed already, and every zone is checked before anything is loaded. Either way
a zone that is not (or cannot be) signed stops the command with one line naming it, and no
store is left holding part of a signed data set.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path

from base.errors import UserError
from base.process import new_run_dir
from zonedata.model import Zone

Stream = Callable[[], Iterator[Zone]]


def add_data_options(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--zones", type=Path, metavar="DIR", help="directory of RFC 1035 zone files")
    src.add_argument("--generate", type=int, metavar="N", help="generate N zones")
    src.add_argument("--coverage", action="store_true",
                     help="the small data set covering every record type and awkward name")
    parser.add_argument("--records", type=int, default=10, help="records per generated zone")
    parser.add_argument("--seed", type=int, default=1, help="generator seed")
    add_signing_options(parser)


def add_signing_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sign", action="store_true",
                        help="sign every zone first (dnssec-keygen, dnssec-signzone; NSEC)")
    parser.add_argument("--nsec3", action="store_true",
                        help="with --sign: NSEC3 (no salt, 0 iterations) instead of NSEC")
    parser.add_argument("--signed", action="store_true",
                        help="the --zones directory is signed already: check every zone")


def zone_source(args: argparse.Namespace) -> tuple[Stream, int | None]:
    """A function that streams the data set afresh on every call, and its zone count if known."""
    stream, count = _unsigned_source(args)
    sign, nsec3, signed = (getattr(args, name, False) for name in ("sign", "nsec3", "signed"))
    if nsec3 and not sign:
        raise UserError("--nsec3 only applies to --sign")
    if sign and signed:
        raise UserError("--sign signs unsigned data, --signed names signed data: give one")
    if sign:
        return signed_copy(stream, nsec3), count
    if signed:
        check_signed_source(stream)
    return stream, count


def _unsigned_source(args: argparse.Namespace) -> tuple[Stream, int | None]:
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


def signed_copy(stream: Stream, nsec3: bool = False) -> Stream:
    """Sign the data set once into a new run directory; stream the signed zone files."""
    from zonedata import signing, zonefiles

    out = new_run_dir("signed") / "zones"
    count = signing.sign_zones(stream(), out, signing.SigningOptions(nsec3=nsec3))
    print(f"signed {count} zones ({'NSEC3' if nsec3 else 'NSEC'}) into {out}; keys and trust "
          f"anchors in {out / signing.KEYS_DIR}", flush=True)
    return lambda: zonefiles.read_zone_dir(out)


def check_signed_source(stream: Stream) -> None:
    """Every zone of a data set said to be signed is signed: checked before any store loads."""
    from zonedata import signing

    for zone in stream():
        signing.check_signed(zone)
