"""A private PostgreSQL 15 instance: its own data directory, socket directory and loopback port.

The instance is a scratch benchmark database: everything in it can be reloaded from the zone
model at any time, so it trades durability for load speed. It never touches the distribution's
clusters (/etc/postgresql, /var/lib/postgresql) or the standard port.

Every account needs a password (SCRAM), random per instance: the bootstrap superuser `dlz` is
the loaders', and the DLZ driver (or PowerDNS) reads as `dlz_reader`, a role that may only
SELECT from the loader's tables (PostgresDatabase asks the loader's schema to grant it), its
password handed to named in a password file of the servers' user (mode 0600), which named's
environment names (PGPASSFILE): never in named.conf or an environment. A DLZ driver that
takes RFC 2136 updates (update_zones) still reads as `dlz_reader`, and only its update
connection logs in as `dlz_writer` (drivers/pg: writer_user), made only then
(PostgresDatabase.writer_password), its password in the same file: the reader's rights, and
INSERT and DELETE where the update path writes (PgSchema.grant_write), limited by row-level
security to the rows of the update zones of the drivers given it on this server
(loaders/pg.py: limit_writes, PgServer.writable_zones). PowerDNS, which takes updates on the
connection it reads on, connects as `dlz_writer` throughout, without that row limit.
"""

from __future__ import annotations

import os
import secrets
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Protocol

import psycopg
from psycopg import sql

from base.errors import UserError
from base.netns import DatabaseHost
from base.process import ManagedProcess, free_port, write_private
from databases.database import (
    CacheReading,
    LentSchema,
    PrivateServer,
    Schema,
    SqlDatabase,
    lent_password_directory,
)
from databases.url import StoreUrl

# The versioned directory, not /usr/bin or /usr/local/bin: Debian's wrappers there pick a
# cluster from /etc/postgresql, and a fresh machine has no symlinks in /usr/local/bin.
PG_BIN = Path("/usr/lib/postgresql/15/bin")

# The role the DLZ driver (and PowerDNS's gpgsql) reads as on the suite's own server: LOGIN,
# a random password per instance, SELECT on the loader's tables only (PgSchema.grant_read).
READER_ROLE = "dlz_reader"
# The role a DLZ driver's update connection (PowerDNS's every connection, when it takes
# updates) logs in as: the reader's rights plus PgSchema.grant_write.
WRITER_ROLE = "dlz_writer"

# libpq's settings a --store-url may pass on (?sslmode=verify-full&sslrootcert=FILE), and the
# environment variable that gives each to libpq inside named (not a secret: the driver's
# conninfo keys are its own, drivers/pg's pg_keys). The suite's own connections take them too,
# so every client verifies the server (PowerDNS's stores use no lent server).
TLS_OPTIONS = {"sslmode": "PGSSLMODE", "sslrootcert": "PGSSLROOTCERT", "sslcrl": "PGSSLCRL",
               "channel_binding": "PGCHANNELBINDING"}
# Those naming a file, which named reads as the servers' user.
_TLS_FILES = ("sslrootcert", "sslcrl")
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")

# sun_path in struct sockaddr_un holds 108 bytes including the final NUL.
_MAX_SOCKET_PATH = 107

_START_TIMEOUT = 60.0


