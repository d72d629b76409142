"""Where a command's zone data comes from: a zone-file directory, an existing named.conf, or the
generator.

Every command that takes data (`load`, `serve`, `verify`, `run`, `capacity`, `tune`) uses
these options, so a data set is named the same way everywhere and can be streamed again for
each store; zone_source is the one place that turns the options into zones.

Signed data (zonedata/signing.py): `--sign` signs whatever the source gives with BIND's own
tools, once, into a run directory (keys beside the zones, under `.keys/`), before any store
sees a record, and every store then loads the signed files; `--signed` says a `--zones`
directory is signed already, and every zone is checked before anything is loaded. Either way
a zone that is not (or cannot be) signed stops the command with one line naming it, and no
store is left holding part of a signed data set.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from base.errors import UserError
from base.process import new_run_dir
from servers import selected_bind
from zonedata.model import Zone
from zonedata.namedconf import ConfZone, NamedConf, read_named_conf
from zonedata.queries import split_count, traffic_mix
from zonedata.traffic import Traffic, derive_query_file

# Bad zones named in full in the one error line; the rest are counted.
_BAD_ZONES_SHOWN = 5

Stream = Callable[[], Iterator[Zone]]


def add_data_options(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    add_zone_file_options(parser, src)
    src.add_argument("--generate", type=int, metavar="N", help="generate N zones")
    src.add_argument("--coverage", action="store_true",
                     help="the small data set covering every record type and awkward name")
    parser.add_argument("--records", type=int, default=10, help="records per generated zone")
    parser.add_argument("--seed", type=int, default=1, help="generator seed")
    add_signing_options(parser)


def add_zone_file_options(parser: argparse.ArgumentParser,
                          src: argparse._MutuallyExclusiveGroup) -> None:
    """--zones and --named-conf into the data-source group src; --skip-bad-zones beside."""
    src.add_argument("--zones", type=Path, metavar="DIR", help="directory of RFC 1035 zone files")
    src.add_argument("--named-conf", type=Path, metavar="FILE",
                     help="the primary (and secondary, where they have a file) zones of an "
                          "existing BIND configuration, read through named-checkconf -p")
    parser.add_argument("--skip-bad-zones", action="store_true",
                        help="with --named-conf: leave out zones whose file fails to load "
                             "(default: stop, listing them)")


def add_query_source_options(parser: argparse.ArgumentParser,
                             queries: argparse._MutuallyExclusiveGroup) -> None:
    """--queries-from into the group of query options `queries`; --only-zones beside."""
    queries.add_argument("--queries-from", type=Path, metavar="FILE",
                         help="real traffic as the queries: a BIND query log, a pcap/pcapng "
                              "capture or a dnsperf file (told apart by content)")
    parser.add_argument("--only-zones", action="store_true",
                        help="with --queries-from: keep only queries for the loaded zones")


def add_traffic_mix_options(parser: argparse.ArgumentParser) -> None:
    """--nxdomain-share and --unknown-zone-share: the query kinds of the derived query file
    (docs/method/mixes.md)."""
    parser.add_argument("--nxdomain-share", type=float, metavar="P", default=None,
                        help="percent of the queries for random names under existing zones "
                             "(NXDOMAIN; default 10), 0-100")
    parser.add_argument("--unknown-zone-share", type=float, metavar="P", default=None,
                        help="percent of the queries for names under no zone of the data set "
                             "(1-6 labels under a top-level label it does not have; default 0)")


def chosen_mix(args: argparse.Namespace) -> dict[str, float] | None:
    """The query kinds' shares --nxdomain-share and --unknown-zone-share ask for (None: the
    default mix); refused beside a query file the command does not make."""
    nxdomain, unknown = args.nxdomain_share, args.unknown_zone_share
    if nxdomain is None and unknown is None:
        return None
    given = [o for o, v in (("--queries", getattr(args, "queries", None)),
                            ("--queries-from", getattr(args, "queries_from", None)))
             if v is not None]
    if given:
        raise UserError(f"--nxdomain-share and --unknown-zone-share shape the query file the "
                        f"command makes from the data set: not with {given[0]}")
    return traffic_mix(nxdomain, unknown)


def mix_record(mix: dict[str, float], count: int) -> dict:
    """What results.json says of a mix: the shares asked for and each kind's query count."""
    return {"nxdomain_share_percent": round(100 * mix["nxdomain"], 6),
            "unknown_zone_share_percent": round(100 * mix["unknown"], 6),
            "queries_per_kind": split_count(count, mix)}


