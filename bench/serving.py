"""One driver serving one data set: the store's server, the data loaded, and `named` on top.

`serve`, `verify` and the runner all start a driver through these functions, so none of them
knows which database is behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from base.process import keep_only_logs
from servers.named import Named
from stores import store_for_driver
from stores.store import LoadStats, Store
from zonedata.model import Zone


@dataclass
class LoadedStore:
    driver: str
    store: Store
    variant: str
    target: Any
    load: LoadStats
    last_zone: str  # key of the last zone loaded: startup is timed until it answers

    def named(self, run_dir: Path, *, threads: int, connections: int | None = None,
              port: int | None = None) -> Named:
        """A named (not started) whose config serves this store through its driver."""
        body = self.store.dlz_clause(self.variant, self.target, threads, connections or threads)
        return Named(run_dir / f"named-{self.driver}-{threads}", body, threads=threads,
                     port=port)

    def server_pids(self) -> list[int]:
        return self.store.server_pids(self.target)


@dataclass
class Served:
    loaded: LoadedStore
    named: Named


class _LastZone:
    """Passes zones through and remembers the last one's key."""

    def __init__(self) -> None:
        self.key = ""

    def watch(self, zones: Iterable[Zone]) -> Iterator[Zone]:
        for zone in zones:
            self.key = zone.key
            yield zone


@contextmanager
def loaded_store(driver: str, stream: Callable[[], Iterator[Zone]],
                 run_dir: Path) -> Iterator[LoadedStore]:
    """The driver's store running under run_dir with the data set loaded; once it has
    stopped, its data is deleted and its logs are kept."""
    store, variant = store_for_driver(driver)
    last = _LastZone()
    directory = run_dir / store.name
    try:
        with store.server(directory) as target:
            stats = store.load(last.watch(stream()), target)
            yield LoadedStore(driver, store, variant, target, stats, last.key)
    finally:
        keep_only_logs(directory)


@contextmanager
def serving(driver: str, stream: Callable[[], Iterator[Zone]], run_dir: Path, *,
            threads: int = 1, connections: int | None = None,
            port: int | None = None) -> Iterator[Served]:
    """Load the data into the driver's store and run named over it until the block ends."""
    with loaded_store(driver, stream, run_dir) as loaded:
        with loaded.named(run_dir, threads=threads, connections=connections,
                          port=port) as named:
            yield Served(loaded, named)
