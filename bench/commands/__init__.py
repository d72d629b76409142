"""One module per CLI subcommand, each with `add_parser(subparsers)` and `run(args) -> int`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from base.errors import UserError
from bench.measure.datasets import add_zone_file_options
from bench.measure.results import Results, save_results
from bench.report.render import write_report
from databases.store_urls import StoreUrls
from loaders import get_database
from servers import get_server, selected_servers, store_names


def positive_counts(text: str, option: str) -> list[int]:
    """A comma list of whole numbers of at least 1 (`--threads 1,2,4`, `--zones-counts ...`)."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError as exc:
        raise UserError(f"{option} takes a comma list of numbers, not {text!r}") from exc
    if not values or min(values) < 1:
        raise UserError(f"{option} needs counts of at least 1")
    return values


def progress(text: str) -> None:
    """A command's progress line: on stderr, at once (stdout holds the report)."""
    print(text, file=sys.stderr, flush=True)


def measure_then_report(measure: Callable[[], None], results: Results, out: Path) -> int:
    """measure() filling results, then results saved in out and their report printed: exit
    status 0. Ctrl-C during measure() keeps nothing (the section is whole or not there): 130."""
    try:
        measure()
    except KeyboardInterrupt:
        print("interrupted: nothing measured to keep", file=sys.stderr)
        return 130
    save_results(results, out)
    print(write_report(results, out))
    return 0


def add_pin_option(parser: argparse.ArgumentParser) -> None:
    """--pin/--no-pin: the server and the load generator on separate CPUs (the default)."""
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True,
                        help="server (and its database) and load generator on separate CPUs")


def add_data_set_options(parser: argparse.ArgumentParser, generate_default: str) -> None:
    """The data set of a command that loads one: zone files or a named.conf, or generated
    zones (`--generate`, its default as `generate_default` says) or the coverage set; records per
    generated zone and the generator's seed."""
    src = parser.add_mutually_exclusive_group()
    add_zone_file_options(parser, src)
    src.add_argument("--generate", type=int, metavar="N",
                     help=f"generated zones (default: {generate_default})")
    src.add_argument("--coverage", action="store_true", help="the coverage data set")
    parser.add_argument("--records", type=int, default=10, help="records per generated zone")
    parser.add_argument("--seed", type=int, default=1)


def add_out_option(parser: argparse.ArgumentParser, default: str) -> None:
    """--out DIR, whose default is results/<default>."""
    parser.add_argument("--out", type=Path, default=None,
                        help=f"results directory (default: results/{default})")


def add_store_url_options(parser: argparse.ArgumentParser) -> None:
    """--store-url, --store-password-file and --store-url-overwrite, for the commands that
    load and serve stores."""
    parser.add_argument("--store-url", action="append", default=[], metavar="STORE=URL",
                        help="load into and serve from a database server the suite did not "
                             "start, one per store: pg=postgresql://USER@HOST:PORT/DB, "
                             "mysql=mysql://USER@HOST:PORT/DB, "
                             "ldap=ldap://BINDDN@HOST:PORT/SUFFIX (the database, or the "
                             "subtree under SUFFIX, is the suite's: its data there is emptied "
                             "and loaded; password from --store-password-file, PGPASSWORD, "
                             "~/.pgpass, MYSQL_PWD, ~/.my.cnf, LDAP_PASSWORD or the URL, "
                             "never printed)")
    parser.add_argument("--store-password-file", action="append", default=[],
                        metavar="STORE=FILE",
                        help="the password of that store's --store-url: the first line of "
                             "FILE (kept off the command line, which every local user can "
                             "read)")
    parser.add_argument("--store-url-overwrite", action="store_true",
                        help="let --store-url put the suite's tables into a database (its "
                             "entries under an LDAP suffix) that also holds objects it did not "
                             "create (it never drops or changes them)")


def store_urls(args: argparse.Namespace) -> StoreUrls:
    """The stores given by --store-url, each server reached and its database checked before
    anything starts (a long run does not fail at its second server)."""
    if args.store_url_overwrite and not args.store_url:
        raise UserError("--store-url-overwrite needs a --store-url")
    return StoreUrls.parse(args.store_url, get_database, store_names(),
                           overwrite=args.store_url_overwrite,
                           password_files=args.store_password_file).checked(get_database)


def signable_servers(text: str, command: str) -> list[str]:
    """--servers over signed data: 'all' less the servers that cannot serve a signed zone
    (said in one line); naming one of them is an error."""
    names = selected_servers(text)
    unable = {name: reason for name in names
              if (reason := get_server(name).cannot_serve_signed) is not None}
    if unable and text != "all":
        name, reason = next(iter(unable.items()))
        raise UserError(f"{command} cannot measure {name}: {reason}")
    if unable:
        print(f"{command} leaves out {', '.join(unable)}: "
              f"{'; '.join(dict.fromkeys(unable.values()))}", flush=True)
    return [name for name in names if name not in unable]
