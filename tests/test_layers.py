"""The layering of the Python packages, as docs/architecture.md draws it: each package may
import only packages below it, and no two modules import each other (directly or round a
longer circle). Every import counts, also one inside a function or under TYPE_CHECKING: a
lazy import hides a circle, it does not remove it.

Bottom to top: base, zonedata, databases, loaders, servers, then bench's own layers (load
tools, answer comparison, measuring, reporting, the command line).

bench/ sees the servers package only through its public face: the names servers/__init__.py
lists in __all__ (the registry, the capability types, the BIND choice), never a module of it
(servers.kind, servers.named, ...), so that what a server can do is asked of its kind and a
new server's modules are nobody else's business.
"""

from __future__ import annotations

import ast
from collections.abc import Container, Iterator
from pathlib import Path

import pytest

from base.paths import REPO_ROOT

# Starts no process: part of `make check` (tests/conftest.py holds it to that).
pytestmark = pytest.mark.check

LAYERS: tuple[str, ...] = (
    "base",
    "zonedata",
    "databases",
    "loaders",
    "servers",
    "bench.load",
    "bench.verify",
    "bench.measure",
    "bench.report",
    "bench.commands",
    "bench",
)


def layer_of(module: str) -> int | None:
    """The rank of the most specific layer holding module (None: not ours, e.g. dns.name)."""
    best: tuple[int, int] | None = None
    for rank, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            depth = layer.count(".")
            if best is None or depth > best[0]:
                best = (depth, rank)
    return None if best is None else best[1]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(module: str, is_package: bool, tree: ast.AST,
             ours: Container[str]) -> Iterator[str]:
    """Every module of ours an import statement in tree names, relative imports resolved:
    for `from X import a`, X.a when that is a module of ours, else X."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            for alias in node.names:
                name = f"{base}.{alias.name}"
                yield name if name in ours else base


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """module -> the modules of ours it imports, over every .py file under the packages."""
    sources = {module_name(root, path): path
               for package in packages for path in (root / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in sources.items():
        tree = ast.parse(path.read_text(), str(path))
        names = imported(module, path.name == "__init__.py", tree, sources)
        graph[module] = {name for name in names if name in sources and name != module}
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """'a -> b' for every import of a module in a higher layer than the importer."""
    found = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module)
        for target in sorted(targets):
            theirs = layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                found.append(f"{module} ({LAYERS[mine]}) -> {target} ({LAYERS[theirs]})")
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


PACKAGES = ("base", "zonedata", "databases", "loaders", "servers", "bench")


def public_names(root: Path, package: str) -> set[str]:
    """The names a package's __init__.py lists in __all__ (a list or tuple of strings)."""
    tree = ast.parse((root / package / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def past_public_face(root: Path, importers: str, package: str) -> list[str]:
    """'module: what' for every import in the importers' modules that reaches into package
    past its public face: a module of it, or a name its __all__ does not list."""
    public = public_names(root, package)
    found = []
    for path in sorted((root / importers).rglob("*.py")):
        module = module_name(root, path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [f"{module}: import {a.name}" for a in node.names
                          if a.name.startswith(package + ".")]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.startswith(package + "."):
                    found.append(f"{module}: from {node.module}")
                elif node.module == package:
                    found += [f"{module}: from {package} import {a.name}" for a in node.names
                              if a.name not in public]
    return found


def test_every_package_has_a_layer() -> None:
    graph = import_graph(REPO_ROOT, PACKAGES)
    assert [m for m in graph if layer_of(m) is None] == []


def test_no_package_imports_one_above_it() -> None:
    assert upward_imports(import_graph(REPO_ROOT, PACKAGES)) == []


def test_no_two_modules_import_each_other() -> None:
    assert circles(import_graph(REPO_ROOT, PACKAGES)) == []


def test_bench_sees_servers_only_through_its_public_face() -> None:
    assert past_public_face(REPO_ROOT, "bench", "servers") == []


def test_the_public_face_holds_no_module_of_servers() -> None:
    """A module re-exported by name would be a way past the face."""
    modules = {path.stem for path in (REPO_ROOT / "servers").glob("*.py")}
    assert public_names(REPO_ROOT, "servers") & modules == set()


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_reversed_import_is_caught(tmp_path: Path) -> None:
    """The checks can fail: a loader importing the runner, even lazily, is reported."""
    root = _tree(tmp_path, {
        "loaders/__init__.py": "",
        "loaders/pg.py": "def load():\n    from bench.measure import runner\n",
        "bench/__init__.py": "",
        "bench/measure/__init__.py": "",
        "bench/measure/runner.py": "from loaders import pg\n",
    })
    graph = import_graph(root, ("loaders", "bench"))
    assert upward_imports(graph) == [
        "loaders.pg (loaders) -> bench.measure.runner (bench.measure)"]
    assert circles(graph) == [["bench.measure.runner", "loaders.pg"]]


def test_a_circle_inside_one_layer_is_caught(tmp_path: Path) -> None:
    """Two report modules importing each other (one under TYPE_CHECKING) are a circle."""
    root = _tree(tmp_path, {
        "bench/__init__.py": "",
        "bench/report/__init__.py": "",
        "bench/report/run.py": "from bench.report.tune import render\n",
        "bench/report/tune.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                 "    from bench.report import run\n"),
    })
    graph = import_graph(root, ("bench",))
    assert upward_imports(graph) == []
    assert circles(graph) == [["bench.report.run", "bench.report.tune"]]


def test_an_import_past_the_public_face_is_caught(tmp_path: Path) -> None:
    """The rule can fail: a module of servers, a submodule imported by name, a name not in
    __all__, a plain import of a module; a listed name passes."""
    root = _tree(tmp_path, {
        "servers/__init__.py": "__all__ = ['get_server']\n",
        "bench/__init__.py": "",
        "bench/measure/writes.py": ("from servers import get_server\n"
                                    "from servers.kind import ServerKind\n"),
        "bench/measure/faults.py": ("def f():\n    from servers import bindversion, SERVERS\n"
                                    "    import servers.named\n"),
    })
    assert past_public_face(root, "bench", "servers") == [
        "bench.measure.faults: from servers import bindversion",
        "bench.measure.faults: from servers import SERVERS",
        "bench.measure.faults: import servers.named",
        "bench.measure.writes: from servers.kind"]
