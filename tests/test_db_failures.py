"""When the database misbehaves, named's workers stay free: the drivers against real servers.

  - a frozen database (SIGSTOP of every server process: PostgreSQL, MariaDB, slapd) is answered
    SERVFAIL, not left to the client's time-out, and while it stays frozen every query is
    answered SERVFAIL at once (the store is down: no connect or statement per query); after
    SIGCONT answers resume from the same named;
  - a row with NULL columns is answered SERVFAIL and the driver keeps its connection (the
    database sees no new one), and good names answer right after it;
  - a statement the server refuses (a privilege revoked, a table away) is SERVFAIL for its
    query, and no outage: the store is not taken for down, answers resume at once;
  - TXT records of 2 KiB and 64 KiB (many strings) come back from every driver as from native
    BIND (the MariaDB driver's re-fetch of a long column, Berkeley DB's buffer growth);
  - a filesystem zone file truncated in place under queries: named stays up (no SIGBUS);
  - bdbhpt (transactional): a writer killed while its transaction holds a lock does not hang
    the readers, and the zone answers again (as before) from the same named;
  - a mistyped argument key is named in named's log, its value is not.

Bounds are never timed: a query "answered SERVFAIL within the bound" is one answered at all
within a client time-out well above the configured bound.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import dns.exception
import dns.name
import dns.rcode
import pytest

from base.paths import REPO_ROOT
from bench.measure.faults import stopped
from bench.measure.serving import LoadedStore, loaded_store
from bench.verify.answers import ask, complete
from databases.postgresql import READER_ROLE
from loaders.fs import ZONE_FILE, FsLoader, zone_file_path
from servers import get_server
from servers.dlz import DlzNamed
from servers.named import Named, valgrind_wrapper
from zonedata.model import Zone, make_record, name_key

ORIGIN = dns.name.from_text("fail.test.")
WWW = dns.name.from_text("www", ORIGIN)
# Small bounds, so that the tests see them work; the client waits far longer (CLIENT_TIMEOUT).
BOUNDS = {"connect_timeout_ms": "300", "query_timeout_ms": "300", "down_interval_ms": "1000"}
# Above every bound a driver can take for one query with BOUNDS: MariaDB's client counts whole
# seconds (1 s for the read, 1 s for the connect), the others 300 ms each.
CLIENT_TIMEOUT = 5.0
FAST_CLIENT_TIMEOUT = 2.0  # the store is down: SERVFAIL at once, far below this
WITH_SERVER = ["pg", "mysql", "ldap"]
TXT_STRINGS = {"txt2k": 8, "txt64k": 254}  # strings of 255 octets: 2 KiB and 64 KiB of text


def _dlz(driver: str) -> DlzNamed:
    server = get_server(driver)
    assert isinstance(server, DlzNamed), driver
    return server


def _built(drivers: list[str]) -> list[str]:
    return [d for d in drivers if _dlz(d).is_built()]


def _long_txt(strings: int) -> str:
    return " ".join(f'"{chr(ord("a") + i % 26) * 255}"' for i in range(strings))


def fail_zone(hosts: int = 3) -> Zone:
    def rec(rel: str, rdtype: str, rdata: str) -> Any:
        return make_record(dns.name.from_text(rel, ORIGIN), 60, rdtype, rdata)
    return Zone(ORIGIN, [
        rec("@", "SOA", "ns hostmaster 1 3600 900 604800 60"),
        rec("@", "NS", "ns"),
        rec("ns", "A", "192.0.2.53"),
        rec("www", "A", "192.0.2.80"),
        rec("bad-ttl", "A", "192.0.2.1"),
        rec("bad-data", "A", "192.0.2.2"),
        *(rec(name, "TXT", _long_txt(n)) for name, n in TXT_STRINGS.items()),
        *(rec(f"host{i}", "A", f"192.0.2.{i % 250 + 1}") for i in range(hosts)),
    ])


@contextmanager
def serving(driver: str, zones: list[Zone], run_dir: Path, *, threads: int = 1,
            extra: dict[str, str] | None = None) -> Iterator[tuple[LoadedStore, Named]]:
    """The driver's store loaded with zones, and named over it with extra driver arguments."""
    with loaded_store(driver, lambda: iter(zones), run_dir / driver) as loaded:
        with named_over(loaded, run_dir / f"named-{driver}", threads=threads,
                        extra=extra) as named:
            yield loaded, named


