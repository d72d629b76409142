"""The command line as a newcomer meets it: the help, the commands the docs quote, and the old
spellings that committed results were made with."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from base.paths import REPO_ROOT
from bench.commands.cli import COMMANDS, OLD_SPELLINGS, build_parser

# Starts no process: part of `make check` (tests/conftest.py holds it to that).
pytestmark = pytest.mark.check

# What the docs write for a value the reader chooses, and a value that parses in its place.
PLACEHOLDERS = {"D": "pg", "R": "1", "DIR": "docs/results/x", "A": "a", "B": "b",
                "FILE": "f", "N": "1", "NAME": "mine", "S": "pg"}
# A command in an inline code span, or on a line of its own in a code block.
_COMMAND = re.compile(r"`python3 -m bench ([^`\n]*)`|^\s*(?:\$ )?python3 -m bench ([^\n]*)$", re.M)


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_top_level_help_lists_every_command_with_its_own_words() -> None:
    text = " ".join(build_parser().format_help().split())
    assert "option_strings" not in text  # a bare % in a help string prints argparse's state
    for name in COMMANDS:
        assert re.search(rf"\b{name}\b", text), name
    assert "offered-load sweep: % answered, latency and the breaking point" in text


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_help_renders(name: str) -> None:
    text = _subcommands()[name].format_help()
    assert text.startswith(f"usage: python3 -m bench {name}")
    assert "option_strings" not in text


def documented_commands() -> list[tuple[str, str]]:
    """(file, command line) of every `python3 -m bench ...` quoted in README.md and docs/
    (committed results included) with its arguments, less the ones written as a pattern
    ([options], ..., <x>) and the bare command names prose refers to."""
    found = []
    files = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
    for path in files:
        for match in _COMMAND.finditer(path.read_text()):
            line = (match.group(1) or match.group(2)).split("#")[0].strip()
            if (len(line.split()) < 2 or line.endswith("\\")
                    or any(mark in line for mark in ("[", "...", "…", "<"))):
                continue
            found.append((str(path.relative_to(REPO_ROOT)), line))
    return found


def test_the_docs_quote_commands() -> None:
    assert len(documented_commands()) >= 10


@pytest.mark.parametrize("where, line", documented_commands())
def test_documented_command_parses(where: str, line: str) -> None:
    argv = [PLACEHOLDERS.get(word, word) for word in shlex.split(line)]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where}: `python3 -m bench {line}` does not parse (exit {exc.code})")


@pytest.mark.parametrize("old, new, dest", [
    (["run", "--drivers", "pg"], ["run", "--servers", "pg"], "servers"),
    (["verify", "--coverage", "--drivers", "pg"], ["verify", "--coverage", "--servers", "pg"],
     "servers"),
    (["startup", "--drivers", "pg"], ["startup", "--servers", "pg"], "servers"),
    (["scale", "--drivers", "pg"], ["scale", "--servers", "pg"], "servers"),
    (["capacity", "--drivers", "pg"], ["capacity", "--servers", "pg"], "servers"),
    (["serve", "--coverage", "--driver", "pg"], ["serve", "--coverage", "--server", "pg"],
     "server"),
    (["tune", "--driver", "pg"], ["tune", "--server", "pg"], "server"),
    (["run", "--target", "127.0.0.1:53", "--driver-label", "x"],
     ["run", "--target", "127.0.0.1:53", "--server-label", "x"], "server_label"),
])
def test_the_old_driver_spellings_still_parse(old: list[str], new: list[str], dest: str) -> None:
    """Commands committed with docs/results were run with --driver(s): they still run."""
    before, after = build_parser().parse_args(old), build_parser().parse_args(new)
    assert getattr(before, dest) == getattr(after, dest) == new[-1]


@pytest.mark.parametrize("name", COMMANDS)
def test_help_names_the_server_options_only_by_their_new_spelling(name: str) -> None:
    text = _subcommands()[name].format_help()
    assert not [old for old in OLD_SPELLINGS if old in text], text


def test_a_missing_server_is_asked_for_by_its_new_spelling(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune"])
    error = capsys.readouterr().err
    assert "required: --server" in error and "--driver" not in error, error
