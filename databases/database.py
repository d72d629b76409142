"""A store's database: the place its data lives, and how the suite runs and reaches it.

Every store's loader (loaders/) writes into one `Database`: a private server the suite starts
(PostgreSQL, MariaDB, slapd), one lent to it by URL (--store-url), or a plain directory. The
database knows the server's life (start, restart, stop, its processes), how a client reaches
it (environment, round trips, a TCP endpoint for a proxy) and its cache's figures; it knows
nothing of the tables or entries a loader keeps there, except what a loader hands it as a
`Schema` (to make on a fresh server) and a `LentSchema` (to claim a lent database with).
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, Protocol, Self, TypeVar

from base.errors import UserError
from base.netns import DatabaseHost
from base.process import (
    ManagedProcess,
    drop_page_cache,
    give_to_service_user,
    new_run_dir,
    require_service_user_reaches,
    run_checked,
    service_user,
    write_private,
)
from databases.url import StoreUrl

# How a database is reached: a server object (PgServer, ...) or a directory: the target.
T = TypeVar("T")
# A client connection of one engine (psycopg, MySQLdb, python-ldap).
C = TypeVar("C", contravariant=True)


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


class Schema(Protocol[C]):
    """What a loader keeps in its database, as a fresh private server must have it before
    anything reads it (a driver, a loader). Handed in by the loader: databases/ never
    imports loaders/."""

    def ensure(self, conn: C) -> None:
        """Make the tables (the suffix entry) unless they are all there already."""


class LentSchema(Protocol[C]):
    """How a loader claims a database lent to the suite (--store-url): only the loader knows
    which tables (entries) are its own."""

    def check_lent(self, conn: C, url: StoreUrl, *, overwrite: bool) -> None:
        """Refuse (UserError naming url) a database holding what the suite did not create
        where its own objects go, or anything else unless `overwrite`; writes nothing."""

    def hold_empty(self, conn: C, url: StoreUrl) -> None:
        """The loader's tables (entries) there, holding no zone: a command loads its data set
        into an empty store, as into a private server."""


class Database(ABC, Generic[T]):
    """The place one store's data lives: its server's life, how clients reach it, its cache.

    `store` names the store in messages; the methods take the target server() or external()
    yielded.
    """

    # Whether the store runs a database server of its own (PostgreSQL, MariaDB, slapd):
    # its processes are restarted between measurements and their CPU and memory accounted.
    has_server: ClassVar[bool] = False
    # Whether kill_clients can end the server's client connections (`bench faults`).
    kills_clients: ClassVar[bool] = False
    # Why the server cannot end one client connection alone (end_connection; `bench faults`'
    # channel-cut), in a line; None: it can.
    no_connection_end: ClassVar[str | None] = "the store has no server holding connections"
    # The store's server program as `bench instructions` names its figure, when the suite
    # runs that server under callgrind (PrivateServer.run_under); None: it does not, and
    # not_profiled says why (measured on this VM: docs/method/instructions.md).
    profiled_program: ClassVar[str | None] = None
    not_profiled: ClassVar[str] = "not counted: not tried under Valgrind"

    def __init__(self, store: str) -> None:
        self.store = store
        # The URL schemes of a server of this kind that the suite did not start
        # (--store-url); none: the store always runs its own.
        self.url_schemes: tuple[str, ...] = ()

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
        any network: by default its path must name one database, and its ?options are
        check_options'."""
        if not url.database or "/" in url.database:
            raise url.error("names no database (…/DATABASE at the end): the suite's tables "
                            "need a database of their own")
        self.check_options(url)

    def check_options(self, url: StoreUrl) -> None:
        """Refuse the URL's ?key=value settings this store does not pass on (default: any)."""
        if url.options:
            raise url.error(f"the {self.store} store takes no ?options "
                            f"(?{url.options[0][0]}=...)")

    @staticmethod
    def check_file_option(url: StoreUrl, key: str, value: str) -> None:
        """Refuse a ?key=FILE setting (a CA certificate, a CRL) that is not an absolute path
        the servers' user may read: the DLZ driver inside named reads it, as that user."""
        if not value.startswith("/"):
            raise url.error(f"?{key}={value}: an absolute path (named reads it)")
        require_service_user_reaches(Path(value), f"--store-url {url} ?{key}=")

    def external(self, url: StoreUrl, *, overwrite: bool) -> AbstractContextManager[T]:
        """The store in the database at url, on a server the suite did not start; yield its
        target. Refuses (UserError naming the URL) a server that does not answer and a
        database holding objects the suite did not create unless `overwrite`; then holds the
        suite's tables, empty. Leaving the context stops nothing and drops nothing."""
        raise self.no_lent_server(url)

    def check_external(self, url: StoreUrl, *, overwrite: bool) -> str:
        """What external() checks before writing anything, alone: a command checks every
        --store-url so before it starts anything. The server's name and version."""
        raise self.no_lent_server(url)

    def no_lent_server(self, url: StoreUrl) -> UserError:
        """The refusal of a --store-url for a store that always runs its own server."""
        return url.error(f"the {self.store} store cannot use a server the suite did not start")

    def server_is_ours(self, target: T) -> bool:
        """Whether the suite started the store's server: only then is it restarted between
        measurements and its processes' CPU, memory and cache accounted."""
        return self.has_server

    def client_env(self, target: T) -> dict[str, str]:
        """Environment a DNS server reading this store needs besides its configuration
        (PostgreSQL's PGPASSFILE); never a password, which stays in a file of its own."""
        return {}

    def round_trips(self, target: T) -> AbstractContextManager[Callable[[], object]]:
        """A function making one trivial request to the store's server, the way its DLZ driver
        reaches it (through a proxy when the target has one): ping-style round-trip times."""
        raise UserError(f"the {self.store} store has no server to make round trips to")

    def tcp_endpoint(self, target: T) -> tuple[str, int]:
        """(address, port) where the store's server takes TCP connections directly: what a
        latency proxy in front of it forwards to."""
        raise UserError(f"the {self.store} store has no server a proxy could stand in front of")

    def restart_server(self, target: T, *, cold: bool = False) -> None:
        """Restart the store's server with its data kept (a fresh start between measurements);
        cold: the machine's page cache dropped while it is down (`faults`' db-cold).

        Stores without a server have nothing to restart.
        """
        return None

    def server_pids(self, target: T) -> list[int]:
        """Processes of the store's server, for CPU and memory accounting."""
        return []

    def kill_clients(self, target: T) -> int:
        """End, abruptly, every client connection of the suite's own server but the one doing
        it (`bench faults`: the DNS server's connections die under it); how many ended."""
        raise UserError(f"the {self.store} store's server has no client connections the suite "
                        "can end")

    def end_connection(self, target: T, connection: int) -> None:
        """End, abruptly, the one client connection the suite's own server numbers
        `connection` (PostgreSQL's backend pid, MariaDB's connection id); every other stays."""
        raise UserError(f"the {self.store} store cannot end one connection: "
                        f"{self.no_connection_end}")

    def reader_connections(self, target: T) -> int:
        """How many connections the reading account (the DNS server's) holds now."""
        raise UserError(f"the {self.store} store counts no connections: "
                        f"{self.no_connection_end}")

    def cap_reader(self, target: T, limit: int | None) -> None:
        """The reading account may hold at most limit connections (None: any number): it
        opens no more past it; those it holds stay."""
        raise UserError(f"the {self.store} store limits no account's connections: "
                        f"{self.no_connection_end}")

    @contextmanager
    def connection_ended(self, target: T, connection: int, *, kept_out: bool
                         ) -> Iterator[None]:
        """The client connection the server numbers `connection` ended abruptly (one of the
        reading account's); kept_out: that account may open no connection beyond those it
        holds after it until the block ends, so the ended one cannot come back while every
        other stays. A DNS server's store connections must all be open by then: one it opens
        later is kept out too."""
        if not kept_out:
            self.end_connection(target, connection)
            yield
            return
        held = self.reader_connections(target)
        if held < 2:
            raise UserError(f"the {self.store} store's reading account holds {held} "
                            "connection(s): none besides the one to end, which nothing could "
                            "then keep out")
        # Capped first: the ended connection finds its place taken the moment it is gone.
        self.cap_reader(target, held - 1)
        try:
            self.end_connection(target, connection)
            yield
        finally:
            self.cap_reader(target, None)

    def cache_reading(self, target: T, options: Mapping[str, str]) -> CacheReading | None:
        """The store's own cache figures now, for the driver whose `options` are given (a
        store's drivers may use different caches); None: no cache of its own to read (the
        data is in named's memory, or read through the kernel's page cache only)."""
        return None