def named_over(loaded: LoadedStore, run_dir: Path, *, threads: int = 1,
               extra: dict[str, str] | None = None) -> Named:
    """A named (not started) over a loaded store, with extra driver arguments."""
    body = _dlz(loaded.server.name).body(loaded.target, threads, extra=extra)
    env = loaded.loader.database.client_env(loaded.target) or None
    return Named(run_dir, body, threads=threads, env=env)


@pytest.fixture(scope="module")
def fail_stores(run_dir: Path) -> Iterator[Callable[[str], LoadedStore]]:
    """Each driver's store loaded with fail_zone() once for the module, started when a test
    first asks for it: the frozen-database, NULL-row and long-TXT tests each start a named of
    their own over it. Starting PostgreSQL, MariaDB or slapd and loading it costs seconds, a
    named over it a fraction of one; what one test does to the store leaves the others' names
    alone (NULL rows at bad-ttl and bad-data, a database frozen and resumed)."""
    with ExitStack() as stack:
        stores: dict[str, LoadedStore] = {}

        def store(driver: str) -> LoadedStore:
            if driver not in stores:
                stores[driver] = stack.enter_context(
                    loaded_store(driver, lambda: iter([fail_zone()]), run_dir / "shared" / driver))
            return stores[driver]

        yield store


def _rcode(named: Named, qname: dns.name.Name, rdtype: str = "A",
           timeout: float = CLIENT_TIMEOUT) -> str:
    return dns.rcode.to_text(named.query(qname, rdtype, timeout=timeout).rcode())


def _until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


# --- a frozen database ---------------------------------------------------------------------------


@pytest.mark.parametrize("driver", _built(WITH_SERVER))
def test_frozen_database_is_servfail_at_once_and_recovers(
        run_dir: Path, fail_stores: Callable[[str], LoadedStore], driver: str) -> None:
    loaded = fail_stores(driver)
    with named_over(loaded, run_dir / f"named-frozen-{driver}", threads=2,
                    extra=BOUNDS) as named:
        pid = named.main_pid()
        assert _rcode(named, WWW) == "NOERROR"
        pids = loaded.database_pids()
        assert pids, "the database has no processes to freeze"
        with stopped(pids):
            # The first query meets the frozen server: answered within the bound.
            assert _rcode(named, WWW) == "SERVFAIL"
            # Down: every query answered at once, none left to the client's time-out.
            outcomes: dict[str, int] = {}
            for i in range(20):
                try:
                    rcode = _rcode(named, dns.name.from_text(f"host{i % 3}", ORIGIN),
                                   timeout=FAST_CLIENT_TIMEOUT)
                except dns.exception.Timeout:
                    rcode = "timeout"
                outcomes[rcode] = outcomes.get(rcode, 0) + 1
            assert outcomes == {"SERVFAIL": 20}, outcomes
        assert _until(lambda: _rcode(named, WWW) == "NOERROR", 30), "answers did not resume"
        assert named.main_pid() == pid, "named was restarted"
        log = named.log_path.read_text(errors="replace")
        assert "the store does not answer" in log and "the store answers again" in log


# --- rows the driver cannot use ----------------------------------------------------------------


class PgRows:
    """Breaks rows in PostgreSQL and reads the driver's sessions from pg_stat_activity."""

    def __init__(self, loaded: LoadedStore) -> None:
        self.conn = loaded.target.connect()  # the superuser: the driver's role only reads
        self.conn.autocommit = True

    def break_rows(self) -> None:
        for column in ("ttl", "data"):
            self.conn.execute(f"ALTER TABLE records ALTER COLUMN {column} DROP NOT NULL")
            self.conn.execute(f"UPDATE records SET {column} = NULL WHERE name = %s",
                              (name_key(dns.name.from_text(f"bad-{column}", ORIGIN)),))

    def sessions(self) -> set[tuple[Any, ...]]:
        rows = self.conn.execute("SELECT pid, backend_start FROM pg_stat_activity"
                                 " WHERE application_name = 'dlz_pg'").fetchall()
        return set(rows)

    def close(self) -> None:
        self.conn.close()


