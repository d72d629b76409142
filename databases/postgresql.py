"""A private PostgreSQL 15 instance: its own data directory, socket directory and loopback port.

The instance is a scratch benchmark database: everything in it can be reloaded from the zone
model at any time, so it trades durability for load speed. It never touches the distribution's
clusters (/etc/postgresql, /var/lib/postgresql) or the standard port.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import psycopg

from base.errors import UserError
from base.netns import DatabaseHost
from base.process import ManagedProcess, free_port, run_checked
from databases.database import CacheReading, PrivateServer, SqlDatabase
from databases.url import StoreUrl

# The versioned directory, not /usr/bin or /usr/local/bin: Debian's wrappers there pick a
# cluster from /etc/postgresql, and a fresh machine has no symlinks in /usr/local/bin.
PG_BIN = Path("/usr/lib/postgresql/15/bin")

# PostgreSQL refuses to run as root; Debian's package creates this system user.
PG_SYSTEM_USER = "postgres"

# sun_path in struct sockaddr_un holds 108 bytes including the final NUL.
_MAX_SOCKET_PATH = 107

_START_TIMEOUT = 60.0


def _settings(port: int, socket_dir: Path) -> str:
    return f"""
# --- dlzbench: a scratch benchmark instance -------------------------------------------------
# Its data is reloaded from the zone model whenever needed, so crash safety is switched off
# for load speed; never copy these settings to a database that matters.
fsync = off
synchronous_commit = off
full_page_writes = off
wal_level = minimal
max_wal_senders = 0
max_wal_size = 2GB
shared_buffers = 256MB
# named opens one connection per worker thread and per zone-transfer client.
max_connections = 400
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
logging_collector = off
"""


_HBA = """\
# dlzbench: trust on this instance's own socket and on 127.0.0.1 only.
local all all trust
host  all all 127.0.0.1/32 trust
"""

# --- dlzbench: the database on its own host (base.netns) -----------------------------------
# samenet: the namespace's own subnets, i.e. its veth /30, where named connects from.
_HBA_DB_HOST = _HBA + "host  all all samenet trust\n"


class PgServer(PrivateServer):
    """One private postmaster; `with PgServer(dir) as pg:` starts it and always stops it."""

    dbname = "dlz"
    user = "dlz"
    started_here = True

    def __init__(self, run_dir: Path, *, db_host: DatabaseHost | None = None) -> None:
        """db_host: run inside that network namespace, reached over TCP at its address only."""
        self.run_dir = Path(run_dir).resolve()
        self.data_dir = self.run_dir / "data"
        self.db_host = db_host
        self.host = db_host.address if db_host else str(self.run_dir / "socket")
        self.port = free_port()
        self.log_path = self.run_dir / "postgres.log"
        # A TCP endpoint in front of the server (a latency proxy) that the DLZ driver is to
        # use instead of reaching the server directly; loaders always go direct.
        self.via: tuple[str, int] | None = None
        self._proc: ManagedProcess | None = None
        if db_host:
            return
        socket_file = f"{self.host}/.s.PGSQL.{self.port}"
        if len(socket_file) > _MAX_SOCKET_PATH:
            raise UserError(f"run directory {self.run_dir} is too deep for a unix socket "
                            f"({socket_file} is longer than {_MAX_SOCKET_PATH} bytes)")

    # --- set-up -------------------------------------------------------------------------------

    def _run_as(self) -> str | None:
        return PG_SYSTEM_USER if os.geteuid() == 0 else None

    def _prepare_dirs(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        own_dirs = [self.run_dir]
        if not self.db_host:
            Path(self.host).mkdir(exist_ok=True)
            own_dirs.append(Path(self.host))
        user = self._run_as()
        if user is None:
            return
        _make_path_traversable(self.run_dir)
        for path in own_dirs:
            shutil.chown(path, user, user)

    def _initdb(self) -> None:
        # The bootstrap superuser is dlz itself, so no separate role has to be created.
        # C locale: byte-order comparison, which is what exact key lookups want, and no
        # dependency on the locales installed on the machine.
        run_checked([str(PG_BIN / "initdb"), "-D", str(self.data_dir), "-U", self.user,
                     "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions"],
                    "initdb (PostgreSQL)", user=self._run_as(), cwd=self.run_dir)
        with open(self.data_dir / "postgresql.conf", "a") as conf:
            conf.write(_settings(self.port, Path(self.host)))
        (self.data_dir / "pg_hba.conf").write_text(_HBA)

    def _create_database(self) -> None:
        with psycopg.connect(self._conninfo("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (self.dbname,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{self.dbname}"')

    # --- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._proc is not None:
            return
        self._prepare_dirs()
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        # The port is given here too, not only in postgresql.conf: an instance directory made
        # by an earlier PgServer object (`bench load`, then `bench startup`) gets this one's.
        argv = [str(PG_BIN / "postgres"), "-D", str(self.data_dir), "-p", str(self.port)]
        user = self._run_as()
        if self.db_host:
            # Only the namespace's address; -k '' opens no unix socket, which any process on
            # this machine could reach through the file system, namespace or not.
            argv += ["-h", self.db_host.address, "-k", ""]
            (self.data_dir / "pg_hba.conf").write_text(_HBA_DB_HOST)
            argv, user = self.db_host.command(argv, user), None
        proc = ManagedProcess("postgres", argv, self.log_path, cwd=self.run_dir, user=user)
        self._proc = proc
        try:
            proc.start()
            proc.wait_ready(self._answers, _START_TIMEOUT)
            self._create_database()
        except BaseException:
            self.stop()
            raise

    def _answers(self) -> bool:
        try:
            with psycopg.connect(self._conninfo("postgres"), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            # SIGINT is PostgreSQL's "fast" shutdown: it ends open sessions instead of
            # waiting for them (SIGTERM, "smart", would wait for every client). The timeout
            # leaves room for the shutdown checkpoint after a bulk load.
            proc.stop(timeout=60, sig=signal.SIGINT)

    # --- clients ------------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """A client's environment besides its arguments: none (trust authentication)."""
        return {}

    def _conninfo(self, dbname: str) -> str:
        return f"host={self.host} port={self.port} dbname={dbname} user={self.user}"

    def conninfo(self) -> str:
        """libpq key=value string for database dlz (the DLZ driver's connection string)."""
        return self._conninfo(self.dbname)

    def connect(self) -> psycopg.Connection:
        """A new connection to database dlz as user dlz, autocommit off."""
        return psycopg.connect(self.conninfo(), autocommit=False)

    def pids(self) -> list[int]:
        """The postmaster and every backend and helper process it forked."""
        return self._proc.pids() if self._proc is not None else []

    def version(self) -> str:
        with psycopg.connect(self.conninfo()) as conn:
            return _version(conn)


