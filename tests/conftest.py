"""Shared fixtures: a private run directory per test module, removed afterwards; a private
run root for the tests that start `python3 -m bench`, also removed afterwards; pytest's
tmp_path, searchable by the servers' user. And the promise of the `check` marker (`make
check`): such a test starts no process."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# psycopg finds libpq when first imported, through ctypes.util.find_library, which runs
# ldconfig, gcc and ld: imported here, before any test, so that a `check` test that imports a
# loader (tests/test_registry.py) is not taken for one that starts a process (see below).
import psycopg  # noqa: F401
import pytest

from base.process import new_run_dir

# A suite started in the background by a non-interactive shell (`nohup make test &`) inherits
# SIGINT ignored, and an ignored signal stays ignored across exec: every Ctrl-C test then sent a
# signal nobody received (22 failed so). A handler installed here is reset to the default in
# every child at exec, so the commands under test receive Ctrl-C as from a terminal.
signal.signal(signal.SIGINT, signal.default_int_handler)

# `make check` runs the tests marked `check` (pytest -m check) and promises that they need no
# set-up beyond the venv and finish in under a minute: they start no process (no server, no
# named-checkzone, no `python3 -m bench`). The promise is kept here, not by care: while such a
# test or one of its fixtures is set up or runs, an audit hook refuses every process start,
# and the test fails even when the code under test caught the refusal. Teardown is left out:
# a module fixture of the file's other tests may stop its servers after a `check` test.
_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.spawn",
                             "os.posix_spawn", "os.fork", "os.forkpty", "pty.spawn"})
_check_running: list[str] = []  # the `check` test being set up or run, if any
_processes_started: list[str] = []  # what it tried to start


def _refuse_processes(event: str, args: tuple[Any, ...]) -> None:
    if _check_running and event in _PROCESS_EVENTS:
        what = f"{event}: {args[0]!r}" if args else event
        _processes_started.append(what)
        raise PermissionError(f"a test marked check started a process ({what})")


sys.addaudithook(_refuse_processes)


def _guarded(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("check") is not None:
        _check_running.append(item.nodeid)
    try:
        yield
    finally:
        _check_running.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _guarded(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _guarded(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    outcome = yield
    if _processes_started:
        report = outcome.get_result()
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} is marked check but started a process: "
                           f"{'; '.join(_processes_started)} (make check runs no process; "
                           "take the mark off, or the process out)")
        _processes_started.clear()


# This session's own directory for pytest's temporary ones, when not given --basetemp.
_session_temp: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Run as root, pytest's temporary directories go into one of this session's own under
    /tmp: its default root, /tmp/pytest-of-root, is made 0700 again by every session that
    starts (another one running at the same time too), which would shut the servers' user out
    of a test's directories in the middle of it (tmp_path_factory)."""
    global _session_temp
    if config.option.basetemp is None and os.geteuid() == 0:
        _session_temp = Path(tempfile.mkdtemp(prefix="dlzb-pytest-", dir="/tmp"))
        searchable_by_servers(_session_temp)
        config.option.basetemp = str(_session_temp / "t")  # pytest makes it itself


def pytest_unconfigure(config: pytest.Config) -> None:
    if _session_temp is not None:
        shutil.rmtree(_session_temp, ignore_errors=True)


@pytest.fixture(scope="module")
def run_dir(request: pytest.FixtureRequest) -> Iterator[Path]:
    path = new_run_dir(f"test-{request.module.__name__.rsplit('.', 1)[-1]}")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def run_root() -> Iterator[Path]:
    """A DLZBENCH_RUN_DIR for bench commands run by a test module, kept out of the repo's run/.

    Under /tmp, short: pytest's tmp_path is too deep for PostgreSQL's unix socket (107 bytes).
    """
    path = Path(tempfile.mkdtemp(prefix="dlzb-", dir="/tmp"))
    searchable_by_servers(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def tmp_path_factory(tmp_path_factory: pytest.TempPathFactory) -> pytest.TempPathFactory:
    """pytest's own (tmp_path's too), each directory it makes searchable by the servers a test
    starts there."""
    make = tmp_path_factory.mktemp

    def mktemp(basename: str, numbered: bool = True) -> Path:
        path = make(basename, numbered)
        searchable_by_servers(path)
        return path

    tmp_path_factory.mktemp = mktemp  # type: ignore[method-assign]
    return tmp_path_factory


def searchable_by_servers(path: Path) -> None:
    """path, and the private directories above it (pytest's, mode 0700, up to the first that
    others may search already: /tmp), searchable by others, so by the user the servers run as
    (base.process) too; not listable."""
    for directory in (path, *path.parents):
        mode = directory.stat().st_mode
        if mode & stat.S_IXOTH:
            return
        directory.chmod(mode | stat.S_IXOTH)
