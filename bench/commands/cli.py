"""`python3 -m bench <command>`: the command-line interface."""

from __future__ import annotations

import argparse
import importlib
import sys

from base.errors import UserError
from servers import choose_bind

# The options' spellings from before the measured thing was called a server (to 2026-11-25):
# they still parse, so that the command lines quoted with committed results run, but neither
# the help nor an error message shows them.
OLD_SPELLINGS = frozenset({"--driver", "--drivers", "--driver-label"})

# Subcommand names; each is a module in bench/commands ("-" written "_").
COMMANDS: list[str] = ["load", "generate", "report", "compare", "serve", "verify", "run", "startup",
                       "capacity", "tune", "scale", "instructions", "fuzz", "fuzz-harness",
                       "faults", "writes", "updates", "series", "advise"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m bench",
                                     description="dlzbench: BIND's DLZ drivers against native BIND "
                                                 "and other DNS servers")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"bench.commands.{name.replace('-', '_')}").add_parser(sub)
    # Every command runs the BIND this selects, through servers/bindversion.py.
    for command in sub.choices.values():
        command.add_argument("--bind", metavar="9.18|9.20",
                             help="the BIND to run: 9.18 (Debian 12's, the default) or 9.20 "
                                  "(Debian 13's, from `make deps BIND=9.20`)")
        hide_old_spellings(command)
    return parser


def hide_old_spellings(parser: argparse.ArgumentParser) -> None:
    """Leave OLD_SPELLINGS out of what help and errors print. The parser finds an option by
    the strings it was added with, so an old spelling still parses."""
    for action in parser._actions:
        action.option_strings = [s for s in action.option_strings if s not in OLD_SPELLINGS]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        choose_bind(args.bind)
        return args.func(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BaseException as exc:
        if not _interrupted(exc):
            raise
        print("interrupted", file=sys.stderr)
        return 130


def _interrupted(exc: BaseException | None) -> bool:
    """Is exc a Ctrl-C, or caused by one? A Ctrl-C inside a C extension's import (numpy, under
    the report's first matplotlib import) surfaces as ImportError raised from KeyboardInterrupt."""
    while exc is not None:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc = exc.__cause__
    return False