def traffic_queries(args: argparse.Namespace, stream: Callable[[], Iterator[Zone]],
                    run_dir: Path) -> tuple[Path, Traffic] | None:
    """The query file derived from --queries-from in run_dir (None without the option)."""
    if args.queries_from is None:
        if args.only_zones:
            raise UserError("--only-zones filters the queries of --queries-from: give that too")
        return None
    origins = (zone.origin for zone in stream()) if args.only_zones else None
    path = run_dir / "queries-from.txt"
    traffic = derive_query_file(args.queries_from, path, origins)
    print(traffic.summary(), file=sys.stderr)
    return path, traffic


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
    if args.named_conf is not None:
        zones = named_conf_zones(args.named_conf, skip_bad=args.skip_bad_zones)
        compilezone = selected_bind(need_drivers=False).compilezone
        return (lambda: (zone.read(compilezone) for zone in zones)), len(zones)
    if args.coverage:
        return (lambda: iter(generator.coverage_zones(args.seed))), None
    if args.generate < 1:
        raise UserError("--generate needs at least 1 zone")
    return (lambda: generator.generate(args.generate, args.records, args.seed)), args.generate


def describe(args: argparse.Namespace) -> str:
    """The data set in words, for reports and metadata."""
    if args.zones is not None:
        return f"zone files from {args.zones}"
    if args.named_conf is not None:
        return f"the zones of {args.named_conf}"
    if args.coverage:
        return "coverage data set"
    return f"{args.generate} generated zones x ~{args.records} records (seed {args.seed})"


def named_conf_zones(conf: Path, *, skip_bad: bool) -> list[ConfZone]:
    """The zones of conf that load, each read once here so that a bad one stops the command
    before any store is touched (or, with skip_bad, is left out with a warning)."""
    bind = selected_bind(need_drivers=False)
    found = read_named_conf(conf, bind.checkconf)
    _note_conf(found)
    good: list[ConfZone] = []
    bad: list[str] = []
    for zone in found.zones:
        try:
            zone.read(bind.compilezone)
        except UserError as exc:
            bad.append(f"{zone.origin.to_text()} ({exc})")
            continue
        good.append(zone)
    if bad and not skip_bad:
        shown = "; ".join(bad[:_BAD_ZONES_SHOWN])
        more = f"; and {len(bad) - _BAD_ZONES_SHOWN} more" if len(bad) > _BAD_ZONES_SHOWN else ""
        raise UserError(f"named.conf {conf}: {len(bad)} of {len(found.zones)} zones fail to "
                        f"load: {shown}{more} (--skip-bad-zones leaves them out)")
    for text in bad:
        print(f"warning: skipping zone {text}", file=sys.stderr)
    if not good:
        raise UserError(f"named.conf {conf}: no zone with data to load "
                        f"({_left_out_text(found) or 'no zone statements'})")
    return good


def _note_conf(found: NamedConf) -> None:
    """One line on what the configuration gave, one warning when views were flattened."""
    left_out = _left_out_text(found)
    print(f"{found.path}: {len(found.zones)} zones with data"
          + (f"; left out: {left_out}" if left_out else ""), file=sys.stderr)
    if found.views:
        print(f"warning: {found.path}: views {', '.join(found.views)} flattened into one set of "
              "zones (a zone in several views is taken from the first)", file=sys.stderr)


def _left_out_text(found: NamedConf) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in sorted(found.left_out.items()))


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
