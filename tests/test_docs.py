"""The documentation a newcomer walks: README.md stays a front door, every relative link in it
and in docs/ resolves, every module path the docs and the code's comments name exists, every
generated table is what the committed results give now, and every measured figure in the
prose carries a reference the results catalogue resolves to the same number."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from base.paths import REPO_ROOT
from bench.measure.catalogue import Catalogue
from bench.report import docfigures, doctables
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


# ---------------------------------------------------------------- measured figures

# The stretches of prose whose every number is a referenced figure or no measurement:
# (document, heading). A number there without a reference fails test_figures_have_a_source.
CHECKED_SECTIONS = [
    ("README.md", "How to read one table"),
    ("README.md", "What the latest runs say"),
    ("docs/method/instructions.md", "Measured"),
    ("docs/method/faults.md", "Results on this machine"),
    ("docs/method/capacity.md", "Measured: every server at 1 thread (the definitions above)"),
    ("docs/method/writes.md", "Measured"),
]
# Phrases whose numbers are what a run was asked to do, the suite's rules, the machine, or a
# count of a table the catalogue does not hold (compare's and series' overlaps): no
# measurement, so no reference.
PARAMETERS = [
    r"\d[\d,]*(?: interleaved| generated)?\s+(?:QPS|q/s|reads/s|queries|rounds?|repeats?|"
    r"runs?|senders|threads?|servers?|zones|names|kinds|seconds?|DLZ drivers)\b",
    r"\b\d+ (?:records? (?:a|per) message|writes/s|updates/s|s a step)",
    r"\d[\d,]* mutated queries of \d+ kinds",
    r"\d+-(?:s|thread)\b", r"\b0\.\d+ of its core", r"\+-\d+% target", r"\b\d+% interval",
    r"\bevery \d+th round", r"\bat \d[\d,]*(?=/s| records?\b| \(each| a rate|\s+q/s)",
    r"\bmessages of \d+", r"\bat \d+ and \d+ records", r"\bat least \d+% of its",
    r"\bwithin \d+ ms at p99", r"\b\d+% of a second", r"\bon \d+ cores", r"\b\d+% NXDOMAIN",
    r"\bfrom 0 to", r"\(\d+%\)", r"not seen within \d+ s", r"packet cache's \d+ s",
    r"\b\d+ of (?:their )?\d+ (?:ratios|rows)\b", r"\b9\.(?:18|20)\b",
    # the machine and the tools: the VM's 2 vCPUs, dnsperf's version, a man page's section
    r"\b2-vCPU\b", r"\bthe 2 cores\b", r"dnsperf \d+\.\d+", r"\.conf\(5\)",
    # a run's own settings and length: faults' profile, capacity's steps and buffers
    r"\d+ minutes\)", r"\b\d+ s, `named -n \d+`", r"\bfor \d+ s:", r"\bafter \d+ s:",
    r"`query_timeout_ms` \(\d+(?:\.\d+)? s", r"\(\d+% lost\)", r"\b\d+% of its target",
    r"\b\d+% step", r"\b\d+ outstanding", r"\(\d+ MiB\)", r"\bgiven \d+ MiB",
    r"[\d,]+ bytes here", r"\bthe 1% the method",
    # writes' steps, goals and the old sampler's record life
    r"\bat 0, 10, 100 and 1,000\b", r"\bat 0 and (?:at )?100\b", r"\b\d+(?:/s|-writes/s)",
    r"\bover that at \d+", r"\bthe \d+% goal", r"\bthe \d+-ms goal", r"\b\d+-ms life",
    r"\b\d+ writes/s", r"\bof 1,000 answered", r"within \d+ s\s+are", r"cache \(\d+ s\)",
    r"about 8 ms", r"\bthe \d+/s\s+and ceiling", r"\b\d+-writes/s",
]


def _section(path: Path, heading: str) -> str:
    """The text under `heading` down to the next heading of its level or above."""
    lines = path.read_text().splitlines()
    level_of = [len(line) - len(line.lstrip("#")) if line.startswith("#") else 0
                for line in lines]
    start = next(i for i, line in enumerate(lines)
                 if level_of[i] and line.lstrip("#").strip() == heading)
    end = next((i for i in range(start + 1, len(lines))
                if level_of[i] and level_of[i] <= level_of[start]), len(lines))
    return "\n".join(lines[start:end])


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue.committed()


def test_generated_tables_are_current() -> None:
    """Every cog block of README.md and docs/ is what `make docs` writes from the committed
    results now: a table typed over, or results changed under it, fails here."""
    assert doctables.documents(), "no document has a generated table"
    assert doctables.run_cog(check=True) == 0, "run `make docs`"


def test_a_stale_table_is_found(tmp_path: Path) -> None:
    """The check above can fail: a figure typed over in a generated block is caught."""
    page = tmp_path / "page.md"
    block = ('<!-- [[[cog out(readme_sample("quick-2026-11-26", ["native", "memory"])) ]]] -->\n'
             "<!-- [[[end]]] -->\n")
    page.write_text(block)
    from cogapp import Cog

    assert Cog().main(["cog", "-r", "-p", doctables.PROLOGUE, str(page)]) == 0
    written = page.read_text()
    assert "53.2% [50.3–57.6%]" in written
    assert Cog().main(["cog", "--check", "-p", doctables.PROLOGUE, str(page)]) == 0
    page.write_text(written.replace("53.2% [50.3–57.6%]", "55.0% [50.3–57.6%]"))
    assert Cog().main(["cog", "--check", "-p", doctables.PROLOGUE, str(page)]) != 0


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_figure_agrees_with_its_source(path: Path, catalogue: Catalogue) -> None:
    assert docfigures.check(catalogue, path.read_text()) == []


@pytest.mark.parametrize("path, heading", CHECKED_SECTIONS, ids=lambda x: str(x))
def test_figures_have_a_source(path: str, heading: str) -> None:
    """Prose interprets; it does not retype numbers: every number in a checked section is a
    referenced figure, or no measurement (a date, a version, a parameter)."""
    assert docfigures.unsourced(_section(REPO_ROOT / path, heading), PARAMETERS) == []


def test_a_wrong_figure_is_found(catalogue: Catalogue) -> None:
    """The checks above can fail: a figure off by a digit, an interval, a range, a quotient,
    a reference to nothing, and a figure left without a reference."""
    ref = "<!--fig quick-2026-11-26 ratio.native server=memory-->"
    assert docfigures.check(catalogue, f"memory 53.2% [50.3–57.6]{ref}") == []
    for wrong in ("53.1% [50.3–57.6]", "53.2% [50.3–57.7]", "54%"):
        assert docfigures.check(catalogue, f"memory {wrong}{ref}") != [], wrong
    ranged = "<!--fig quick-2026-11-26 ratio.native server=pg,mysql,ldap-->"
    assert docfigures.check(catalogue, f"between 7.5-14.0%{ranged}") == []
    assert docfigures.check(catalogue, f"between 7.5-14.1%{ranged}") != []
    assert docfigures.check(catalogue, f"about 9%{ranged}") != []  # one number for three
    times = "<!--fig instructions-2026-11-26 instructions.total server=memory per.server=native-->"
    assert docfigures.check(catalogue, f"costs 5.6x{times}") == []
    assert docfigures.check(catalogue, f"costs 5.7x{times}") != []
    assert docfigures.check(catalogue, "9.3%<!--fig quick-2026-11-26 ratio.native server=nsd-->")
    assert docfigures.check(catalogue, "<!--fig quick-2026-11-26 qps server=pg--> alone")
    assert docfigures.unsourced("pg answered 6,571 QPS", []) != []
    assert docfigures.unsourced("pg answered 6,571<!--fig quick-2026-11-26 qps server=pg-->",
                                []) == []
