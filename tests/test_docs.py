"""The documentation a newcomer walks: README.md stays a front door, every relative link in it
and in docs/ resolves, and every module path the docs and the code's comments name exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from base.paths import REPO_ROOT
from servers import driver_arguments
from servers.dlz import library_path

# Starts no process: part of `make check` (tests/conftest.py holds it to that).
pytestmark = pytest.mark.check

README_MAX_LINES = 250
# [text](target) in Markdown, the target up to a space or the closing parenthesis.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A module of ours named by its path (loaders/pg.py) or dotted (loaders.pg, bench.measure.runner).
_PATH = re.compile(r"\b((?:base|zonedata|databases|loaders|servers|bench)(?:/[a-z_]+)+\.py)\b")
_DOTTED = re.compile(r"(?<![\w./-])((?:databases|loaders|bench\.(?:measure|report|load|verify|"
                     r"commands))\.[a-z_]+)\b")


def _markdown_files() -> list[Path]:
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md")),
            *sorted((REPO_ROOT / "schemas").rglob("*.md"))]


def _sources() -> list[Path]:
    return [path for folder in ("base", "zonedata", "databases", "loaders", "servers", "bench",
                                "drivers", "tests")
            for path in sorted((REPO_ROOT / folder).rglob("*"))
            if path.suffix in (".py", ".c", ".h", ".mk") and "__pycache__" not in path.parts
            and path.name != "test_docs.py"]  # this file names stale modules on purpose


def test_readme_is_a_front_door() -> None:
    lines = (REPO_ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def _links(path: Path) -> list[str]:
    """Relative link targets in path (web links and in-page anchors are not files)."""
    return [target for target in _LINK.findall(path.read_text())
            if not re.match(r"[a-z]+:", target) and not target.startswith("#")]


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    missing = [target for target in _links(path)
               if not (path.parent / target.split("#")[0]).exists()]
    assert missing == []


def test_the_docs_link_somewhere() -> None:
    assert sum(len(_links(path)) for path in _markdown_files()) >= 50


def _named_modules(text: str) -> set[str]:
    """Module paths (a/b.py) named in text, dotted names turned into paths."""
    named = set(_PATH.findall(text))
    named |= {name.replace(".", "/") + ".py" for name in _DOTTED.findall(text)}
    return named


def _exists(module: str) -> bool:
    """module (a/b/c.py) is a module or package of ours, or c a name that a/b defines (a
    dotted name may end in a function: loaders.get_loader)."""
    path = REPO_ROOT / module
    if path.exists() or (path.with_suffix("") / "__init__.py").exists():
        return True
    parent, name = path.parent, path.stem
    for source in (parent.with_suffix(".py"), parent / "__init__.py"):
        if source.exists() and re.search(rf"^(def|class) {name}\b|^{name}\b.*=",
                                         source.read_text(), re.MULTILINE):
            return True
    return False


def test_named_modules_exist() -> None:
    """No comment, docstring or document points at a module that is not there (a move leaves
    such names behind)."""
    missing = sorted({f"{path.relative_to(REPO_ROOT)}: {module}"
                      for path in [*_markdown_files(), *_sources()]
                      if "results" not in path.relative_to(REPO_ROOT).parts[:2]
                      for module in _named_modules(path.read_text())
                      if not _exists(module)})
    assert missing == []


def test_a_stale_module_name_is_found() -> None:
    """The check above can fail: the old stores package and a moved module are caught."""
    assert not _exists("stores/pg_server.py")
    assert _named_modules("see bench/verify.py and loaders.store") == {
        "bench/verify.py", "loaders/store.py"}
    assert not _exists("loaders/store.py")
    assert _exists("loaders/get_loader.py")  # a function loaders/__init__.py defines


def test_driver_arguments_reference_is_what_the_drivers_declare() -> None:
    """docs/driver-arguments.md is generated from the drivers' argument tables (make docs-args):
    an argument added, removed or changed in C and not regenerated is caught here."""
    unbuilt = [library for library in driver_arguments.libraries()
               if not library_path(library).exists()]
    if unbuilt:
        pytest.skip(f"drivers not built ({', '.join(unbuilt)}): make -C drivers")
    committed = (REPO_ROOT / driver_arguments.DOC_PATH).read_text()
    assert committed == driver_arguments.reference(), "run `make docs-args` and commit the file"


def test_driver_arguments_reference_reads_every_driver() -> None:
    """The reference has a section per driver folder, and the core's the arguments core.c
    reads: checked also where the drivers are not built and the comparison above is skipped."""
    text = (REPO_ROOT / driver_arguments.DOC_PATH).read_text()
    sections = re.findall(r"^## (\w+) \(drivers/", text, re.MULTILINE)
    assert sections == driver_arguments.libraries() and len(sections) >= 7
    core = text.split("## Every driver", 1)[1].split("\n## ", 1)[0]
    assert {"connections", "memo_ms", "hint_zones", "down_interval_ms", "trace",
            "update_zones"} <= set(re.findall(r"^\| `(\w+)`", core, re.MULTILINE))
