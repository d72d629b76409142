"""A store: where zone data lives. The one interface every backend implements.

Every backend is one module in stores/, named after the backend, that defines `STORE`, an
instance of a `Store` subclass; servers/__init__.py lists which DNS servers each store feeds.
A store knows its own server (if it has one), how to write the model into it, read it back and
replace one zone, and what a DLZ driver or a PowerDNS backend must be told to reach it. It
never times or counts its loads (bench/measure/loading.py does, the same way for every
store), and it never builds a DNS server's config (servers/ does).
"""

from __future__ import annotations

import signal
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

from base.errors import UserError
from base.netns import DatabaseHost
from databases.url import StoreUrl
from zonedata.model import Zone

# Who may transfer (AXFR) a zone: every loader writes this per zone into its ACL table.
DEFAULT_XFR_CLIENTS: tuple[str, ...] = ("127.0.0.1", "::1")

# How the other methods reach the data: a server object (PgServer, ...) or a directory.
T = TypeVar("T")


@dataclass(frozen=True)
class CacheReading:
    """The store's own cache at one moment, as its database reports it (`scale`).

    hits and misses are counters since the server started: what a measurement reports is the
    difference of two readings (since). resident_bytes of mapped_bytes is a gauge: how much of
    the data the server has mapped is in memory now.
    """

    source: str                        # what was read, e.g. "pg_stat_database blks_hit/read"
    configured_bytes: int | None       # the cache size the suite configures for this store
    hits: int | None = None            # page or block requests the cache answered
    misses: int | None = None          # requests that had to read past it
    resident_bytes: int | None = None
    mapped_bytes: int | None = None

    def since(self, before: CacheReading | None) -> dict[str, float | int | str | None]:
        """This reading against an earlier one: the requests in between and their hit ratio,
        the resident share now, the configured size."""
        hits = _delta(self.hits, before.hits if before else None)
        misses = _delta(self.misses, before.misses if before else None)
        requests = None if hits is None or misses is None else hits + misses
        resident = (self.resident_bytes / self.mapped_bytes
                    if self.resident_bytes is not None and self.mapped_bytes else None)
        return {"source": self.source, "configured_bytes": self.configured_bytes,
                "hits": hits, "misses": misses,
                "hit_ratio": hits / requests if requests else None,
                "resident_bytes": self.resident_bytes, "mapped_bytes": self.mapped_bytes,
                "resident_share": resident}


def _delta(now: int | None, before: int | None) -> int | None:
    """now - before; now alone without an earlier reading or after a restart reset the
    counters (they count from that start then)."""
    if now is None:
        return None
    if before is None or now < before:
        return now
    return now - before


class Store(ABC, Generic[T]):
    """A place zone data lives, with its private server (if any) and its bulk loader."""

    name: ClassVar[str] = ""
    # Whether the store runs a database server of its own (PostgreSQL, MariaDB, slapd):
    # its processes are restarted between measurements and their CPU and memory accounted.
    has_server: ClassVar[bool] = False
    # The URL schemes of a server of this kind that the suite did not start (--store-url);
    # none: the store always runs its own.
    url_schemes: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def server(self, run_dir: Path, *,
               db_host: DatabaseHost | None = None) -> AbstractContextManager[T]:
        """Start the store's private server (if it has one) under run_dir; yield its target.
        With db_host, the server runs inside that network namespace ("the database on its own
        host"), reached over TCP at its address only.

        Leaving the context stops the server and leaves no process behind.
        """

    def check_url(self, url: StoreUrl) -> None:
        """Refuse (UserError naming the URL) a parsed --store-url this store cannot use, before
        any network: by default its path must name one database."""
        if not url.database or "/" in url.database:
            raise url.error("names no database (…/DATABASE at the end): the suite's tables "
                            "need a database of their own")

    def external(self, url: StoreUrl, *, overwrite: bool) -> AbstractContextManager[T]:
        """The store in the database at url, on a server the suite did not start; yield its
        target. Refuses (UserError naming the URL) a server that does not answer and a
        database holding objects the suite did not create unless `overwrite`; then holds the
        suite's tables, empty. Leaving the context stops nothing and drops nothing."""
        raise url.error(f"the {self.name} store cannot use a server the suite did not start")

    def check_external(self, url: StoreUrl, *, overwrite: bool) -> str:
        """What external() checks before writing anything, alone: a command checks every
        --store-url so before it starts anything. The server's name and version."""
        raise url.error(f"the {self.name} store cannot use a server the suite did not start")

    def server_is_ours(self, target: T) -> bool:
        """Whether the suite started the store's server: only then is it restarted between
        measurements and its processes' CPU, memory and cache accounted."""
        return self.has_server

    def client_env(self, target: T) -> dict[str, str]:
        """Environment a DNS server reading this store needs besides its configuration: a
        password kept out of files (named.conf is written to disk)."""
        return {}

    @abstractmethod
    def load(self, zones: Iterable[Zone], target: T) -> None:
        """Write zones with the store's bulk path; a zone already present is replaced whole."""

    def update(self, zone: Zone, target: T) -> None:
        """Replace one zone while a server may be reading it (the runner's update visibility)."""
        self.load([zone], target)

    @abstractmethod
    def read_back(self, target: T) -> Iterator[Zone]:
        """Every zone in the store, in the model's form (for round-trip tests)."""

    def as_held(self, zone: Zone) -> Zone:
        """The zone as this store keeps it: what read_back gives after loading it. The same
        zone, unless the store's own software cannot keep some data as given (then it says
        what it changes, and round-trip tests expect exactly that)."""
        return zone

    def dlz_args(self, target: T, options: Mapping[str, str]) -> dict[str, str]:
        """The key=value arguments a DLZ driver needs to reach this store's data; `options`
        are a driver's own (servers/__init__.py), e.g. which Berkeley DB access method."""
        raise UserError(f"the {self.name} store is not read through a DLZ driver")

    def pdns_settings(self, target: T) -> dict[str, str]:
        """PowerDNS's launch= and its backend's settings that reach this store's data."""
        raise UserError(f"the {self.name} store is not read by a PowerDNS backend")

    def round_trips(self, target: T) -> AbstractContextManager[Callable[[], object]]:
        """A function making one trivial request to the store's server, the way its DLZ driver
        reaches it (through a proxy when the target has one): ping-style round-trip times."""
        raise UserError(f"the {self.name} store has no server to make round trips to")

    def tcp_endpoint(self, target: T) -> tuple[str, int]:
        """(address, port) where the store's server takes TCP connections directly: what a
        latency proxy in front of it forwards to."""
        raise UserError(f"the {self.name} store has no server a proxy could stand in front of")

    def restart_server(self, target: T) -> None:
        """Restart the store's server with its data kept (a fresh start between measurements).

        Stores without a server have nothing to restart.
        """
        return None

    def server_pids(self, target: T) -> list[int]:
        """Processes of the store's server, for CPU and memory accounting."""
        return []

    def cache_reading(self, target: T, options: Mapping[str, str]) -> CacheReading | None:
        """The store's own cache figures now, for the driver whose `options` are given (a
        store's drivers may use different caches); None: no cache of its own to read (the
        data is in named's memory, or read through the kernel's page cache only)."""
        return None


class DirectoryStore(Store[Path]):
    """A store without a server: its data lives in a directory, which is the target."""

    @contextmanager
    def server(self, run_dir: Path, *, db_host: DatabaseHost | None = None) -> Iterator[Path]:
        if db_host is not None:
            raise UserError(f"the {self.name} store has no server to run on a database host "
                            "of its own (--db-host netns is for stores with a server)")
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
