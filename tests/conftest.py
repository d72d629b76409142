"""Shared fixtures: a private run directory per test module, removed afterwards; a private
run root for the tests that start `python3 -m bench`, also removed afterwards; pytest's
tmp_path, searchable by the servers' user."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from base.process import new_run_dir

# A suite started in the background by a non-interactive shell (`nohup make test &`) inherits
# SIGINT ignored, and an ignored signal stays ignored across exec: every Ctrl-C test then sent a
# signal nobody received (22 failed so). A handler installed here is reset to the default in
# every child at exec, so the commands under test receive Ctrl-C as from a terminal.
signal.signal(signal.SIGINT, signal.default_int_handler)


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
