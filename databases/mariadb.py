"""A private MariaDB 10.11 instance: its own data directory, socket and loopback port.

Both mariadb-install-db and mariadbd run with --no-defaults, so nothing in /etc/mysql (the
distribution's instance, its socket, its port) has any say. The instance is a scratch
benchmark database whose data is reloaded from the zone model whenever needed.

Its accounts: root over the unix socket only (the suite's own process, unix_socket
authentication), `dlz` for the loaders (every privilege on database dlz) and `dlz_reader` for
the DLZ driver and PowerDNS (SELECT on database dlz only), each with a random password per
MysqlServer; the reader's reaches the driver inside named in a 0600 file of the servers' user
that named.conf names (password_file=), never in named.conf or named's environment. When a
DLZ driver is to take RFC 2136 updates, a fourth, `dlz_writer`, is made (writer_account): it
may read the zones and read, add and delete records, and nothing else; its password reaches
the driver the same way (writer_password_file=), which connects as it for updates only. The
records it may add and delete are those of the update zones of the drivers given it on this
server, which triggers check row by row (loaders/mysql.py: limit_writes,
MysqlServer.writable_zones).
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import MySQLdb
import MySQLdb.cursors

from base.errors import UserError
from base.netns import DatabaseHost
from base.process import ManagedProcess, free_port, write_private
from databases.database import (
    CacheReading,
    PrivateServer,
    SqlDatabase,
    lent_password_directory,
)
from databases.url import StoreUrl

MARIADBD = "/usr/sbin/mariadbd"
INSTALL_DB = "/usr/bin/mariadb-install-db"
# MariaDB's own reader of option files (/etc/my.cnf, /etc/mysql/my.cnf, ~/.my.cnf).
PRINT_DEFAULTS = "/usr/bin/my_print_defaults"
# The option groups a MariaDB client reads its connection settings from.
_CLIENT_GROUPS = ("client", "client-mariadb")

# The account the DLZ driver (and PowerDNS's gmysql) reads as on the suite's own server.
READER_USER = "dlz_reader"
# The account the DLZ driver writes RFC 2136 updates as, made only for a driver that takes
# them (drivers/mysql: writer_user, writer_password_file).
WRITER_USER = "dlz_writer"
# What an update does (drivers/mysql/dlz_mysql.c, "writing"): read a zone's id (LOCK IN SHARE
# MODE), insert and delete record rows, and read them within its transaction.
_WRITER_GRANTS = ("GRANT SELECT ON `{db}`.`zones` TO {account}",
                  "GRANT SELECT, INSERT, DELETE ON `{db}`.`records` TO {account}")

# The one ?setting a lent server's URL may give: the CA file that verifies its certificate
# (TLS then demanded; drivers/mysql: tls_ca=).
TLS_CA = "tls_ca"

# sun_path in struct sockaddr_un holds 108 bytes including the final NUL.
_MAX_SOCKET_PATH = 107

_START_TIMEOUT = 120.0
# Under Valgrind (run_under), InnoDB cannot reserve its default 8 TiB of address space for
# the buffer pool ("Cannot map innodb_buffer_pool_size_max") and hangs at start-up in native
# AIO: a pool that cannot grow, and InnoDB's own I/O threads (measured with Valgrind 3.19).
_WRAPPED_OPTIONS = ("--innodb-buffer-pool-size-max=256M", "--innodb-use-native-aio=0")


class MysqlServer(PrivateServer):
    """One private mariadbd; `with MysqlServer(dir) as db:` starts it and always stops it."""

    database = "dlz"
    user = "dlz"  # the loaders'
    driver_user = READER_USER
    started_here = True
    # The CA file every client verifies the server with (a lent server's ?tls_ca=): none here.
    tls_ca: str | None = None

    def __init__(self, run_dir: Path, *, db_host: DatabaseHost | None = None) -> None:
        """db_host: run inside that network namespace, reached over TCP at its address only."""
        self.run_dir = Path(run_dir).resolve()
        self.data_dir = self.run_dir / "data"
        self.db_host = db_host
        # New for every MysqlServer and set at each start (a data directory made by an earlier
        # one gets these): nothing needs them after this object is gone.
        self.password = secrets.token_hex(16)
        self.reader_password = secrets.token_hex(16)
        self.writer_password = secrets.token_hex(16)
        # Where the driver reads the reader's and the writer's (0600, the servers' user's).
        self.password_file = self.run_dir / "reader.password"
        self.writer_password_file = self.run_dir / "writer.password"
        self._writer_made = False
        # The zones (keys) whose records the writer account may change (loaders/mysql.py:
        # limit_writes): the update zones of every DLZ driver given the account on this server
        # so far, since two nameds over one store may take updates for different zones.
        self.writable_zones: set[str] = set()
        self.socket = str(self.run_dir / "mariadb.sock")
        # TCP address clients use when the server is on its own host (None: the unix socket).
        self.host: str | None = None
        self.port = free_port()
        self.log_path = self.run_dir / "mariadb.log"
        # A TCP endpoint in front of the server (a latency proxy) that the DLZ driver is to
        # use instead of reaching the server directly; loaders always go direct.
        self.via: tuple[str, int] | None = None
        self._proc: ManagedProcess | None = None
        if db_host:
            # mariadbd always opens a unix socket; an abstract one ("@name") belongs to the
            # network namespace, so no process outside it can connect to it.
            self.socket = f"@{db_host.name}-mariadb"
            self.host = db_host.address
        elif len(self.socket) > _MAX_SOCKET_PATH:
            raise UserError(f"run directory {self.run_dir} is too deep for a unix socket "
                            f"({self.socket} is longer than {_MAX_SOCKET_PATH} bytes)")

    def _server_argv(self) -> list[str]:
        return [
            MARIADBD, "--no-defaults",
            f"--datadir={self.data_dir}", f"--socket={self.socket}", f"--port={self.port}",
            f"--pid-file={self.run_dir / 'mariadb.pid'}", f"--tmpdir={self.run_dir / 'tmp'}",
            # No --user: mariadbd is started as the service user (base.process) rather than
            # as root dropping to it, so no part of it ever runs as root.
            "--bind-address=127.0.0.1", "--skip-name-resolve",
            # No client of the suite sends a file (loaders/mysql.py loads with INSERTs).
            "--local-infile=0",
            # named opens one connection per worker thread and per zone-transfer client.
            "--max-connections=600",
            # Exact, byte-wise key comparison unless a schema asks for something else.
            "--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin",
            # Scratch benchmark instance: durability traded for load speed, and every start
            # is a cold start (no buffer pool dump carried over from the previous run).
            "--innodb-flush-log-at-trx-commit=2", "--innodb-buffer-pool-size=256M",
            "--innodb-buffer-pool-dump-at-shutdown=0", "--innodb-buffer-pool-load-at-startup=0",
            "--skip-log-bin",
        ]

    # --- the database on its own host (base.netns) -------------------------------------------

    def _db_host_argv(self, argv: list[str]) -> list[str]:
        """argv for the namespace: listening on its address, creating its accounts at
        start."""
        assert self.db_host is not None
        init_file = self.run_dir / "init.sql"
        # Clients come from this host's end of the veth pair, and a latency proxy on the
        # database's host (base/latency_proxy.py) from the namespace's own address.
        clients = [self.db_host.peer_address, self.db_host.address]
        write_private(init_file, ";\n".join(self._user_statements(clients)) + ";\n")
        argv = [arg for arg in argv if not arg.startswith("--bind-address=")]
        return [*argv, f"--bind-address={self.db_host.address}", f"--init-file={init_file}"]

    def _install_db(self) -> None:
        # As the server's user, whose data directory it makes. root@localhost authenticates
        # by unix user (the suite's own process, root); the second such account install-db
        # makes (--auth-root-socket-user, by default the invoking user) is root too, so the
        # service user, whom named runs as, gets no account without a password.
        # Its own --tmpdir (passed on to the bootstrap server): in the shared /tmp, a CI run
        # lost the bootstrap's temporary table (ERROR 1051 Unknown table 'mysql.tmp_user_sys').
        self.run_set_up([INSTALL_DB, "--no-defaults", f"--datadir={self.data_dir}",
                         "--skip-test-db", "--auth-root-authentication-method=socket",
                         "--auth-root-socket-user=root", f"--tmpdir={self.run_dir / 'tmp'}"],
                        "mariadb-install-db")

    def _create_user(self) -> None:
        """Database dlz and its two accounts (idempotent, so it simply runs at every start)."""
        conn = self._root_connection()
        try:
            cursor = conn.cursor()
            for sql in self._user_statements(self.client_hosts):
                cursor.execute(sql)
        finally:
            conn.close()

    @property
    def client_hosts(self) -> list[str]:
        """The hosts each account is made for: where its clients connect from."""
        return [self.db_host.peer_address] if self.db_host else ["localhost", "127.0.0.1"]

    def _user_statements(self, client_hosts: list[str]) -> list[str]:
        statements = [f"CREATE DATABASE IF NOT EXISTS `{self.database}`"]
        accounts = ((self.user, self.password, "ALL PRIVILEGES"),
                    (self.driver_user, self.reader_password, "SELECT"))
        for host in client_hosts:
            for user, password, privileges in accounts:
                account = f"'{user}'@'{host}'"
                statements += [
                    f"CREATE USER IF NOT EXISTS {account}",
                    f"ALTER USER {account} IDENTIFIED BY '{password}'",
                    f"GRANT {privileges} ON `{self.database}`.* TO {account}",
                ]
        return statements

    def writer_account(self) -> tuple[str, Path]:
        """The account a DLZ driver writes updates as, made now if it is not there yet (the
        schema's tables must exist: its privileges are on them), and the file that hands the
        driver its password."""
        if self.db_host:
            # There the accounts come from the init file at start, and user dlz may not
            # create another.
            raise UserError("RFC 2136 updates into MariaDB on a host of its own are not "
                            "supported")
        if not self._writer_made:
            self.make_account(WRITER_USER, self.writer_password, _WRITER_GRANTS)
            self._writer_made = True
        return WRITER_USER, self.writer_password_file

    def make_account(self, user: str, password: str, grants: Sequence[str]) -> None:
        """user made (or renewed) with password, over the socket and loopback TCP, and given
        `grants` (GRANT statements naming {db} and {account}); by admin_connection's account
        (the loaders' may not make accounts)."""
        conn = self.admin_connection()
        try:
            cursor = conn.cursor()
            for host in ("localhost", "127.0.0.1"):
                account = f"'{user}'@'{host}'"
                cursor.execute(f"CREATE USER IF NOT EXISTS {account}")
                cursor.execute(f"ALTER USER {account} IDENTIFIED BY %s", (password,))
                for grant in grants:
                    cursor.execute(grant.format(db=self.database, account=account))
            conn.commit()
        finally:
            conn.close()

    def admin_connection(self) -> MySQLdb.Connection:
        """A connection that sees and may end every client's: root over the socket (on a host
        of its own, the server has user dlz only, whose own connections are the clients)."""
        return self.connect() if self.db_host else self._root_connection()

    def _root_connection(self) -> MySQLdb.Connection:
        # install-db gave root@localhost unix_socket authentication; this process is root.
        return MySQLdb.connect(unix_socket=self.socket, user="root", connect_timeout=2)

    # --- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._proc is not None:
            return
        # The run directory (data, pid file, socket, tmp) is the server's to write in.
        (self.run_dir / "tmp").mkdir(parents=True, exist_ok=True)
        self.hand_over({self.password_file: self.reader_password + "\n",
                        self.writer_password_file: self.writer_password + "\n"})
        if not (self.data_dir / "mysql").is_dir():
            self._install_db()
        # No --log-error: mariadbd then logs to stderr, which goes to our log file.
        argv = [*self.wrapper, *self._server_argv(), *(_WRAPPED_OPTIONS if self.wrapper else ())]
        if self.db_host:
            argv = self._db_host_argv(argv)
        proc = self.server_process("mariadbd", argv)
        self._proc = proc
        try:
            proc.start()
            proc.wait_ready(self._answers, _START_TIMEOUT)
            if not self.db_host:  # there the init file made the user
                self._create_user()
        except BaseException:
            self.stop()
            raise

    def _answers(self) -> bool:
        try:
            (self.connect(connect_timeout=2) if self.db_host else self._root_connection()).close()
        except MySQLdb.OperationalError:
            return False
        return True

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.stop(timeout=60)  # SIGTERM: InnoDB shuts down cleanly

    # --- clients ------------------------------------------------------------------------------

    def connect(self, **kw: Any) -> MySQLdb.Connection:
        """A new connection as user dlz to database dlz over the socket (or TCP to db_host's
        address); kw overrides."""
        where: dict[str, Any] = ({"host": self.host, "port": self.port} if self.host
                                 else {"unix_socket": self.socket})
        # local_infile off: the client sends no local file, whatever a server asks for.
        args: dict[str, Any] = {**where, "user": self.user,
                                "password": self.password, "database": self.database,
                                "local_infile": 0, "charset": "utf8mb4"}
        args.update(kw)
        return MySQLdb.connect(**args)

    # The DNS server's environment besides its arguments: nothing (the driver's passwords
    # are in files named.conf names, PowerDNS's in pdns.conf).
    env: dict[str, str] = {}

    @property
    def driver_password(self) -> str:
        return self.reader_password

    def pids(self) -> list[int]:
        return self._proc.pids() if self._proc is not None else []

    def version(self) -> str:
        return server_version(self.connect())


def server_version(conn: MySQLdb.Connection) -> str:
    """The server's product and version ("10.11.14-MariaDB-0+deb12u2" -> "MariaDB 10.11.14");
    closes conn."""
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT VERSION()")
        (text,) = cursor.fetchone()
    finally:
        conn.close()
    return f"{'MariaDB' if 'MariaDB' in text else 'MySQL'} {text.split('-')[0]}"


class ExternalMysql:
    """A MariaDB (or MySQL) server the suite did not start (--store-url): the same fields the
    store reads from a MysqlServer, but nothing to start, restart or stop, and no process of
    ours."""

    started_here = False
    socket: str | None = None
    via: tuple[str, int] | None = None
    _DEFAULT_PORT = 3306

    def __init__(self, url: StoreUrl) -> None:
        self.url = url
        # ?tls_ca=FILE: every connection, the suite's and the driver's (tls_ca=), demands TLS
        # and verifies the server's certificate, host name included, against that CA.
        self.tls_ca = dict(url.options).get(TLS_CA)
        self.host: str | None = url.host
        self.port = url.port or self._DEFAULT_PORT
        self.database = url.database
        # The URL's (or --store-password-file's), else MYSQL_PWD, else the option files'
        # [client] (~/.my.cnf): found here once, then handed to the driver in a file
        # (hand_password_to_servers; the driver reads no option file: one could undo the
        # settings it makes, such as LOAD DATA LOCAL off).
        options = client_option_files() if url.password is None else {}
        self.user = url.user or options.get("user")
        self.driver_user = self.user
        self.driver_password = (url.password if url.password is not None
                                else os.environ.get("MYSQL_PWD", options.get("password")))
        self.env: dict[str, str] = {}
        # The file hand_password_to_servers writes (None: none yet, or no password).
        self.password_file: Path | None = None

    def hand_password_to_servers(self, directory: Path) -> None:
        """The password, if any, into a 0600 file in directory (the servers' user's) for the
        driver inside named (password_file=): the servers run as another user, who can read
        neither this process's environment nor its user's option files."""
        if self.driver_password is None:
            return
        self.password_file = directory / "driver.password"
        write_private(self.password_file, self.driver_password + "\n")

    def connect(self, **kw: Any) -> MySQLdb.Connection:
        """A new connection to the URL's database; UserError naming the URL (without its
        password) when the server cannot be reached or refuses; kw overrides."""
        # local_infile off: a server (this one is not ours) that answers a statement with a
        # request for a local file gets none.
        args: dict[str, Any] = {"host": self.host, "port": self.port, "user": self.user,
                                "password": self.driver_password, "database": self.database,
                                "charset": "utf8mb4", "connect_timeout": _CONNECT_TIMEOUT_S,
                                "local_infile": 0}
        if self.tls_ca is not None:
            args.update(ssl={"ca": self.tls_ca}, ssl_mode="VERIFY_IDENTITY")
        args.update(kw)
        try:
            return MySQLdb.connect(**{k: v for k, v in args.items() if v is not None})
        except MySQLdb.Error as exc:
            raise self.url.error(f"cannot connect: {_message(exc)}") from None

    def writer_account(self) -> tuple[str | None, Path | None]:
        """The URL's account writes updates too (the suite makes no account on a server it
        was lent), with the same password file."""
        return self.user, self.password_file

    def restart(self, *, cold: bool = False) -> None:
        """Nothing: the suite restarts no server it did not start (its caches stay warm)."""

    def pids(self) -> list[int]:
        return []

    def version(self) -> str:
        return server_version(self.connect())


_CONNECT_TIMEOUT_S = 10

# What the store reads and writes: the suite's own server or one it was lent.
MysqlTarget = MysqlServer | ExternalMysql


class MariadbDatabase(SqlDatabase[MysqlTarget, MySQLdb.Connection]):
    """A store's MariaDB database: a private MysqlServer holding the loader's `schema` from
    its start, or a lent server's database (--store-url) the loader claims with `lent`."""

    lent_schemes = ("mysql", "mariadb")
    kills_clients = True
    no_connection_end = None
    profiled_program = "mariadbd"

    def check_options(self, url: StoreUrl) -> None:
        """?tls_ca=FILE only: absolute, and readable by the servers' user (the driver inside
        named reads it)."""
        for key, value in url.options:
            if key != TLS_CA:
                raise url.error(f"?{key}= is not passed on: the {self.store} store takes "
                                f"?{TLS_CA}=FILE (TLS demanded, the server's certificate "
                                "verified against that CA)")
            self.check_file_option(url, key, value)

    @contextmanager
    def server(self, run_dir: Path, *,
               db_host: DatabaseHost | None = None) -> Iterator[MysqlServer]:
        with MysqlServer(run_dir, db_host=db_host) as db:
            self.connect(db).close()
            yield db

    def open(self, target: MysqlTarget) -> MySQLdb.Connection:
        """Autocommit off, local files never sent (local_infile off)."""
        return target.connect()

    def check_external(self, url: StoreUrl, *, overwrite: bool) -> str:
        lent = self.claim(url)
        target = ExternalMysql(url)
        conn = target.connect()
        try:
            lent.check_lent(conn, url, overwrite=overwrite)
        except MySQLdb.Error as exc:
            raise url.error(f"cannot read the database's objects: {exc.args[-1]}") from None
        finally:
            conn.close()
        return target.version()

    @contextmanager
    def external(self, url: StoreUrl, *, overwrite: bool) -> Iterator[MysqlTarget]:
        lent = self.claim(url)
        target = ExternalMysql(url)
        conn = target.connect()
        try:
            lent.check_lent(conn, url, overwrite=overwrite)
            lent.hold_empty(conn, url)
        except MySQLdb.Error as exc:  # e.g. no CREATE privilege
            raise url.error(f"cannot create the suite's tables: {exc.args[-1]}") from None
        finally:
            conn.close()
        with lent_password_directory(self.store) as directory:
            target.hand_password_to_servers(directory)
            yield target

    @contextmanager
    def round_trips(self, target: MysqlTarget) -> Iterator[Callable[[], object]]:
        where = {"unix_socket" if k == "socket" else k: v
                 for k, v in driver_endpoint(target).items()}
        conn = target.connect(**where)
        try:
            cursor = conn.cursor()
            yield lambda: (cursor.execute("SELECT 1"), cursor.fetchall())
        finally:
            conn.close()

    def tcp_endpoint(self, target: MysqlTarget) -> tuple[str, int]:
        # Locally mariadbd listens on 127.0.0.1 beside its socket.
        return (target.host or "127.0.0.1", target.port)

    def kill_clients(self, target: MysqlTarget) -> int:
        """KILL every client connection but this one (the suite's own server only)."""
        if not isinstance(target, MysqlServer):
            raise UserError("the suite ends connections of its own MariaDB only, not of a lent "
                            "server")
        conn = target.admin_connection()
        try:
            cursor = conn.cursor()
            cursor.execute("SELECT id FROM information_schema.processlist "
                           "WHERE id <> CONNECTION_ID() AND command <> 'Daemon'")
            ids = [row[0] for row in cursor.fetchall()]
            for thread in ids:
                with suppress(MySQLdb.OperationalError):  # gone meanwhile: unknown thread
                    cursor.execute(f"KILL {int(thread)}")
        finally:
            conn.close()
        return len(ids)

    def end_connection(self, target: MysqlTarget, connection: int) -> None:
        """KILL CONNECTION of the client connection whose id is `connection`."""
        try:
            self._admin(target, f"KILL CONNECTION {int(connection)}")
        except MySQLdb.OperationalError as exc:  # unknown thread id
            raise UserError(f"MariaDB has no connection {connection} to end: "
                            f"{_message(exc)}") from None

    def reader_connections(self, target: MysqlTarget) -> int:
        rows = self._admin(target, "SELECT COUNT(*) FROM information_schema.processlist "
                                   f"WHERE user = '{target.driver_user}'")
        return int(rows[0][0])

    def cap_reader(self, target: MysqlTarget, limit: int | None) -> None:
        # MAX_USER_CONNECTIONS, checked as a connection is made; 0 is MariaDB's "no limit".
        if limit is not None and limit < 1:
            raise UserError("MariaDB cannot hold an account at no connection "
                            "(MAX_USER_CONNECTIONS 0 is no limit)")
        assert isinstance(target, MysqlServer)  # _admin refused a lent server's first
        for host in target.client_hosts:
            self._admin(target, f"ALTER USER '{target.driver_user}'@'{host}' WITH "
                                f"MAX_USER_CONNECTIONS {0 if limit is None else limit}")

    def _admin(self, target: MysqlTarget, statement: str) -> list[tuple[Any, ...]]:
        """One statement on a connection that sees and may end every client's; its rows."""
        if not isinstance(target, MysqlServer):
            raise UserError("the suite ends and holds back connections of its own MariaDB "
                            "only, not of a lent server")
        conn = target.admin_connection()
        try:
            cursor = conn.cursor()
            cursor.execute(statement)
            return list(cursor.fetchall() or ())
        finally:
            conn.close()

    def cache_reading(self, target: MysqlTarget, options: Mapping[str, str]
                      ) -> CacheReading | None:
        if not target.started_here:
            return None  # a server shared with others: its counters are not the suite's alone
        conn = target.connect()
        try:
            cursor = conn.cursor()
            cursor.execute("SHOW GLOBAL STATUS WHERE Variable_name IN "
                           "('Innodb_buffer_pool_read_requests', 'Innodb_buffer_pool_reads')")
            status = {name: int(value) for name, value in cursor.fetchall()}
            cursor.execute("SELECT @@innodb_buffer_pool_size")
            (configured,) = cursor.fetchone()
        finally:
            conn.close()
        # read_requests are every logical page read; reads, those the pool did not hold.
        requests = status["Innodb_buffer_pool_read_requests"]
        misses = status["Innodb_buffer_pool_reads"]
        return CacheReading("InnoDB buffer pool: Innodb_buffer_pool_read_requests / "
                            "Innodb_buffer_pool_reads", int(configured),
                            hits=requests - misses, misses=misses)


def streamed_rows(conn: MySQLdb.Connection, query: str,
                  params: tuple[object, ...] | None = None) -> Iterator[tuple[Any, ...]]:
    """The query's rows as the server sends them (an unbuffered cursor: a million zones never
    sit in memory at once); conn is closed at the end."""
    try:
        cursor = conn.cursor(MySQLdb.cursors.SSCursor)
        cursor.execute(query, params)
        yield from cursor
    finally:
        conn.close()


def driver_endpoint(target: MysqlTarget) -> dict[str, str | int]:
    """Where a driver (a DLZ driver, PowerDNS's gmysql) reaches the server: a proxy in front
    of it, its TCP address on a host of its own, or its unix socket."""
    if target.via is not None:
        return {"host": target.via[0], "port": target.via[1]}
    if target.host is not None:
        return {"host": target.host, "port": target.port}
    return {"socket": str(target.socket)}


@contextmanager
def transaction(conn: MySQLdb.Connection) -> Iterator[None]:
    """The block's writes as one transaction: committed at its end; a failure rolls back, so a
    reader sees each zone old or new and a failed batch leaves its zones as they were."""
    try:
        yield
    except BaseException:
        # Ctrl-C in the middle of a result leaves the connection out of sync ("Commands out of
        # sync"), so ROLLBACK cannot be sent; the connection's close, which the loader does
        # next, ends the transaction uncommitted just the same, and the first error is the one
        # to say.
        with suppress(MySQLdb.Error):
            conn.rollback()
        raise
    conn.commit()


def client_option_files() -> dict[str, str]:
    """user and password of the option files' client groups as MariaDB's own tool reads them
    (the last one given wins, as in a client); nothing when none is set or the tool is
    missing. Its output holds the password: it is parsed here and never shown."""
    try:
        done = subprocess.run([PRINT_DEFAULTS, *_CLIENT_GROUPS], capture_output=True,
                              text=True, timeout=20, check=False)
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, sep, value = line.removeprefix("--").partition("=")
        if sep and key in ("user", "password"):
            found[key] = value
    return found


def _message(exc: MySQLdb.Error) -> str:
    """The server's or client library's text of an error ((code, text) in args)."""
    return str(exc.args[-1]) if exc.args else str(exc)