def _settings(port: int) -> str:
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
logging_collector = off
"""


_HBA = """\
# dlzbench: a password (SCRAM) on this instance's own socket and on 127.0.0.1, nothing else.
local all all scram-sha-256
host  all all 127.0.0.1/32 scram-sha-256
"""

# --- dlzbench: the database on its own host (base.netns) -----------------------------------
# samenet: the namespace's own subnets, i.e. its veth /30, where named connects from.
_HBA_DB_HOST = _HBA + "host  all all samenet scram-sha-256\n"


class PgServer(PrivateServer):
    """One private postmaster; `with PgServer(dir) as pg:` starts it and always stops it.

    Run as root, the server runs as the service user (base.process), which may have no search
    permission on the run directory's ancestors (a mkdtemp directory in /tmp). Rather than
    change any ancestor's mode, the suite opens the data and socket directories itself (the
    service user's, mode 0700) and hands the server these descriptors: it reaches them as
    /proc/self/fd/N, which needs no path to be searchable. The server chdirs into its data
    directory at start and works relative to it from then on.
    """

    dbname = "dlz"
    user = "dlz"  # the bootstrap superuser: the loaders'
    driver_user = READER_ROLE
    started_here = True
    # libpq TLS settings of every client (TLS_OPTIONS): none on loopback or a veth pair.
    tls: dict[str, str] = {}

    def __init__(self, run_dir: Path, *, db_host: DatabaseHost | None = None) -> None:
        """db_host: run inside that network namespace, reached over TCP at its address only."""
        self.run_dir = Path(run_dir).resolve()
        self.data_dir = self.run_dir / "data"
        self.db_host = db_host
        self.socket_dir = self.run_dir / "socket"
        self.host = db_host.address if db_host else str(self.socket_dir)
        self.port = free_port()
        self.log_path = self.run_dir / "postgres.log"
        # The superuser's password, kept (0600) beside the data for a later PgServer over the
        # same directory (`bench load --data`, then a command reading that data).
        self.password_file = self.run_dir / "superuser.password"
        self.password = (self.password_file.read_text().strip() if self.password_file.exists()
                         else secrets.token_hex(16))
        # The reader's: new for every PgServer, set at each start.
        self.reader_password = secrets.token_hex(16)
        # The writer's, set whenever a driver that takes updates asks for the role.
        self.writer_password = secrets.token_hex(16)
        # The zones (keys) whose rows the writer role may change (loaders/pg.py: limit_writes):
        # the update zones of every DLZ driver given the role on this server so far, since two
        # nameds over one store may take updates for different zones.
        self.writable_zones: set[str] = set()
        # Both, as libpq reads them from a password file (PGPASSFILE) in named or PowerDNS.
        self.passfile = self.run_dir / "drivers.pgpass"
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

    def _own_dirs(self) -> list[Path]:
        """The directories the server itself writes: data, and socket unless on a host of its
        own."""
        return [self.data_dir] if self.db_host else [self.data_dir, self.socket_dir]

    def _make_dirs(self) -> None:
        """The data and socket directories (mode 0700), which hand_over gives the service
        user with all else in the run directory (a data directory kept from a run by another
        user becomes its too)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for path in self._own_dirs():
            path.mkdir(mode=0o700, exist_ok=True)

    def _initdb(self) -> None:
        # The bootstrap superuser is dlz itself, with this instance's password; the reader
        # role is made at each start. C locale: byte-order comparison, which is what exact
        # key lookups want, and no dependency on the locales installed on the machine.
        write_private(self.password_file, self.password + "\n")
        # initdb reads the password from a file of the server's user (write_private's; it
        # reaches it, like the data directory, through a descriptor), removed once initdb is
        # done.
        pwfile = self.run_dir / "initdb.password"
        write_private(pwfile, self.password + "\n")
        try:
            with _descriptors([self.data_dir, pwfile]) as (data_fd, pw_fd):
                self.run_set_up([str(PG_BIN / "initdb"), "-D", _fd_path(data_fd), "-U",
                                 self.user, f"--pwfile={_fd_path(pw_fd)}",
                                 "--auth-local=scram-sha-256", "--auth-host=scram-sha-256",
                                 "--encoding=UTF8", "--locale=C", "--no-instructions"],
                                "initdb (PostgreSQL)", pass_fds=(data_fd, pw_fd))
        finally:
            pwfile.unlink(missing_ok=True)
        with open(self.data_dir / "postgresql.conf", "a") as conf:
            conf.write(_settings(self.port))
        (self.data_dir / "pg_hba.conf").write_text(_HBA)

    def _create_database(self) -> None:
        """Database dlz, readable only by the reader role besides the superuser, and that
        role with this PgServer's password (idempotent: it runs at every start)."""
        with psycopg.connect(self._conninfo("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (self.dbname,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.dbname)))
            # PUBLIC may connect to and make temporary tables in every new database: here
            # only the reader (and the superuser) may connect, and it makes nothing.
            conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(
                sql.Identifier(self.dbname)))
            self._login_role(conn, READER_ROLE, self.reader_password)

    def _login_role(self, conn: psycopg.Connection, role: str, password: str) -> None:
        """role, made or renewed with password, may connect to database dlz."""
        has_role = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                                (role,)).fetchone()
        verb = "ALTER" if has_role else "CREATE"
        conn.execute(sql.SQL(verb + " ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
                             "PASSWORD {}").format(sql.Identifier(role), sql.Literal(password)))
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(self.dbname), sql.Identifier(role)))

    def writer(self, grant: Callable[[psycopg.Connection, str], None]) -> str:
        """The writer role made (or renewed) with this PgServer's writer password and given
        its rights by grant(conn, role); its password (in the password file already)."""
        with psycopg.connect(self._conninfo(self.dbname), autocommit=True) as conn:
            self._login_role(conn, WRITER_ROLE, self.writer_password)
            grant(conn, WRITER_ROLE)
        return self.writer_password

    # --- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._proc is not None:
            return
        self._make_dirs()
        self.hand_over({self.passfile: pgpass({READER_ROLE: self.reader_password,
                                               WRITER_ROLE: self.writer_password})})
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        try:
            with _descriptors(self._own_dirs()) as fds:
                self._proc = self._process(fds)
                self._proc.start()
            self._proc.wait_ready(self._answers, _START_TIMEOUT)
            self._create_database()
        except BaseException:
            self.stop()
            raise

    def _process(self, fds: Sequence[int]) -> ManagedProcess:
        """The postmaster, reaching its data (and socket) directory through fds."""
        # The port is given here too, not only in postgresql.conf: an instance directory made
        # by an earlier PgServer object (`bench load`, then `bench startup`) gets this one's.
        argv = [str(PG_BIN / "postgres"), "-D", _fd_path(fds[0]), "-p", str(self.port)]
        if self.db_host:
            # Only the namespace's address; -k '' opens no unix socket, which any process on
            # this machine could reach through the file system, namespace or not.
            argv += ["-h", self.db_host.address, "-k", ""]
            (self.data_dir / "pg_hba.conf").write_text(_HBA_DB_HOST)
        else:
            argv += ["-k", _fd_path(fds[1])]
        return self.server_process("postgres", argv, pass_fds=fds)

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
        """The DNS server's environment besides its arguments: where libpq finds the driver
        roles' passwords (a 0600 file of the servers' user), never a password itself."""
        return {"PGPASSFILE": str(self.passfile)}

    @property
    def driver_password(self) -> str:
        return self.reader_password

    def _conninfo(self, dbname: str) -> str:
        return (f"host={self.host} port={self.port} dbname={dbname} user={self.user} "
                f"password={self.password}")

    def conninfo(self) -> str:
        """libpq key=value string for database dlz as the superuser, its password included:
        for this process's own clients (the loaders), never for a file or a message."""
        return self._conninfo(self.dbname)

    def connect(self) -> psycopg.Connection:
        """A new connection to database dlz as user dlz (the superuser), autocommit off."""
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
        self.driver_user = url.user
        # The URL's (or --store-password-file's), else the one libpq finds in this process the
        # standard way (PGPASSWORD, PGPASSFILE, ~/.pgpass), learnt at the first connection;
        # None: the server asks for none.
        self.driver_password = url.password
        # Every client's TLS settings (TLS_OPTIONS), from the URL.
        self.tls = dict(url.options)
        # named's environment: the TLS settings, and the password file
        # hand_password_to_servers writes, if any.
        self.env = {TLS_OPTIONS[key]: value for key, value in self.tls.items()}

    def connect(self) -> psycopg.Connection:
        """A new connection to the URL's database, autocommit off; UserError naming the URL
        (without its password) when the server cannot be reached or refuses."""
        args = {"host": self.host, "port": self.port, "dbname": self.dbname, "user": self.user,
                "password": self.driver_password, "connect_timeout": _CONNECT_TIMEOUT_S,
                **self.tls}
        try:
            conn = psycopg.connect(**{k: v for k, v in args.items() if v is not None},
                                   autocommit=False)
        except psycopg.Error as exc:
            raise self.url.error(f"cannot connect: {exc}") from None
        self.driver_password = self.driver_password or conn.info.password or None
        return conn

    def hand_password_to_servers(self, directory: Path) -> None:
        """The password, if the server asks for one, into a password file in directory (the
        servers' user's) that named's environment names: the servers run as another user,
        who can read neither this process's environment nor its user's ~/.pgpass."""
        if self.driver_password is None:
            return
        passfile = directory / "driver.pgpass"
        write_private(passfile, pgpass({self.user or "*": self.driver_password}))
        self.env = {**self.env, "PGPASSFILE": str(passfile)}

    def restart(self, *, cold: bool = False) -> None:
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


