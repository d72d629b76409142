"""The zones of an existing BIND configuration, read through `named-checkconf -p`.

BIND's own checker parses named.conf (includes expanded, syntax checked) and prints it in its
canonical form: one statement per line, strings always quoted, blocks closed by `};`. Only that
output is parsed here, and only as far as its zone statements: the type, the file, the view they
sit in, and the options' `directory` that relative file names are resolved against (named
changes into it before loading zones).

Primary zones are read from their files, secondaries from theirs where the configuration names
one (a copy of the last transfer); every other type (hint, forward, stub, mirror, in-view...)
has no zone data of its own and is left out, counted. A file in BIND's raw format (the default
for secondaries, bin/named/zoneconf.c, unless `masterfile-format text`) is turned into text by
BIND's own named-compilezone before it is read.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dns.exception
import dns.name

from base.errors import UserError
from zonedata.model import Zone
from zonedata.zonefiles import read_zone_file

# Zone types whose data the suite can serve, by both spellings BIND accepts.
_DATA_TYPES = {"primary": "primary", "master": "primary",
               "secondary": "secondary", "slave": "secondary"}
# The file format named assumes for each type when no masterfile-format is set.
_DEFAULT_FORMAT = {"primary": "text", "secondary": "raw"}
# A token of canonical named.conf: a quoted string (with backslash escapes), a brace, a
# semicolon, or a bare word.
_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([{};])|([^\s{};"]+)')


@dataclass(frozen=True)
class ConfZone:
    """One zone statement with data: its origin, type, resolved file, the file's format
    (masterfile-format: text or raw) and view ("" if none)."""

    origin: dns.name.Name
    type: str
    file: Path
    format: str = "text"
    view: str = ""

    def read(self, compilezone: Sequence[str]) -> Zone:
        """The zone's data; a problem is a UserError naming file (and line, for text).
        `compilezone` is the argv of BIND's named-compilezone, for a raw file."""
        if self.format == "text":
            return read_zone_file(self.file, origin=self.origin)
        with tempfile.TemporaryDirectory(prefix="dlzbench-zone-") as tmp:
            text = Path(tmp) / "zone.txt"
            self._compile_to_text(compilezone, text)
            return read_zone_file(text, origin=self.origin)

    def _compile_to_text(self, compilezone: Sequence[str], out: Path) -> None:
        argv = [*compilezone, "-f", self.format, "-F", "text", "-s", "full", "-o",
                str(out), self.origin.to_text(), str(self.file)]
        _run_bind_tool(argv, f"{self.file}: named-compilezone",
                       f"{self.file}: not a {self.format}-format zone file named-compilezone "
                       "reads")

@dataclass
class NamedConf:
    """What a configuration holds, as far as its zone data goes."""

    path: Path
    zones: list[ConfZone] = field(default_factory=list)
    views: list[str] = field(default_factory=list)
    # Zones left out, by reason ("hint", "secondary without a file", "also in an earlier view
    # (inside)", ...).
    left_out: Counter[str] = field(default_factory=Counter)


@dataclass
class _Statement:
    words: list[str]
    body: list[_Statement] | None  # None: a simple `words;` statement


def _run_bind_tool(argv: Sequence[str], what: str, refused: str) -> str:
    """A BIND tool's standard output; a UserError in one line when `what` cannot run, or
    `refused` with everything the tool said when it exits non-zero."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=600,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{what} failed: {exc}") from exc
    if done.returncode != 0:
        said = [line.strip() for line in (done.stdout + done.stderr).splitlines()
                if line.strip()]
        raise UserError(f"{refused}: {'; '.join(said) or f'exit {done.returncode}'}")
    return done.stdout


def read_named_conf(conf: Path, checkconf: Sequence[str]) -> NamedConf:
    """Run `checkconf -p conf` (argv of named-checkconf) and read its zone statements."""
    return parse_canonical(canonical_text(conf, checkconf), conf, Path.cwd())


def canonical_text(conf: Path, checkconf: Sequence[str]) -> str:
    """named-checkconf's canonical print of conf; its complaint as one UserError line."""
    if not conf.is_file():
        raise UserError(f"named.conf {conf}: no such file")
    return _run_bind_tool([*checkconf, "-p", str(conf)], f"named.conf {conf}: named-checkconf",
                          f"named.conf {conf}: named-checkconf rejects it")