class ServerTarget(Protocol):
    """What a database with a server reads from its target, private or lent alike: `env`,
    the DNS server's environment (no password in it), and `driver_password`, the password a
    DNS server that keeps it in its own 0600 configuration (PowerDNS) connects with."""

    started_here: bool
    env: dict[str, str]
    driver_password: str | None

    def restart(self, *, cold: bool = False) -> None: ...

    def pids(self) -> list[int]: ...


S = TypeVar("S", bound=ServerTarget)


class ServerDatabase(Database[S], Generic[S, C]):
    """A database on a server (PostgreSQL, MariaDB, slapd): the suite's own or a lent one,
    which the target tells apart (started_here). `lent` is how the store's loader claims a
    lent database; without one the store always runs its own server."""

    has_server = True
    no_connection_end: ClassVar[str | None] = ("the suite cannot end one of its server's "
                                               "connections alone")
    # The URL schemes of a lent server of this kind.
    lent_schemes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, store: str, lent: LentSchema[C] | None) -> None:
        super().__init__(store)
        self.lent = lent
        self.url_schemes = self.lent_schemes if lent is not None else ()

    def claim(self, url: StoreUrl) -> LentSchema[C]:
        """The loader's claim on the lent database at url; refused for a store without one."""
        if self.lent is None:
            raise self.no_lent_server(url)
        return self.lent

    def server_is_ours(self, target: S) -> bool:
        return target.started_here

    def client_env(self, target: S) -> dict[str, str]:
        return target.env

    def restart_server(self, target: S, *, cold: bool = False) -> None:
        target.restart(cold=cold)  # a lent server's: nothing

    def server_pids(self, target: S) -> list[int]:
        return target.pids()


