"""A loader: what writes a store's layout into its database. The one interface every backend
implements.

Every backend is one module in loaders/, named after the backend, that defines `LOADER`, an
instance of a `Loader` subclass; servers/__init__.py lists which DNS servers each store feeds.
A loader writes the model into its layout, reads it back and replaces one zone. What a server
must be told to read that layout is that server kind's interface, which the loader of every
store the kind reads defines besides this one (servers/dlz.py's DlzStore: `dlz_args`;
servers/pdns.py's PdnsStore: `pdns_settings`; and their writable forms, for RFC 2136
updates): a new kind of server adds no method here. Its `database` (databases/) is where the
layout lives: the loader is handed a target the database yields, never starts a server. It
never times or counts its loads (bench/measure/loading.py does, the same way for every
store), and it never builds a DNS server's config (servers/ does).
"""

from __future__ import annotations

import signal
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import ClassVar, Generic, TypeVar

from base.errors import UserError
from databases.database import Database
from loaders.writes import StoreWriter
from zonedata.model import Zone

# Who may transfer (AXFR) a zone: every loader writes this per zone into its ACL table.
DEFAULT_XFR_CLIENTS: tuple[str, ...] = ("127.0.0.1", "::1")

# How the loader reaches the data: the target its database yields (a server object, a
# directory).
T = TypeVar("T")


class Loader(ABC, Generic[T]):
    """One store's layout: how the model is written into its database and read back."""

    # The store's name (loaders/<name>.py, the `--stores` word).
    name: ClassVar[str] = ""
    # Where the layout lives; every method below takes a target this database yielded.
    database: Database[T]

    @abstractmethod
    def load(self, zones: Iterable[Zone], target: T) -> None:
        """Write zones with the store's bulk path; a zone already present is replaced whole."""

    def update(self, zone: Zone, target: T) -> None:
        """Replace one zone while a server may be reading it (the runner's update visibility)."""
        self.load([zone], target)

    @abstractmethod
    def read_back(self, target: T) -> Iterator[Zone]:
        """Every zone in the store, in the model's form (for round-trip tests)."""

    def writer(self, target: T) -> StoreWriter:
        """The store open for record-level writes while a server reads it (loaders/writes.py),
        through a connection of its own."""
        raise UserError(f"the {self.name} store cannot be written while serving: "
                        f"{self.no_writes}")

    # Why writer() refuses, in one line (stores that take writes leave it empty).
    no_writes: ClassVar[str] = "no writer written for it"

    def as_held(self, zone: Zone) -> Zone:
        """The zone as this store keeps it: what read_back gives after loading it. The same
        zone, unless the store's own software cannot keep some data as given (then it says
        what it changes, and round-trip tests expect exactly that)."""
        return zone

    # Every server over this store reads all of it as it starts and answers from its own
    # memory (zone files, the memory driver's file): a dropped page cache costs it nothing
    # while it serves (`bench faults`' db-cold does not apply).
    read_at_start: ClassVar[bool] = False

    def writers_hold_locks(self, options: Mapping[str, str]) -> bool:
        """Does a writer of the store hold locks that a server reading it with `options` (a
        DLZ driver's) waits for (`bench faults`' writer-stall and writer-kill)? By default
        not."""
        return False

    def zone_lock_holder(self, target: T, options: Mapping[str, str],
                         zone_key: str) -> list[str]:
        """The command of a writer process, run from the repository's root, that write-locks
        zone_key's entry where a server reading with `options` reads, prints "holding" once it
        holds the lock, and aborts at a line on its stdin (`bench faults`)."""
        raise UserError(f"the {self.name} store has no writer that holds locks")


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