class ExternalPg:
    """A PostgreSQL server the suite did not start (--store-url): the same fields the store
    reads from a PgServer, but nothing to start, restart or stop, and no process of ours."""

    started_here = False
    db_host: DatabaseHost | None = None
    via: tuple[str, int] | None = None
    _DEFAULT_PORT = 5432

    def __init__(self, url: StoreUrl) -> None:
        self.url = url
        self.host = url.host
        self.port = url.port or self._DEFAULT_PORT
        self.dbname = url.database
        self.user = url.user
        # Without a password in the URL, libpq finds one the standard way (PGPASSWORD,
        # PGPASSFILE, ~/.pgpass) in this process and in named alike; one from the URL reaches
        # named through its environment, never through a file.
        self.env = {"PGPASSWORD": url.password} if url.password is not None else {}

    def connect(self) -> psycopg.Connection:
        """A new connection to the URL's database, autocommit off; UserError naming the URL
        (without its password) when the server cannot be reached or refuses."""
        args = {"host": self.host, "port": self.port, "dbname": self.dbname, "user": self.user,
                "password": self.url.password, "connect_timeout": _CONNECT_TIMEOUT_S}
        try:
            return psycopg.connect(**{k: v for k, v in args.items() if v is not None},
                                   autocommit=False)
        except psycopg.Error as exc:
            raise self.url.error(f"cannot connect: {exc}") from None

    def restart(self) -> None:
        """Nothing: the suite restarts no server it did not start (its caches stay warm)."""

    def pids(self) -> list[int]:
        return []


_CONNECT_TIMEOUT_S = 10

# What the store reads and writes: the suite's own server or one it was lent.
PgTarget = PgServer | ExternalPg

# blks_read counts blocks not in shared_buffers, read from the kernel (its page cache or
# the disk): the hit ratio is shared_buffers', not the machine's.
_CACHE_QUERY = ("SELECT d.blks_hit, d.blks_read, "
                "(SELECT setting::bigint * pg_size_bytes(unit) FROM pg_settings "
                "WHERE name = 'shared_buffers') "
                "FROM pg_stat_database d WHERE d.datname = current_database()")

# The backends serving clients (a DNS server's connections), less the one asking.
_CLIENT_BACKENDS = ("SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' "
                    "AND pid <> pg_backend_pid()")