def parse_canonical(text: str, conf: Path, cwd: Path) -> NamedConf:
    """The zones of canonical named.conf text; relative paths resolve against cwd/directory."""
    statements = _parse_block(_tokens(text), conf)
    options = _options(statements)
    directory = cwd / options.get("directory", ".")
    found = NamedConf(conf)
    seen: dict[dns.name.Name, str] = {}
    for view, zone in _zone_statements(statements, found):
        view_options = _simple_values(view.body or []) if view else {}
        file_format = view_options.get("masterfile-format") or options.get("masterfile-format")
        _add_zone(found, seen, view, zone, _Place(directory, file_format, conf))
    return found


@dataclass(frozen=True)
class _Place:
    """Where a zone statement sits: the directory, the masterfile-format its view or the
    options set (None: none), and the configuration, for messages."""

    directory: Path
    file_format: str | None
    conf: Path


def _tokens(text: str) -> Iterator[str]:
    """Tokens of canonical text; a quoted string keeps a leading quote to tell it from a word."""
    for quoted, punct, word in _TOKEN.findall(text):
        yield punct or word or f'"{quoted}'


def _parse_block(tokens: Iterator[str], conf: Path, nested: bool = False) -> list[_Statement]:
    statements: list[_Statement] = []
    words: list[str] = []
    for token in tokens:
        if token == ";":
            if words:
                statements.append(_Statement(words, None))
            words = []
        elif token == "{":
            statements.append(_Statement(words, _parse_block(tokens, conf, nested=True)))
            words = []
        elif token == "}":
            if not nested:
                break
            return statements
        else:
            words.append(token)
    if nested or words:
        raise UserError(f"named.conf {conf}: named-checkconf -p printed an unbalanced block")
    return statements


def _unquote(word: str) -> str:
    return word[1:] if word.startswith('"') else word


def _simple_values(statements: list[_Statement]) -> dict[str, str]:
    """`name value;` statements of a block as a mapping (blocks and longer ones skipped)."""
    return {s.words[0]: _unquote(s.words[1]) for s in statements
            if s.body is None and len(s.words) == 2}


def _options(statements: list[_Statement]) -> dict[str, str]:
    for statement in statements:
        if statement.words == ["options"] and statement.body is not None:
            return _simple_values(statement.body)
    return {}


def _zone_statements(statements: list[_Statement],
                     found: NamedConf) -> Iterator[tuple[_Statement | None, _Statement]]:
    """(view statement or None, zone statement) for every zone, top level and in views."""
    for statement in statements:
        keyword = statement.words[:1]
        if keyword == ["zone"] and statement.body is not None:
            yield None, statement
        elif keyword == ["view"] and statement.body is not None and len(statement.words) > 1:
            found.views.append(_unquote(statement.words[1]))
            for inner in statement.body:
                if inner.words[:1] == ["zone"] and inner.body is not None:
                    yield statement, inner


def _add_zone(found: NamedConf, seen: dict[dns.name.Name, str], view_statement: _Statement | None,
              zone: _Statement, place: _Place) -> None:
    assert zone.body is not None
    view = _unquote(view_statement.words[1]) if view_statement else ""
    origin = _origin(zone.words, place.conf)
    if len(zone.words) > 2 and _unquote(zone.words[2]).upper() not in ("IN", "INTERNET"):
        found.left_out[f"class {_unquote(zone.words[2])}"] += 1
        return
    values = _simple_values(zone.body)
    kind = _DATA_TYPES.get(values.get("type", ""))
    if "in-view" in values:
        found.left_out["in-view"] += 1
        return
    if kind is None:
        found.left_out[values.get("type", "no type")] += 1
        return
    if "file" not in values:
        found.left_out[f"{kind} without a file"] += 1
        return
    if origin in seen:
        found.left_out[f"also in an earlier view ({seen[origin] or 'no view'})"] += 1
        return
    seen[origin] = view
    file_format = values.get("masterfile-format") or place.file_format or _DEFAULT_FORMAT[kind]
    found.zones.append(ConfZone(origin, kind, place.directory / values["file"], file_format,
                                view))


def _origin(words: list[str], conf: Path) -> dns.name.Name:
    if len(words) < 2:
        raise UserError(f"named.conf {conf}: a zone statement without a name")
    try:
        return dns.name.from_text(_unquote(words[1]))
    except dns.exception.DNSException as exc:
        raise UserError(f"named.conf {conf}: zone {words[1]!r}: bad name: {exc}") from exc