class PgSchema(Schema[psycopg.Connection], Protocol):
    """A loader's tables in PostgreSQL, which it also lets the driver's role read."""

    def grant_read(self, conn: psycopg.Connection, role: str) -> None:
        """Let role SELECT from the loader's tables, and do nothing else with them."""

    def grant_write(self, conn: psycopg.Connection, role: str) -> None:
        """Let role read as grant_read does, and change what RFC 2136 updates change."""


class PostgresDatabase(SqlDatabase[PgTarget, psycopg.Connection]):
    """A store's PostgreSQL database: a private PgServer holding the loader's `schema` from
    its start, readable by its reader role, or a lent server's database (--store-url) the
    loader claims with `lent`."""

    lent_schemes = ("postgresql", "postgres")
    kills_clients = True
    no_connection_end = None
    # PostgreSQL forks a backend per connection: under callgrind the postmaster starts (5 s
    # here) and its forked processes run under it too, but callgrind_control could not dump
    # a forked process (it did not answer within 120 s), so no window can be bracketed.
    not_profiled = "not counted: PostgreSQL's forked backends do not answer callgrind_control"

    def __init__(self, store: str, schema: PgSchema,
                 lent: LentSchema[psycopg.Connection] | None = None) -> None:
        super().__init__(store, schema, lent)
        self.schema: PgSchema = schema

    @contextmanager
    def server(self, run_dir: Path, *,
               db_host: DatabaseHost | None = None) -> Iterator[PgServer]:
        with PgServer(run_dir, db_host=db_host) as pg, self.connect(pg) as conn:
            self.schema.grant_read(conn, pg.driver_user)
            yield pg

    def check_options(self, url: StoreUrl) -> None:
        """libpq's TLS settings only (TLS_OPTIONS), a file they name readable by the servers'
        user (named verifies the server too)."""
        for key, value in url.options:
            if key == "require_auth":
                raise url.error("?require_auth= needs libpq 16; Debian 12's is 15: "
                                "?channel_binding=require (SCRAM, bound to the server's TLS "
                                "certificate) with ?sslmode=verify-full is its way")
            if key not in TLS_OPTIONS:
                raise url.error(f"?{key}= is not passed on: the pg store takes "
                                f"{', '.join(f'?{k}=' for k in TLS_OPTIONS)}")
            if key == "sslmode" and value not in _SSLMODES:
                raise url.error(f"?sslmode={value}: libpq takes {', '.join(_SSLMODES)}")
            if key in _TLS_FILES:
                self.check_file_option(url, key, value)

    def writer_password(self, target: PgTarget) -> str:
        """The writer role ready on the suite's own server (WRITER_ROLE); its password, which
        a driver finds in the target's password file (env). A lent server's roles are its
        owner's."""
        if not isinstance(target, PgServer):
            raise UserError(f"the {self.store} store takes updates through its DLZ driver on "
                            "the suite's own PostgreSQL only (not with --store-url)")
        return target.writer(self.schema.grant_write)

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
        with lent_password_directory(self.store) as directory:
            target.hand_password_to_servers(directory)
            yield target

    @contextmanager
    def round_trips(self, target: PgTarget) -> Iterator[Callable[[], object]]:
        password = target.driver_password  # what the driver finds in its password file
        with psycopg.connect(**client_keywords(target), **target.tls, autocommit=True,
                             **({"password": password} if password is not None else {})
                             ) as conn:
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

    def end_connection(self, target: PgTarget, connection: int) -> None:
        """pg_terminate_backend of the client backend whose pid is `connection`: that
        backend alone ends (SIGTERM), the postmaster and every other backend go on."""
        ended = self._admin(target, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                    "WHERE pid = %s AND backend_type = 'client backend'",
                            (connection,))
        if ended != [(True,)]:
            raise UserError(f"PostgreSQL has no client backend {connection} to end")

    def reader_connections(self, target: PgTarget) -> int:
        rows = self._admin(target, "SELECT count(*) FROM pg_stat_activity WHERE usename = %s",
                           (target.driver_user,))
        return int(rows[0][0])

    def cap_reader(self, target: PgTarget, limit: int | None) -> None:
        # The role's CONNECTION LIMIT, checked as a session starts (-1: none).
        self._admin(target, sql.SQL("ALTER ROLE {} CONNECTION LIMIT {}").format(
            sql.Identifier(target.driver_user), sql.Literal(-1 if limit is None else limit)))

    def _admin(self, target: PgTarget, statement: str | sql.Composed,
               params: tuple[object, ...] = ()) -> list[tuple]:
        """One statement as the suite's superuser on its own server; its rows."""
        if not target.started_here:
            raise UserError("the suite ends and holds back connections of its own PostgreSQL "
                            "only, not of a lent server")
        with target.connect() as conn:
            conn.autocommit = True
            cursor = conn.execute(statement, params or None)
            return cursor.fetchall() if cursor.description else []

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
    """The libpq connection keywords a client (the DLZ driver: drivers/pg's pg_args) reaches
    the database with; its password is in the file the target's env names, not here."""
    host, port = driver_endpoint(target)
    args = {"host": host, "port": str(port), "dbname": target.dbname,
            "user": target.driver_user}
    return {key: value for key, value in args.items() if value is not None}


def pgpass(passwords: Mapping[str, str]) -> str:
    """A libpq password file's text (written 0600, the servers' user's) giving each role
    (`*`: any) its password on any host, port and database; `:` and `\\` escaped as libpq
    reads them."""
    def field(text: str) -> str:
        return text.replace("\\", "\\\\").replace(":", "\\:")
    return "".join(f"*:*:*:{field(role)}:{field(password)}\n"
                   for role, password in passwords.items())


def _version(conn: psycopg.Connection) -> str:
    number = conn.info.server_version  # e.g. 150018 for 15.18
    return f"PostgreSQL {number // 10000}.{number % 10000}"


def _fd_path(fd: int) -> str:
    """The path a process holding fd reaches its file or directory by (see PgServer)."""
    return f"/proc/self/fd/{fd}"


@contextmanager
def _descriptors(paths: Sequence[Path]) -> Iterator[list[int]]:
    """Read-only descriptors of paths (directories or files), closed at the end: the child
    that needs them has its own copies by then."""
    with ExitStack() as stack:
        fds = []
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            stack.callback(os.close, fd)
            fds.append(fd)
        yield fds