class PostgresDatabase(SqlDatabase[PgTarget, psycopg.Connection]):
    """A store's PostgreSQL database: a private PgServer holding the loader's `schema` from
    its start, or a lent server's database (--store-url) the loader claims with `lent`."""

    lent_schemes = ("postgresql", "postgres")
    kills_clients = True

    @contextmanager
    def server(self, run_dir: Path, *,
               db_host: DatabaseHost | None = None) -> Iterator[PgServer]:
        with PgServer(run_dir, db_host=db_host) as pg, self.connect(pg):
            yield pg

    def open(self, target: PgTarget) -> psycopg.Connection:
        """An autocommit connection: transactions are explicit."""
        conn = target.connect()
        conn.autocommit = True
        return conn

    def check_external(self, url: StoreUrl, *, overwrite: bool) -> str:
        lent = self.claim(url)
        with ExternalPg(url).connect() as conn:
            try:
                lent.check_lent(conn, url, overwrite=overwrite)
            except psycopg.Error as exc:
                raise url.error(f"cannot read the database's objects: {exc}") from None
            return _version(conn)

    @contextmanager
    def external(self, url: StoreUrl, *, overwrite: bool) -> Iterator[PgTarget]:
        lent = self.claim(url)
        target = ExternalPg(url)
        with target.connect() as conn:
            conn.autocommit = True
            lent.check_lent(conn, url, overwrite=overwrite)
            try:
                lent.hold_empty(conn, url)
            except psycopg.Error as exc:  # e.g. no CREATE privilege: one transaction, undone
                raise url.error(f"cannot create the suite's tables: {exc}") from None
        yield target

    @contextmanager
    def round_trips(self, target: PgTarget) -> Iterator[Callable[[], object]]:
        with psycopg.connect(**client_keywords(target), autocommit=True) as conn:
            yield lambda: conn.execute("SELECT 1").fetchone()

    def tcp_endpoint(self, target: PgTarget) -> tuple[str, int]:
        # Locally the postmaster listens on 127.0.0.1 beside its socket.
        return (target.db_host.address if target.db_host else "127.0.0.1", target.port)

    def kill_clients(self, target: PgTarget) -> int:
        """SIGKILL every client backend but this connection's: the postmaster then ends every
        other backend and recovers, as after a backend's crash (the suite's own server only)."""
        if not target.started_here:
            raise UserError("the suite kills backends of its own PostgreSQL only, not of a "
                            "lent server")
        with target.connect() as conn:
            rows = conn.execute(_CLIENT_BACKENDS).fetchall()
        for (pid,) in rows:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # ended meanwhile
                pass
        return len(rows)

    def cache_reading(self, target: PgTarget, options: Mapping[str, str]) -> CacheReading | None:
        if not target.started_here:
            return None  # a server shared with others: its counters are not the suite's alone
        # A backend publishes its block counts at the end of a transaction, at most once a
        # second (PostgreSQL 15's shared statistics): a reading lags the last second or so.
        with target.connect() as conn:
            row = conn.execute(_CACHE_QUERY).fetchone()
        assert row is not None  # the database the connection is to has its row
        hits, reads, configured = row
        return CacheReading("PostgreSQL shared_buffers: pg_stat_database blks_hit / "
                            "blks_read", int(configured), hits=int(hits), misses=int(reads))


def driver_endpoint(target: PgTarget) -> tuple[str, int]:
    """(host, port) where a driver reaches the server: a proxy in front of it (via), else the
    server itself (its socket directory, or its address on a host of its own)."""
    return target.via or (target.host, target.port)


def client_keywords(target: PgTarget) -> dict[str, str]:
    """The libpq connection keywords a client (the DLZ driver: drivers/pg's pg_keys) reaches
    the database with."""
    host, port = driver_endpoint(target)
    args = {"host": host, "port": str(port), "dbname": target.dbname, "user": target.user}
    return {key: value for key, value in args.items() if value is not None}


def _version(conn: psycopg.Connection) -> str:
    number = conn.info.server_version  # e.g. 150018 for 15.18
    return f"PostgreSQL {number // 10000}.{number % 10000}"


def _make_path_traversable(path: Path) -> None:
    """Give others search (x) permission on every ancestor of `path` that lacks it.

    The server runs as the postgres user, which must be able to reach its data directory;
    search permission lets it pass through a directory without listing it.
    """
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            os.chmod(parent, stat.S_IMODE(mode) | stat.S_IXOTH)