@contextmanager
def lent_password_directory(store: str) -> Iterator[Path]:
    """A directory of the servers' user (base.process), removed at the end, for the file that
    hands a lent server's password to the DLZ driver inside named: not named.conf, not named's
    environment (readable for its whole life: /proc/PID/environ, a core dump)."""
    directory = new_run_dir(f"{store}-lent")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class Connection(Protocol):
    def close(self) -> None: ...


K = TypeVar("K", bound=Connection)


class SqlDatabase(ServerDatabase[S, K]):
    """A database on an SQL server: every connection a loader gets holds its `schema`, made on
    first use (a fresh private server makes it as it starts)."""

    def __init__(self, store: str, schema: Schema[K], lent: LentSchema[K] | None = None
                 ) -> None:
        super().__init__(store, lent)
        self.schema = schema

    @abstractmethod
    def open(self, target: S) -> K:
        """A new connection to the target's database, as the loaders use it."""

    def connect(self, target: S) -> K:
        """A connection (open's) to a database holding the schema."""
        conn = self.open(target)
        try:
            self.schema.ensure(conn)
        except BaseException:
            conn.close()
            raise
        return conn


# A directory store's cache figures, as its loader's layout tells them (which file or
# environment a driver's options name, the cache size the loader configures).
DirectoryCache = Callable[[Path, Mapping[str, str]], CacheReading]


class DirectoryDatabase(Database[Path]):
    """A store without a server: its data lives in a directory, which is the target."""

    def __init__(self, store: str, cache: DirectoryCache | None = None) -> None:
        super().__init__(store)
        # None: no cache of its own (the data is in named's memory, or read through the
        # kernel's page cache only).
        self.cache = cache

    @contextmanager
    def server(self, run_dir: Path, *, db_host: DatabaseHost | None = None) -> Iterator[Path]:
        if db_host is not None:
            raise UserError(f"the {self.store} store has no server to run on a database host "
                            "of its own (--db-host netns is for stores with a server)")
        directory = Path(run_dir).resolve() / self.store
        directory.mkdir(parents=True, exist_ok=True)
        yield directory

    def cache_reading(self, target: Path, options: Mapping[str, str]) -> CacheReading | None:
        return self.cache(target, options) if self.cache is not None else None


class PrivateServer(ABC):
    """A server process the suite starts: `with` starts it and always stops it. It runs as
    the servers' user (base.process) in its run directory, inside db_host's network namespace
    when it has one, logging to log_path."""

    # The command prefix the server process runs under (run_under).
    wrapper: tuple[str, ...] = ()
    run_dir: Path
    db_host: DatabaseHost | None
    log_path: Path

    def hand_over(self, secrets: Mapping[Path, str]) -> None:
        """Before a start: the run directory and all in it the servers' user's (the server
        writes there, and its clients, named or PowerDNS, run as the same user), and each
        secret file written with its text (a password: 0600, that user's)."""
        give_to_service_user(self.run_dir, tree=True)
        for path, text in secrets.items():
            write_private(path, text)

    def run_set_up(self, argv: Sequence[str], what: str, *, timeout: float | None = 600,
                   pass_fds: Sequence[int] = ()) -> str:
        """A set-up command of the server's (initdb, mariadb-install-db, slapadd) run as the
        servers' user in the run directory, whose files it writes: run_checked's."""
        return run_checked(argv, what, user=service_user(), cwd=self.run_dir, timeout=timeout,
                           pass_fds=pass_fds)

    def server_process(self, name: str, argv: Sequence[str], *,
                       pass_fds: Sequence[int] = ()) -> ManagedProcess:
        """The server's process (not started) in the run directory, as the servers' user: on
        a database host, started as root, which alone may enter its namespace, and dropping
        to that user there."""
        if self.db_host is None:
            return ManagedProcess(name, argv, self.log_path, cwd=self.run_dir,
                                  pass_fds=pass_fds)
        return ManagedProcess(name, self.db_host.command(argv, as_service_user=True),
                              self.log_path, cwd=self.run_dir, as_root=True, pass_fds=pass_fds)

    def run_under(self, wrapper: Sequence[str]) -> None:
        """From the next start, run under the command prefix `wrapper` (Valgrind, for
        bench/measure/instructions.py, which then restarts the server with its data kept)."""
        self.wrapper = tuple(wrapper)

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    def restart(self, *, cold: bool = False) -> None:
        """Stop and start again; cold: with the page cache dropped in between, so that the
        server meets its data on disk as after a reboot."""
        self.stop()
        if cold:
            drop_page_cache()
        self.start()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
