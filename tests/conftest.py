"""Shared fixtures: a private run directory per test module, removed afterwards; a private
run root for the tests that start `python3 -m bench`, also removed afterwards."""

from __future__ import annotations

import shutil
import signal
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
    yield path
    shutil.rmtree(path, ignore_errors=True)
