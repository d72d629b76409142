"""The MariaDB clients of the suite against a server that is not to be trusted, and the MySQL
driver's server-side statement limit.

  - the mysql store loads with multi-row INSERTs: into a server lent by --store-url that would
    take LOAD DATA LOCAL (local_infile on), `verify --coverage` answers as native BIND;
  - the loader's connections, to the private server and to a lent one, send no local file: a
    LOAD DATA LOCAL INFILE fails on them where a connection offering files succeeds;
  - a hostile server that answers a statement with a request for a local file (what LOAD DATA
    LOCAL lets a server do) gets nothing from the store's client; the same request to a client
    with local_infile on gets the file, so the test can see a leak;
  - the driver's sessions run with max_statement_time from query_timeout_ms: the SET is in the
    server's general log, and a fetch held up by a table lock is ended by the server
    (ER_STATEMENT_TIMEOUT) before the client's own read time-out.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import dns.name
import dns.rcode
import MySQLdb
import pytest

from base.errors import UserError
from base.process import free_port
from bench.measure.serving import loaded_store
from databases.mariadb import ExternalMysql, MysqlServer
from databases.store_urls import parse_store_url
from loaders import get_database
from loaders import mysql as mysql_store
from servers import get_server, store_names
from servers.dlz import DlzNamed
from servers.named import Named
from tests.benchcli import run_bench
from zonedata.model import Zone, make_record

USER = "ext"
PASSWORD = "Pw-m4Lq2Ts8"
ORIGIN = dns.name.from_text("client.test.")
# A MariaDB error code: the server ended a statement at max_statement_time.
ER_STATEMENT_TIMEOUT = 1969

pytestmark = pytest.mark.skipif(not get_server("mysql").is_built(),
                                reason="the MySQL driver is not built")


def _root(db: MysqlServer) -> MySQLdb.Connection:
    return MySQLdb.connect(unix_socket=db.socket, user="root")


@pytest.fixture(scope="module")
def lent(run_dir: Path) -> Iterator[MysqlServer]:
    """A MariaDB server as an operator may lend it: an account with a password on TCP, a
    database of its own, and LOAD DATA LOCAL allowed (local_infile on)."""
    with MysqlServer(run_dir / "lent-mysql") as db:
        conn = _root(db)
        try:
            cursor = conn.cursor()
            cursor.execute(f"CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'")
            cursor.execute("CREATE DATABASE own")
            cursor.execute(f"GRANT ALL ON own.* TO '{USER}'@'127.0.0.1'")
            cursor.execute("SET GLOBAL local_infile = 1")
        finally:
            conn.close()
        yield db


def _url(port: int) -> str:
    return f"mysql://{USER}:{PASSWORD}@127.0.0.1:{port}/own"


def _external(port: int) -> ExternalMysql:
    return ExternalMysql(parse_store_url(f"mysql={_url(port)}", get_database, store_names()))


def test_lent_server_loads_without_local_files_and_answers_as_native(lent: MysqlServer,
                                                                      run_root: Path) -> None:
    done = run_bench(run_root, "verify", "--coverage", "--servers", "mysql",
                     "--store-url", f"mysql={_url(lent.port)}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^mysql: \d+/\d+ identical", done.stdout, re.MULTILINE), done.stdout
    assert "UNEXPLAINED DIFFERENCES" not in done.stdout
    conn = _root(lent)
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT COUNT(*) FROM own.records")
        (rows,) = cursor.fetchone()
    finally:
        conn.close()
    assert rows > 0


def _try_load_data_local(conn: MySQLdb.Connection, source: Path) -> int | None:
    """Rows LOAD DATA LOCAL INFILE stored from source into a table made for it (and dropped:
    the lent database holds only the suite's tables); None if it failed."""
    cursor = conn.cursor()
    cursor.execute("CREATE TABLE offered (v VARCHAR(40))")
    try:
        cursor.execute(f"LOAD DATA LOCAL INFILE '{source}' INTO TABLE offered")
        return cursor.rowcount
    except MySQLdb.Error:
        return None
    finally:
        cursor.execute("DROP TABLE offered")


def test_loader_connections_send_no_local_file(lent: MysqlServer, tmp_path: Path) -> None:
    source = tmp_path / "rows.txt"
    source.write_text("one\ntwo\n")
    target = _external(lent.port)
    offering = target.connect(local_infile=1)
    try:
        # The server takes a file from a client that offers one: a refusal below is the client's.
        assert _try_load_data_local(offering, source) == 2
    finally:
        offering.close()
    for conn in (mysql_store.LOADER.database.open(target), lent.connect()):
        try:
            assert _try_load_data_local(conn, source) is None
        finally:
            conn.close()


# --- a hostile server --------------------------------------------------------------------------

# Client capabilities the hostile server offers: long password, connect with a database,
# LOCAL files, protocol 4.1, transactions, secure connection, multi results, plugin auth.
_CAPABILITIES = 0x1 | 0x8 | 0x80 | 0x200 | 0x2000 | 0x8000 | 0x20000 | 0x80000


class HostileServer:
    """Speaks just enough of the MySQL protocol to let a client in (any password) and to answer
    every statement but SET with a request for `wanted` (0xFB and the file's name), as a server
    named by --store-url could; it keeps whatever a client sends back."""

    def __init__(self, wanted: Path) -> None:
        self.wanted = wanted
        self.port = free_port()
        self.requests = 0
        self.received = bytearray()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with conn, suppress(OSError, EOFError):
                conn.settimeout(5)
                self._session(conn)

    def _session(self, conn: socket.socket) -> None:
        _send(conn, 0, _handshake())
        seq, _ = _receive(conn)  # the client's credentials: welcome whatever they are
        _send(conn, seq + 1, _OK)
        while True:
            seq, command = _receive(conn)
            if command[:1] != b"\x03":  # anything but COM_QUERY (COM_QUIT): done
                return
            if command[1:].lstrip().upper().startswith(b"SET"):
                _send(conn, seq + 1, _OK)
                continue
            self.requests += 1
            _send(conn, seq + 1, b"\xfb" + str(self.wanted).encode())
            seq += 1
            while True:  # the file's content, ended by an empty packet
                seq, content = _receive(conn)
                if not content:
                    break
                self.received += content
            _send(conn, seq + 1, _OK)


_OK = b"\x00\x00\x00\x02\x00\x00\x00"


def _handshake() -> bytes:
    scramble = b"abcdefghijklmnopqrst"
    return (b"\x0a" + b"5.5.5-10.11.0-hostile\x00" + struct.pack("<I", 7) + scramble[:8]
            + b"\x00" + struct.pack("<H", _CAPABILITIES & 0xFFFF) + b"\x21"
            + struct.pack("<H", 2) + struct.pack("<H", _CAPABILITIES >> 16)
            + bytes([len(scramble) + 1]) + b"\x00" * 10 + scramble[8:] + b"\x00"
            + b"mysql_native_password\x00")


def _send(conn: socket.socket, seq: int, payload: bytes) -> None:
    conn.sendall(struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload)


def _receive(conn: socket.socket) -> tuple[int, bytes]:
    header = _exactly(conn, 4)
    size = int.from_bytes(header[:3], "little")
    return header[3], _exactly(conn, size)


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _ask_through(target: ExternalMysql, **kw: object) -> None:
    """Connect and run one statement; errors are the refusals expected."""
    with suppress(MySQLdb.Error, UserError):
        conn = target.connect(**kw)
        try:
            conn.cursor().execute("SELECT 1")
        finally:
            conn.close()


@pytest.mark.check
def test_hostile_server_gets_no_local_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("SECRET-7c1e\n")
    with HostileServer(secret) as hostile:
        target = _external(hostile.port)
        _ask_through(target)
        asked = hostile.requests
        assert asked >= 1, "the client never reached a statement"
        assert b"SECRET" not in hostile.received
        # The same request to a client that offers files is answered with the file.
        _ask_through(target, local_infile=1)
        assert hostile.requests > asked
        assert b"SECRET-7c1e" in hostile.received


# --- the driver's statement limit ---------------------------------------------------------------


def _client_zone() -> Zone:
    def rec(rel: str, rdtype: str, rdata: str) -> object:
        return make_record(dns.name.from_text(rel, ORIGIN), 60, rdtype, rdata)
    return Zone(ORIGIN, [rec("@", "SOA", "ns hostmaster 1 3600 900 604800 60"),
                         rec("@", "NS", "ns"), rec("ns", "A", "192.0.2.53"),
                         *(rec(f"host{i}", "A", f"192.0.2.{i + 1}") for i in range(5))])


def _rcode(named: Named, label: str) -> str:
    qname = dns.name.from_text(label, ORIGIN)
    return dns.rcode.to_text(named.query(qname, "A", timeout=5).rcode())


def _general_log(db: MysqlServer, like: str) -> list[str]:
    conn = _root(db)
    try:
        cursor = conn.cursor()
        # The driver's sessions: its account (the reader) opens user_host.
        cursor.execute("SELECT argument FROM mysql.general_log WHERE user_host LIKE %s"
                       " AND argument LIKE %s", (f"{db.driver_user}[%", like))
        return [arg if isinstance(arg, str) else arg.decode(errors="replace")
                for (arg,) in cursor.fetchall()]
    finally:
        conn.close()


def test_driver_sessions_have_max_statement_time(run_dir: Path) -> None:
    """query_timeout_ms=100: the server ends a statement after 0.1 s, the client would wait
    a whole second (its read time-out counts seconds), so an ended statement's error code
    says which of the two stopped it."""
    server = get_server("mysql")
    assert isinstance(server, DlzNamed)
    with loaded_store("mysql", lambda: iter([_client_zone()]), run_dir / "limit") as loaded:
        db = loaded.target
        root = _root(db)
        try:
            root.cursor().execute("SET GLOBAL log_output = 'TABLE', general_log = 1")
        finally:
            root.close()
        body = server.body(db, 1, extra={"query_timeout_ms": "100", "down_interval_ms": "200"})
        # The reader's password reaches named through its environment, never named.conf.
        env = loaded.loader.database.client_env(db) or None
        with Named(run_dir / "named-limit", body, env=env) as named:
            assert _rcode(named, "host0") == "NOERROR"
            assert any("max_statement_time = 0.100" in arg
                       for arg in _general_log(db, "%max_statement_time%")), \
                "the driver's session set no max_statement_time"
            locker = db.connect()
            try:
                locker.cursor().execute("LOCK TABLES records WRITE")
                assert _rcode(named, "host1") == "SERVFAIL"
            finally:
                locker.close()  # and its lock with it
            log = named.log_path.read_text(errors="replace")
            assert f"({ER_STATEMENT_TIMEOUT})" in log, log[-2000:]
            deadline = time.monotonic() + 10
            while _rcode(named, "host2") != "NOERROR":
                assert time.monotonic() < deadline, "answers did not resume"
                time.sleep(0.1)