class MysqlRows:
    """Breaks rows in MariaDB and counts the connections the server accepted."""

    def __init__(self, loaded: LoadedStore) -> None:
        self.conn = loaded.target.connect()
        self.conn.autocommit(True)

    def break_rows(self) -> None:
        cursor = self.conn.cursor()
        cursor.execute("ALTER TABLE records MODIFY ttl INT UNSIGNED NULL,"
                       " MODIFY data MEDIUMBLOB NULL")
        for column in ("ttl", "data"):
            cursor.execute(f"UPDATE records SET {column} = NULL WHERE name = %s",
                           (name_key(dns.name.from_text(f"bad-{column}", ORIGIN)),))

    def sessions(self) -> set[tuple[Any, ...]]:
        cursor = self.conn.cursor()
        cursor.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
        return set(cursor.fetchall())

    def close(self) -> None:
        self.conn.close()


ROW_BREAKERS: dict[str, Callable[[LoadedStore], PgRows | MysqlRows]] = {
    "pg": PgRows, "mysql": MysqlRows}


@pytest.mark.parametrize("driver", _built(list(ROW_BREAKERS)))
def test_null_columns_are_servfail_and_keep_the_connection(
        run_dir: Path, fail_stores: Callable[[str], LoadedStore], driver: str) -> None:
    loaded = fail_stores(driver)
    with named_over(loaded, run_dir / f"named-null-{driver}", threads=1) as named:
        rows = ROW_BREAKERS[driver](loaded)
        try:
            rows.break_rows()
            assert _rcode(named, WWW) == "NOERROR"  # the driver's connection is open
            before = rows.sessions()
            for _ in range(3):
                for column in ("ttl", "data"):
                    bad = dns.name.from_text(f"bad-{column}", ORIGIN)
                    assert _rcode(named, bad) == "SERVFAIL", column
                    time.sleep(0.15)  # past memo_ms: the next query fetches again
                    # Not taken for down, not reconnected: a good name answers at once.
                    assert _rcode(named, WWW, timeout=FAST_CLIENT_TIMEOUT) == "NOERROR"
            assert rows.sessions() == before, "the driver connected again"
        finally:
            rows.close()


# --- statements the server refuses ---------------------------------------------------------------


@contextmanager
def _pg_refuses_reads(loaded: LoadedStore) -> Iterator[None]:
    """The driver's role may not read records: every fetch is refused (SQLSTATE 42501)."""
    conn = loaded.target.connect()
    conn.autocommit = True
    try:
        conn.execute(f"REVOKE SELECT ON records FROM {READER_ROLE}")
        yield
    finally:
        conn.execute(f"GRANT SELECT ON records TO {READER_ROLE}")
        conn.close()


@contextmanager
def _mysql_refuses_reads(loaded: LoadedStore) -> Iterator[None]:
    """The records table is away: every fetch is refused (ER_NO_SUCH_TABLE)."""
    conn = loaded.target.connect()
    try:
        conn.cursor().execute("RENAME TABLE records TO records_away")
        yield
    finally:
        conn.cursor().execute("RENAME TABLE records_away TO records")
        conn.close()


REFUSERS: dict[str, Callable[[LoadedStore], Any]] = {
    "pg": _pg_refuses_reads, "mysql": _mysql_refuses_reads}


@pytest.mark.parametrize("driver", _built(list(REFUSERS)))
def test_a_statement_the_server_refuses_takes_nothing_down(
        run_dir: Path, fail_stores: Callable[[str], LoadedStore], driver: str) -> None:
    """A statement the server answers with an error is SERVFAIL for that query, also when it
    fails again on the new connection the driver opens to retry it; the store answered, so it
    is not taken for down: the first query after the server takes the statement again is
    answered, down_interval_ms or not (60 s here)."""
    loaded = fail_stores(driver)
    with named_over(loaded, run_dir / f"named-refused-{driver}", threads=1,
                    extra={"down_interval_ms": "60000"}) as named:
        assert _rcode(named, WWW) == "NOERROR"
        with REFUSERS[driver](loaded):
            time.sleep(0.15)  # past memo_ms: the next query fetches again
            assert _rcode(named, WWW) == "SERVFAIL"
        time.sleep(0.15)
        assert _rcode(named, WWW, timeout=FAST_CLIENT_TIMEOUT) == "NOERROR"
        assert "the store does not answer" not in named.log_path.read_text(errors="replace")


# --- long TXT records ----------------------------------------------------------------------------


