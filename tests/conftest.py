"""Shared fixtures: a private run directory per test module, removed afterwards."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.servers.process import new_run_dir


@pytest.fixture(scope="module")
def run_dir(request: pytest.FixtureRequest) -> Iterator[Path]:
    path = new_run_dir(f"test-{request.module.__name__.rsplit('.', 1)[-1]}")
    yield path
    shutil.rmtree(path, ignore_errors=True)
