"""The promise of `make check` (pytest -m check): a test marked `check` starts no process, so the
set needs nothing but the venv and stays quick. tests/conftest.py keeps it with an audit hook;
here a pytest of its own, with that conftest as a plugin, shows that a marked test which starts
a process fails, also when it swallows the refusal or its fixture is the one starting it, and
that unmarked tests are left alone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from base.paths import REPO_ROOT

INNER = '''
import subprocess

import pytest


@pytest.fixture
def started() -> None:
    subprocess.run(["true"], check=False)


@pytest.mark.check
def test_marked_and_starts_nothing() -> None:
    assert sum(range(4)) == 6


@pytest.mark.check
def test_marked_and_swallows_the_refusal() -> None:
    try:
        subprocess.run(["true"], check=False)
    except PermissionError:
        pass


@pytest.mark.check
def test_marked_and_its_fixture_starts_one(started: None) -> None:
    pass


def test_unmarked_and_starts_one() -> None:
    assert subprocess.run(["true"], check=False).returncode == 0
'''


def test_a_check_test_that_starts_a_process_fails(tmp_path: Path) -> None:
    inner = tmp_path / "test_inner.py"
    inner.write_text(INNER)
    done = subprocess.run([sys.executable, "-m", "pytest", "-c", "pyproject.toml",
                           "-p", "tests.conftest", "-p", "no:cacheprovider", "-q", "-rA",
                           str(inner)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    outcomes = dict((name, status) for status, name in
                    re.findall(r"^(PASSED|FAILED|ERROR) \S*::(\w+)", done.stdout, re.MULTILINE))
    assert outcomes == {"test_marked_and_starts_nothing": "PASSED",
                        "test_marked_and_swallows_the_refusal": "FAILED",
                        "test_marked_and_its_fixture_starts_one": "ERROR",
                        "test_unmarked_and_starts_one": "PASSED"}, done.stdout
    assert "is marked check but started a process: subprocess.Popen" in done.stdout