def _txt_answer(named: Named, name: str) -> tuple[str, frozenset[Any]]:
    answer = complete(ask(named, (dns.name.from_text(name, ORIGIN), "TXT")))
    return answer.rcode, answer.answer


TXT_DRIVERS = _built(["pg", "mysql", "ldap", "fs", "bdb-btree", "bdb-hash", "bdbhpt-t",
                      "bdbhpt-c", "bdbhpt-p"])


@pytest.fixture(scope="module")
def native_txt(run_dir: Path) -> Iterator[dict[str, tuple[str, frozenset[Any]]]]:
    with loaded_store("native", lambda: iter([fail_zone()]), run_dir / "native") as loaded, \
            loaded.dns_server(run_dir, threads=1) as named:
        yield {name: _txt_answer(named, name) for name in TXT_STRINGS}


@pytest.mark.parametrize("driver", TXT_DRIVERS)
def test_long_txt_records_as_native(run_dir: Path, native_txt: dict[str, Any],
                                    fail_stores: Callable[[str], LoadedStore],
                                    driver: str) -> None:
    with named_over(fail_stores(driver), run_dir / f"named-txt-{driver}", threads=1) as named:
        for name, (rcode, answer) in native_txt.items():
            assert rcode == "NOERROR" and answer, name
            got = _txt_answer(named, name)
            assert got == (rcode, answer), f"{name}: {got[0]}, {len(got[1])} RRsets"


# --- a zone file truncated in place --------------------------------------------------------------


