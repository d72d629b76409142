"""One name per concept (issue 36), held where a rename could slip back.

- The thing measured is a *server*; a DLZ *driver* is only the C library named loads
  (drivers/). In bench/ and servers/ no identifier says "driver" outside the modules whose
  subject is those libraries, and no message says it but as "DLZ driver(s)", a path under
  drivers/, an option's old spelling (still parsed, never shown: bench/commands/cli.py) or an
  older results file's key (read and renamed: bench/measure/serial.py).
- A measurement's name (updates, writes, ...) names only its own parts: its command, its
  measuring and its report; and no package holds two modules a plural "s" apart
  (report/write.py beside report/writes.py).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from base.paths import REPO_ROOT
from bench.commands.cli import COMMANDS, OLD_SPELLINGS

# Starts no process: part of `make check` (tests/conftest.py holds it to that).
pytestmark = pytest.mark.check

PACKAGES = ("base", "zonedata", "databases", "loaders", "servers", "bench")
CHECKED_FOR_DRIVER = ("bench", "servers")

# Modules whose subject is the DLZ driver libraries themselves: named with a driver, the
# drivers' argument tables, where the drivers built for each BIND are, the libFuzzer
# harnesses of their C code.
DRIVER_MODULES = frozenset({"servers/dlz.py", "servers/driver_arguments.py",
                            "servers/bindversion.py", "bench/verify/harnesses.py",
                            "bench/commands/fuzz_harness.py"})
# servers/bindversion.py's keywords, used where a BIND's programs run: whether its driver
# builds must be there, and mounted.
DRIVER_KEYWORDS = frozenset({"need_drivers", "with_drivers"})
# Keys of older results files that name a server "driver": read and renamed, never written.
OLDER_FILES_KEYS = frozenset({("bench/measure/serial.py", "driver"),
                              ("bench/measure/updates.py", "driver"),
                              ("bench/report/run.py", "drivers")})

_DRIVER_WORD = re.compile(r"\bdrivers?\b", re.I)
# "driver" meaning the library: "DLZ driver(s)", or the folder drivers/ ("drivers/<d>/",
# `make -C drivers`).
# "The memory driver" is one DLZ driver by its name.
_THE_LIBRARY = re.compile(r"DLZ drivers?\b|\bdrivers/|-C drivers\b|\bmemory driver\b")

# Where a measurement's parts are: its command, its measuring, its report.
MEASUREMENT_LAYERS = ("bench/commands", "bench/measure", "bench/report")
# A measurement's part elsewhere, and what it is.
MEASUREMENT_PARTS_ELSEWHERE = {
    "loaders/writes.py": "the writers into a store that `writes` measures (Loader.writer)",
}


def _relative(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def python_modules(packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    return sorted(path for package in packages for path in (REPO_ROOT / package).rglob("*.py"))


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of a module, its classes and its functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _identifiers(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, identifier) of every name the code defines or uses, f-strings' included."""
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name):
            found.append((line, node.id))
        elif isinstance(node, ast.Attribute):
            found.append((line, node.attr))
        elif isinstance(node, ast.arg | ast.keyword) and node.arg is not None:
            found.append((line, node.arg))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.append((line, node.name))
        elif isinstance(node, ast.alias):
            found += [(line, name) for name in (node.name, node.asname) if name]
    return found


def driver_identifiers(where: str, source: str) -> list[str]:
    """Identifiers saying "driver" outside the driver modules and keywords."""
    if where in DRIVER_MODULES:
        return []
    return [f"{where}:{line}: identifier {name}"
            for line, name in sorted(set(_identifiers(ast.parse(source))))
            if "driver" in name.lower() and name not in DRIVER_KEYWORDS]


def driver_messages(where: str, source: str) -> list[str]:
    """String constants, docstrings aside (f-strings' text included), that say "driver" for
    anything but the library."""
    if where in DRIVER_MODULES:
        return []
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) \
                or id(node) in docstrings:
            continue
        text = node.value
        if text in OLD_SPELLINGS or (where, text) in OLDER_FILES_KEYS:
            continue
        library = [m.span() for m in _THE_LIBRARY.finditer(text)]
        for word in _DRIVER_WORD.finditer(text):
            if not any(start <= word.start() < end for start, end in library):
                found.append(f"{where}:{node.lineno}: message {text!r}")
                break
    return found


def test_driver_names_only_the_library_in_code_and_messages() -> None:
    findings = []
    for path in python_modules(CHECKED_FOR_DRIVER):
        where, source = _relative(path), path.read_text()
        findings += driver_identifiers(where, source) + driver_messages(where, source)
    assert findings == [], "\n".join(findings)


def test_the_driver_check_finds_a_server_called_a_driver() -> None:
    """The check above on code of the kind the issue found, and on the library's own words."""
    server_as_driver = ('def serving(driver: str) -> None:\n'
                        '    raise UserError(f"unknown driver {driver!r}")\n'
                        'TITLE = "Throughput per driver"\n')
    assert len(driver_identifiers("snippet", server_as_driver)) == 2
    assert len(driver_messages("snippet", server_as_driver)) == 2
    library = ('"""Every driver here is a server."""\n'
               'A = "the pg DLZ driver (drivers/pg/dlz_pg.c); run `make -C drivers`"\n'
               'B = bindversion.select("9.20", need_drivers=False)\n'
               'OLD = "--drivers"\n')
    assert driver_identifiers("snippet", library) == []
    assert driver_messages("snippet", library) == []
    assert driver_messages("snippet", 'KEY = "driver"\n') != []


def measurements() -> list[str]:
    """The commands that measure: each has its measuring module in bench/measure."""
    return [name for name in COMMANDS if (REPO_ROOT / "bench/measure" / f"{name}.py").is_file()]


def test_a_measurement_name_names_only_that_measurement_parts() -> None:
    """updates.py is `updates`' command, measuring and report; the key, the update policy, the
    sender and the answers after updates are named for what they are."""
    assert {"updates", "writes", "faults"} <= set(measurements())
    names = {f"{name}.py" for name in measurements()}
    stray = [_relative(path) for path in python_modules() if path.name in names
             and _relative(path.parent) not in MEASUREMENT_LAYERS
             and _relative(path) not in MEASUREMENT_PARTS_ELSEWHERE]
    assert stray == []


def test_no_package_holds_a_module_and_its_plural() -> None:
    pairs = []
    for package in sorted({path.parent for path in python_modules()}):
        stems = {path.stem for path in package.glob("*.py")}
        pairs += [f"{_relative(package)}: {stem}.py, {stem}s.py" for stem in sorted(stems)
                  if f"{stem}s" in stems]
    assert pairs == []
