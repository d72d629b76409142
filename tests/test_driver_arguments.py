"""The drivers' argument tables at work, without named: the memory driver's dlz_create, called
through ctypes as named calls it, over a store its loader wrote. What the core's and the
driver's tables declare is taken, with their defaults (memory's own down_interval_ms among
them); anything else stops it with the one-line errors of drivers/common/args.c, which name the
key and never the value. The same parser is every driver's (drivers/common)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from loaders.memory import LOADER
from servers.dlz import library_path
from zonedata.generator import coverage_zones

MEMORY = library_path("memory")
ISC_R_SUCCESS, ISC_R_FAILURE = 0, 25  # drivers/common/dlz_abi.h

# Starts no process: part of `make check` (tests/conftest.py holds it to that).
pytestmark = [pytest.mark.check,
              pytest.mark.skipif(not MEMORY.exists(), reason=f"{MEMORY} is not built")]

# putrr and putnamedrr, which dlz_create only checks named passed; never called here.
_PUT = ctypes.CFUNCTYPE(ctypes.c_int)
_put = _PUT(lambda: ISC_R_FAILURE)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The memory driver's arguments over the coverage zones, as its loader gives them."""
    target = tmp_path_factory.mktemp("memory")
    LOADER.load(coverage_zones(), target)
    return LOADER.dlz_args(target, {})


def create(words: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """dlz_create's result for `database "dlopen <memory driver> WORDS..."`, and what the
    driver logged (with no log callback from named it writes to stderr)."""
    driver = ctypes.CDLL(str(MEMORY))
    argv = (ctypes.c_char_p * (len(words) + 1))(str(MEMORY).encode(),
                                                 *(word.encode() for word in words))
    instance = ctypes.c_void_p()
    capfd.readouterr()
    result = driver.dlz_create(b"args", ctypes.c_uint(len(words) + 1), argv,
                               ctypes.byref(instance), b"putrr", _put, b"putnamedrr", _put,
                               None)
    if result == ISC_R_SUCCESS:
        driver.dlz_destroy(instance)
    return result, capfd.readouterr().err


def _words(args: dict[str, str], *more: str) -> list[str]:
    return [f"{key}={value}" for key, value in args.items()] + list(more)


def test_defaults_come_from_the_tables(store: dict[str, str], capfd: pytest.CaptureFixture[str]
                                       ) -> None:
    result, log = create(_words(store), capfd)
    assert result == ISC_R_SUCCESS, log
    # memory's table replaces the core's down_interval_ms (1000) with 0.
    assert ("ready: connections=1 memo_ms=100 hint_zones=4096 down_interval_ms=0 "
            "thread-safe\n") in log


def test_given_values_are_taken(store: dict[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    result, log = create(_words(store, "connections=3", "memo_ms=0", "hint_zones=0",
                                "down_interval_ms=600000", "trace=on"), capfd)
    assert result == ISC_R_SUCCESS, log
    assert ("ready: connections=3 memo_ms=0 hint_zones=0 down_interval_ms=600000 thread-safe "
            "trace\n") in log


@pytest.mark.parametrize(("words", "error"), [
    (["bogus=1"], "unknown argument 'bogus'"),
    (["connections=0"], "argument connections: expected an integer from 1 to 4096"),
    (["connections=4097"], "argument connections: expected an integer from 1 to 4096"),
    (["memo_ms=1e3"], "argument memo_ms: expected an integer from 0 to 60000"),
    (["down_interval_ms=600001"],
     "argument down_interval_ms: expected an integer from 0 to 600000"),
    (["trace=maybe"], "argument trace: expected yes or no"),
    (["memo_ms=5", "memo_ms=6"], "argument 'memo_ms' given twice"),
    (["=5"], "argument 2 is not key=value"),
    (["update_key=k"], "update_key and update_unsigned need update_zones"),
], ids=lambda value: value if isinstance(value, str) else " ".join(value))
def test_anything_else_is_one_error(store: dict[str, str], capfd: pytest.CaptureFixture[str],
                                    words: list[str], error: str) -> None:
    result, log = create(_words(store, *words), capfd)
    assert result == ISC_R_FAILURE
    assert f"dlz_memory: {error}\n" in log
    assert 'dlz "args" not started' in log


def test_a_required_argument_missing_is_named(capfd: pytest.CaptureFixture[str]) -> None:
    result, log = create(["memo_ms=5"], capfd)
    assert result == ISC_R_FAILURE
    assert "dlz_memory: argument file is required: the data file" in log


def test_a_mistyped_key_never_shows_its_value(store: dict[str, str],
                                              capfd: pytest.CaptureFixture[str]) -> None:
    result, log = create(_words(store, "pasword=s3cret-value", "s3cret-word"), capfd)
    assert result == ISC_R_FAILURE
    assert "unknown argument 'pasword'" in log and "s3cret" not in log


def test_the_store_file_is_the_one_given(tmp_path: Path, capfd: pytest.CaptureFixture[str]
                                         ) -> None:
    """A text argument reaches the driver as given: a file that is not there stops it."""
    result, log = create([f"file={tmp_path / 'absent'}"], capfd)
    assert result == ISC_R_FAILURE
    assert str(tmp_path / "absent") in log