@pytest.mark.skipif(not _dlz("fs").is_built(), reason="the filesystem driver is not built")
def test_zone_file_truncated_in_place_keeps_named_up(run_dir: Path) -> None:
    """A zone file larger than the driver's small-file buffer, truncated and rewritten in
    place while two clients query it: every query is answered, named never dies."""
    zone = fail_zone(hosts=3000)  # about 150 kB of zone file
    with serving("fs", [zone], run_dir / "truncate", threads=2) as (loaded, named):
        path = Path(loaded.target) / zone_file_path(name_key(ORIGIN))
        content = path.read_bytes()
        assert len(content) > 64 * 1024
        pid = named.main_pid()
        stop = threading.Event()
        outcomes: dict[str, int] = {}

        def query(offset: int) -> None:
            i = offset
            while not stop.is_set():
                qname = dns.name.from_text(f"host{i % 3000}", ORIGIN)
                try:
                    rcode = _rcode(named, qname)
                except dns.exception.Timeout:
                    rcode = "timeout"
                outcomes[rcode] = outcomes.get(rcode, 0) + 1
                i += 7

        clients = [threading.Thread(target=query, args=(k,)) for k in range(2)]
        for t in clients:
            t.start()
        try:
            for size in (len(content) // 2, 100, 0) * 5:
                with path.open("r+b") as f:  # in place: the same inode
                    f.truncate(size)
                time.sleep(0.05)
                path.write_bytes(content)  # opened with O_TRUNC: the same inode again
                time.sleep(0.05)
        finally:
            stop.set()
            for t in clients:
                t.join()
        assert set(outcomes) <= {"NOERROR", "SERVFAIL", "NXDOMAIN"}, outcomes
        assert named.main_pid() == pid and _rcode(named, WWW) == "NOERROR"


SENTINEL = '"SENTINEL: read outside the root"'


def _sentinel_zone(origin: dns.name.Name) -> Zone:
    return Zone(origin, [
        make_record(origin, 60, "SOA", "ns hostmaster 1 3600 900 604800 60"),
        make_record(origin, 60, "NS", dns.name.from_text("ns", origin).to_text()),
        make_record(origin, 60, "TXT", SENTINEL)])


@pytest.mark.skipif(not _dlz("fs").is_built() or not os.path.exists("/usr/bin/valgrind"),
                    reason="the filesystem driver or valgrind is missing")
def test_filesystem_walk_without_openat2_refuses_symlinks(run_dir: Path) -> None:
    """Valgrind does not know openat2 (ENOSYS), so under it the driver walks paths one
    component at a time: a symlinked zone directory and a symlinked zone file, both to zones
    outside the root, are no zones (the parent zone answers NXDOMAIN)."""
    outside = run_dir / "outside"
    evil_dir, evil_file = (dns.name.from_text(label, ORIGIN) for label in ("evil", "evil2"))
    FsLoader().load([_sentinel_zone(evil_dir), _sentinel_zone(evil_file)], outside)
    with loaded_store("fs", lambda: iter([fail_zone()]), run_dir / "walk") as loaded:
        root = Path(loaded.target)
        link_dir = root / zone_file_path(name_key(evil_dir))
        link_dir.parent.symlink_to(outside / zone_file_path(name_key(evil_dir)).rsplit("/", 1)[0])
        link_file = root / zone_file_path(name_key(evil_file))
        link_file.parent.mkdir()
        link_file.symlink_to(outside / zone_file_path(name_key(evil_file)))
        assert link_file.name == ZONE_FILE
        body = _dlz("fs").body(loaded.target, 1)
        named = Named(run_dir / "named-walk", body,
                      wrapper=valgrind_wrapper(run_dir / "valgrind-walk.log"))
        with named:
            for origin in (evil_dir, evil_file):
                reply = named.query(origin, "TXT", timeout=30)
                assert dns.rcode.to_text(reply.rcode()) == "NXDOMAIN", origin
                assert "SENTINEL" not in reply.to_text()
            assert _rcode(named, WWW, timeout=30) == "NOERROR"
        assert "a component at a time" in named.log_path.read_text(errors="replace")


# --- a Berkeley DB writer killed inside its transaction ------------------------------------------

HOLD_LOCK = """
import sys, time
from berkeleydb import db
from loaders.bdbhpt import DATA_FILE, ENV_FLAGS
env = db.DBEnv()
env.open(sys.argv[1], ENV_FLAGS["transactional"], 0o644)
zones = db.DB(env)
zones.open(DATA_FILE, "dns_zone", db.DB_UNKNOWN, db.DB_AUTO_COMMIT)
txn = env.txn_begin()
key = sys.argv[2].encode()
zones.put(key, zones.get(key, txn=txn, flags=db.DB_RMW), txn=txn)  # write-locked, never ended
print("holding", flush=True)
time.sleep(600)
"""


def _answer(named: Named, qname: dns.name.Name) -> tuple[str, list[str]]:
    reply = named.query(qname, "A", timeout=CLIENT_TIMEOUT)
    return dns.rcode.to_text(reply.rcode()), sorted(r.to_text() for r in reply.answer)


@pytest.mark.skipif(not _dlz("bdbhpt-t").is_built(), reason="the bdbhpt driver is not built")
def test_killed_writer_does_not_hang_bdbhpt_readers(run_dir: Path) -> None:
    """Readers of the zone a killed writer held get answers again from the same named: its
    DB_ENV->failchk aborts the dead writer's transaction, releasing the lock."""
    with serving("bdbhpt-t", [fail_zone()], run_dir / "bdbhpt", threads=2,
                 extra={"lock_timeout_ms": "200", "down_interval_ms": "500"}) as (loaded, named):
        home = Path(loaded.target) / "transactional"
        before = _answer(named, WWW)
        assert before[0] == "NOERROR" and before[1], before
        writer = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(home), name_key(ORIGIN)],
                                  cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
        try:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "holding"
            time.sleep(0.2)  # past memo_ms
            # Held by a live writer, then by a dead one: answered either way, never hung.
            assert _rcode(named, WWW) in ("SERVFAIL", "NOERROR")
            writer.kill()
            writer.wait()
            outcomes = {_rcode(named, dns.name.from_text(f"host{i % 3}", ORIGIN))
                        for i in range(10)}
            assert outcomes <= {"SERVFAIL", "NOERROR"}, outcomes
            # Without restarting named, the zone answers again, as before the writer.
            assert _until(lambda: _answer(named, WWW) == before, 30), \
                "the dead writer's lock was never released"
        finally:
            writer.kill()
            writer.wait()


# --- arguments -----------------------------------------------------------------------------------


def test_mistyped_key_is_logged_without_its_value(run_dir: Path) -> None:
    secret = "s3cret-" + os.urandom(6).hex()
    with loaded_store("memory", lambda: iter([fail_zone()]), run_dir / "args") as loaded:
        body = _dlz("memory").body(loaded.target, 1, extra={"pasword": secret})
        named = Named(run_dir / "named-args", body)
        with pytest.raises(Exception, match="named"):
            with named:
                pass
    log = named.log_path.read_text(errors="replace")
    assert "unknown argument 'pasword'" in log
    assert secret not in log
