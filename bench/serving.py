"""One driver serving one data set: the store's server, the data loaded, and `named` on top.

`serve`, `verify` and the runner all start a driver through `serving`, so none of them knows
which database is behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.servers.named import Named
from loaders import store_for_driver
from loaders.model import Zone
from loaders.store import LoadStats, Store


@dataclass
class Served:
    driver: str
    store: Store
    target: Any
    named: Named
    load: LoadStats
    last_zone: str  # key of the last zone loaded: startup is timed until it answers

    def server_pids(self) -> list[int]:
        return self.store.server_pids(self.target)


class _LastZone:
    """Passes zones through and remembers the last one's key."""

    def __init__(self) -> None:
        self.key = ""

    def watch(self, zones: Iterable[Zone]) -> Iterator[Zone]:
        for zone in zones:
            self.key = zone.key
            yield zone


@contextmanager
def serving(driver: str, stream: Callable[[], Iterator[Zone]], run_dir: Path, *,
            threads: int = 1, connections: int | None = None, port: int | None = None,
            wait: bool = True) -> Iterator[Served]:
    """Load the data into the driver's store and run named over it until the block ends.

    With wait=False named is only exec'd (for startup timing: the caller polls); otherwise the
    block starts once named answers.
    """
    store, variant = store_for_driver(driver)
    last = _LastZone()
    with store.server(run_dir / store.name) as target:
        stats = store.load(last.watch(stream()), target)
        body = store.dlz_clause(variant, target, threads, connections or threads)
        named = Named(run_dir / f"named-{driver}", body, threads=threads, port=port)
        with named if wait else _exec_only(named):
            yield Served(driver, store, target, named, stats, last.key)


@contextmanager
def _exec_only(named: Named) -> Iterator[Named]:
    """named exec'd but not waited for, stopped at the end like `with named`."""
    named.start()
    try:
        yield named
    finally:
        named.stop()
