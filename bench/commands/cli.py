"""`python3 -m bench <command>`: the command-line interface."""

from __future__ import annotations

import argparse
import importlib
import sys

from base.errors import UserError
from servers import choose_bind

# Subcommand name -> module in bench/commands.
COMMANDS: list[str] = ["load", "generate", "report", "compare", "serve", "verify", "run", "startup",
                       "capacity", "tune", "scale", "instructions", "fuzz", "faults",
                       "writes", "updates", "series", "advise"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m bench",
                                     description="dlzbench: BIND DLZ driver benchmarks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"bench.commands.{name}").add_parser(sub)
    # Every command runs the BIND this selects, through servers/bindversion.py.
    for command in sub.choices.values():
        command.add_argument("--bind", metavar="9.18|9.20",
                             help="the BIND to run: 9.18 (Debian 12's, the default) or 9.20 "
                                  "(Debian 13's, from `make deps BIND=9.20`)")
    return parser


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
