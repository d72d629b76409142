"""The one interface the runner, `serve` and `verify` see: a Store.

Every backend is one module in stores/ that subclasses `Store` and is listed once in
stores/__init__.py. Nothing outside that module knows which database is behind it.
"""

from __future__ import annotations

import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zonedata.model import Zone

# Who may transfer (AXFR) a zone: every loader writes this per zone into its ACL table.
DEFAULT_XFR_CLIENTS: tuple[str, ...] = ("127.0.0.1", "::1")


@dataclass
class LoadStats:
    store: str
    zones: int = 0
    records: int = 0
    seconds: float = 0.0

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


class Store(ABC):
    """A place zone data lives, plus how to start it and how named's DLZ driver reaches it."""

    name: str = ""
    # Driver names this store serves (`--driver` values): usually just the store name.
    variants: tuple[str, ...] = ()

    @abstractmethod
    def server(self, run_dir: Path) -> AbstractContextManager[Any]:
        """Start the store's private server (if it has one) under run_dir; yield its target.

        The target is whatever the other methods need to reach the data (a DSN, a directory).
        Leaving the context stops the server and leaves no process behind.
        """

    @abstractmethod
    def load(self, zones: Iterable[Zone], target: Any) -> LoadStats:
        """Write zones with the store's bulk path; a zone already present is replaced whole."""

    def update(self, zone: Zone, target: Any) -> None:
        """Replace one zone while named may be reading it (the runner's update visibility)."""
        self.load([zone], target)

    @abstractmethod
    def read_back(self, target: Any) -> Iterator[Zone]:
        """Every zone in the store, in the model's form (for round-trip tests)."""

    @abstractmethod
    def dlz_clause(self, variant: str, target: Any, threads: int, connections: int) -> str:
        """named.conf text that serves this store's zones (a dlz{} or, for native, zone{}s)."""

    def restart_server(self, target: Any) -> None:
        """Restart the store's server with its data kept (a fresh start between measurements).

        Stores without a server have nothing to restart.
        """
        return None

    def update_needs_reload(self, variant: str) -> bool:
        """Whether named sees an update only after `rndc reload` (zone files, the memory driver)."""
        return False

    def driver_file(self, variant: str) -> Path | None:
        """The DLZ module (.so) this variant loads into named; None for native BIND."""
        return None

    def is_built(self, variant: str) -> bool:
        path = self.driver_file(variant)
        return path is None or path.exists()

    def server_pids(self, target: Any) -> list[int]:
        """Processes of the store's server, for CPU and memory accounting."""
        return []


class Timer:
    """Wall-clock seconds of a with-block, for LoadStats."""

    def __enter__(self) -> Timer:
        self.start = time.monotonic()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self.start


class DirectoryStore(Store):
    """A store without a server: its data lives in a directory, which is the target."""

    @contextmanager
    def server(self, run_dir: Path) -> Iterator[Path]:
        directory = Path(run_dir).resolve() / self.name
        directory.mkdir(parents=True, exist_ok=True)
        yield directory


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C (or SIGTERM, SIGHUP) inside the block takes effect when the block ends.

    For a write that spans several places which must agree (bdbhpt's three homes): the block is
    short, so the signal waits milliseconds and is then delivered to the handler it had.
    Signal handlers belong to the main thread; elsewhere the block defers nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: pending.append(signum))
                for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            # None: a handler set outside Python, which Python cannot put back.
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        if pending:
            signal.raise_signal(pending[0])
