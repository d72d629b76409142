"""Ctrl-C in the middle of a load leaves every store with complete zones only.

`python3 -m bench load` runs in its own session and gets SIGINT in its process group, as a
terminal's Ctrl-C would deliver it (to the loader and to any tool it runs, like slapadd), while
it is writing. Then the store is started again and read back: every zone in it must be exactly
one of the versions that were loaded, never a mix or a part. Two cases per store: the first load
into an empty store (the bulk paths) and a reload over zones already there (the online paths),
two cases at a time.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from base.paths import REPO_ROOT
from base.process import descendants
from loaders import get_loader
from loaders.loader import Loader
from servers import store_names
from tests.at_once import results_at_once
from zonedata.generator import generate, generate_zone
from zonedata.model import Zone

ZONES = 5000  # enough for every store to be mid-load a moment after it starts writing
PRELOADED = 2000
# pdns_lmdb is read back with a `pdnsutil list-zone` process per zone: over 2,000 preloaded
# zones its reload case took 33.7 s, over 200 4.0 s (16 ms a zone; every other store's case
# takes 7.6 s or less). Its reload replaces a zone in two pdnsutil runs (36 ms), so Ctrl-C
# still comes among the first few zones of the 200.
PRELOADED_FOR = {"pdns_lmdb": 200}
OLD_SEED, NEW_SEED = 1, 2
START_TIMEOUT = 60.0


def _command_running(name: str) -> Callable[[int], bool]:
    def running(pid: int) -> bool:
        for child in descendants(pid):
            try:
                if Path(f"/proc/{child}/comm").read_text().strip() == name:
                    return True
            except OSError:
                pass
        return False
    return running


# When to press Ctrl-C, once the loader says it is loading: ldap's first load writes an LDIF
# file and only then runs slapadd, the step that writes the directory.
INTERRUPT_WHEN: dict[str, Callable[[int], bool]] = {"ldap": _command_running("slapadd")}


def _interrupted_load(store: Loader, data: Path, log: Path, first_load: bool) -> int:
    """Run a load of ZONES zones (NEW_SEED), Ctrl-C it while writing; its exit status."""
    argv = [sys.executable, "-m", "bench", "load", "--generate", str(ZONES), "--seed",
            str(NEW_SEED), "--stores", store.name, "--data", str(data)]
    ready = INTERRUPT_WHEN.get(store.name) if first_load else None
    with open(log, "w+b") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                                start_new_session=True)
        try:
            _wait_for(lambda: b": loading into " in log.read_bytes(), proc, "loading")
            if ready is not None:
                _wait_for(lambda: ready(proc.pid), proc, "the writing step")
            time.sleep(0.3)
            os.killpg(proc.pid, signal.SIGINT)
            return proc.wait(timeout=START_TIMEOUT)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _wait_for(condition: Callable[[], bool], proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not condition():
        assert proc.poll() is None, f"the loader ended before {what}"
        assert time.monotonic() < deadline, f"the loader never reached {what}"
        time.sleep(0.01)


def _index(zone: Zone) -> int:
    return int(zone.origin.labels[0][1:])


@functools.cache
def _loaded_version(index: int, seed: int) -> list[tuple[str, int, str, str]]:
    """Zone `index` as a load with `seed` writes it, canonical; the same for every store, so
    each is built once for the module rather than once per zone read back of each store."""
    return generate_zone(index, seed=seed).canonical()


def _case(name: str, first_load: bool, run_dir: Path) -> None:
    """One store's case: the interrupted load (over preloaded zones for a reload), then the
    store read back; an AssertionError says what is wrong."""
    store = get_loader(name)
    data = run_dir / f"{name}-{'first' if first_load else 'reload'}"
    data.mkdir()
    preloaded = PRELOADED_FOR.get(name, PRELOADED)
    if not first_load:
        with store.database.server(data / name) as target:
            store.load(generate(preloaded, seed=OLD_SEED), target)
    status = _interrupted_load(store, data, data / "load.log", first_load)
    assert status == 130, (f"the loader was not interrupted mid-load (exit {status}): "
                           f"{(data / 'load.log').read_text()[-500:]}")
    with store.database.server(data / name) as target:
        back = list(store.read_back(target))
    for zone in back:
        versions = [_loaded_version(_index(zone), NEW_SEED)]
        if not first_load and _index(zone) < preloaded:
            versions.append(_loaded_version(_index(zone), OLD_SEED))
        assert zone.canonical() in versions, f"{name}: zone {zone.key} is incomplete or mixed"
    if not first_load:
        kept = {_index(z) for z in back}
        assert kept >= set(range(preloaded)), f"{name}: the reload lost zones it never replaced"


def _outcome(name: str, first_load: bool, run_dir: Path) -> BaseException | None:
    try:
        _case(name, first_load, run_dir)
    except Exception as failure:
        return failure
    return None


@pytest.fixture(scope="module")
def outcomes(run_dir: Path) -> dict[tuple[str, bool], BaseException | None]:
    """Every case, two at a time (each with a data directory and servers of its own; the
    reloads, the longer cases, first): a case mostly waits on its database server's start,
    on the loader's process and on the Ctrl-C (one after the other: 79 s of the suite on 2
    vCPUs). What went wrong in each (None: nothing)."""
    cases = [(name, first_load) for first_load in (False, True) for name in store_names()]
    return results_at_once({case: partial(_outcome, *case, run_dir) for case in cases},
                           workers=2)


@pytest.mark.parametrize("first_load", [True, False], ids=["first-load", "reload"])
@pytest.mark.parametrize("name", store_names())
def test_ctrl_c_leaves_complete_zones(
        name: str, first_load: bool,
        outcomes: dict[tuple[str, bool], BaseException | None]) -> None:
    failure = outcomes[name, first_load]
    if failure is not None:
        raise failure
