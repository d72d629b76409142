"""Least privilege for the suite's private servers and files (issue 27), for real.

Another local user (`nobody`) cannot reach the private PostgreSQL or MariaDB without this run's
password, and the DLZ driver's account, with it, can read but not write; the account a driver
taking updates writes as may change the records of its update zones only, and nothing else
(issue 38); the LDAP reader DN cannot write either; files holding a key or a password are 0600;
PostgreSQL runs under a directory its user cannot search without any parent's mode changed; and
a `python3 -m bench` killed with SIGKILL leaves no server of its run behind (base/watchdog.py).
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dns.name
import ldap
import psycopg
import pytest

from base.errors import UserError
from base.latency_proxy import LatencyProxy
from base.netns import DatabaseHost
from base.paths import REPO_ROOT
from base.process import SERVICE_USER, as_user
from bench.load.dnsperf import start_background
from bench.load.prober import Recorder
from bench.measure.serving import LoadedStore, loaded_store
from databases.mariadb import MysqlServer
from databases.postgresql import PG_BIN, READER_ROLE, PgServer
from databases.slapd import LdapServer
from loaders import ldap as ldap_store
from loaders import mysql, pg
from servers import bindversion, get_server
from servers.knot import Knot
from servers.named import Named, valgrind_wrapper
from servers.nsd import Nsd
from servers.pdns import Pdns
from servers.update_policy import NamedUpdatePolicy
from tests.benchcli import processes_under, start_bench
from tests.test_sql_stores import PG_AXFR, PG_LOOKUP, PgProbe, driver_lists
from zonedata.generator import coverage_zones
from zonedata.model import Zone, name_key

MARIADB_CLIENT = "/usr/bin/mariadb"


def as_nobody(argv: list[str], env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    """argv run as the user nobody, with no password but those in env."""
    return subprocess.run(argv, env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
                                     **(env or {})},
                          cwd="/", capture_output=True, text=True, timeout=60, check=False,
                          **as_user("nobody"))


# --- PostgreSQL -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_store(run_dir: Path) -> Iterator[PgServer]:
    with pg.LOADER.database.server(run_dir / "pg") as server:
        pg.LOADER.load(coverage_zones()[:3], server)
        yield server


def psql(server: PgServer, user: str, sql: str, *, host: str = "127.0.0.1",
         password: str | None = None) -> subprocess.CompletedProcess[str]:
    """psql as nobody (-w: never prompt; -X: no psqlrc)."""
    return as_nobody([str(PG_BIN / "psql"), "-X", "-w", "-h", host, "-p", str(server.port),
                      "-U", user, "-d", server.dbname, "-tA", "-c", sql],
                     {"PGPASSWORD": password} if password is not None else None)


def test_postgres_wants_the_runs_password(pg_store: PgServer) -> None:
    for user in ("dlz", "dlz_reader", "postgres"):
        refused = psql(pg_store, user, "SELECT 1")
        assert refused.returncode != 0 and "password" in refused.stderr, refused
        wrong = psql(pg_store, user, "SELECT 1", password="guessed")
        assert "password authentication failed" in wrong.stderr, wrong
    # The socket directory is the server's user's alone.
    assert psql(pg_store, "dlz_reader", "SELECT 1", host=pg_store.host,
                password=pg_store.reader_password).returncode != 0
    read = psql(pg_store, "dlz_reader", "SELECT count(*) FROM zones",
                password=pg_store.reader_password)
    assert read.returncode == 0 and read.stdout.strip() == "3", read


@pytest.mark.parametrize("sql", [
    "INSERT INTO zones (name) VALUES ('written.test')",
    "UPDATE records SET ttl = 1",
    "DELETE FROM xfr_clients",
    "CREATE TABLE mine (v text)",
    "COPY zones TO PROGRAM 'id'",
])
def test_postgres_driver_role_cannot_write(pg_store: PgServer, sql: str) -> None:
    done = psql(pg_store, "dlz_reader", sql, password=pg_store.reader_password)
    refusals = ("permission denied", "must be superuser")  # the latter: COPY ... PROGRAM
    assert done.returncode != 0 and any(r in done.stderr for r in refusals), done


def test_postgres_writer_role_only_when_asked(pg_store: PgServer) -> None:
    """No dlz_writer until a driver that takes updates asks for it (servers/update_policy.py)."""
    done = psql(pg_store, "dlz_reader", "SELECT count(*) FROM pg_roles "
                "WHERE rolname = 'dlz_writer'", password=pg_store.reader_password)
    assert done.returncode == 0 and done.stdout.strip() == "0", done


@dataclass(frozen=True)
class Writer:
    """A store's writer account as made for a named whose driver takes updates of one zone:
    its password, that zone's key, and the key of another zone of the store."""

    password: str
    zone: str
    other: str


def make_writer(server: str, target: Any, password: str) -> Writer:
    """The writer account (its password given) made as for a named of `server` taking updates
    of the first of the zones loaded (DlzNamed.client_env makes it), not of the second."""
    zones = [zone.origin for zone in coverage_zones()[:2]]
    kind = dataclasses.replace(get_server(server), updates=NamedUpdatePolicy(
        (zones[0],), None, unsigned=True))
    kind.client_env(target)
    return Writer(password, name_key(zones[0]), name_key(zones[1]))


@pytest.fixture(scope="module")
def pg_writer(pg_store: PgServer) -> Writer:
    return make_writer("pg", pg_store, pg_store.writer_password)


@pytest.mark.parametrize("sql", [
    "INSERT INTO zones (name) VALUES ('written.test')",
    "UPDATE records SET ttl = 1",
    "DELETE FROM zones",
    "DELETE FROM xfr_clients",
    "CREATE TABLE mine (v text)",
])
def test_postgres_writer_writes_records_only(pg_store: PgServer, pg_writer: Writer,
                                             sql: str) -> None:
    """The updates' role adds and deletes records rows (drivers/pg: ADD_SQL, DEL_SQL) and
    may do nothing else the reader may not."""
    done = psql(pg_store, "dlz_writer", sql, password=pg_writer.password)
    assert done.returncode != 0 and "permission denied" in done.stderr, done
    # Inserting and deleting a records row of its update zone, rolled back: allowed.
    allowed = psql(pg_store, "dlz_writer", f"BEGIN; {_pg_insert_marked(pg_writer.zone)}; "
                   f"DELETE FROM records WHERE name LIKE '{MARK}.%'; ROLLBACK",
                   password=pg_writer.password)
    assert allowed.returncode == 0, allowed


# The label of the rows the tests' writers add (no name of the coverage zones has it).
MARK = "by-the-writer"


def _pg_insert_marked(zone: str) -> str:
    """A TXT row at MARK.<zone> into the zone."""
    return ("INSERT INTO records (zone_id, name, type, ttl, data) "
            f"SELECT id, '{MARK}.' || name, 'TXT', 1, '\"w\"' FROM zones WHERE name = '{zone}'")


def _pg_deleted(condition: str) -> str:
    """Delete the records rows of condition; prints how many went."""
    return f"WITH d AS (DELETE FROM records WHERE {condition} RETURNING 1) SELECT count(*) FROM d"


def _pg_soa_rows(pg_store: PgServer, zone: str) -> int:
    with pg_store.connect() as conn:
        row = conn.execute("SELECT count(*) FROM records r JOIN zones z ON z.id = r.zone_id "
                           "WHERE z.name = %s AND r.type = 'SOA'", (zone,)).fetchone()
    assert row is not None
    return int(row[0])


def test_postgres_writer_writes_only_its_update_zones(pg_store: PgServer,
                                                      pg_writer: Writer) -> None:
    """The writer role, logged in with its password, may add and delete the records of the
    zones its driver takes updates for (update_zones), and of no other zone: an insert there
    is refused, a delete there finds nothing (row-level security: loaders/pg.py
    limit_writes)."""
    def write(sql: str) -> subprocess.CompletedProcess[str]:
        return psql(pg_store, "dlz_writer", sql, password=pg_writer.password)

    refused = write(_pg_insert_marked(pg_writer.other))
    assert refused.returncode != 0 and "row-level security" in refused.stderr, refused
    other_soa = f"zone_id = (SELECT id FROM zones WHERE name = '{pg_writer.other}') " \
                "AND type = 'SOA'"
    found_nothing = write(_pg_deleted(other_soa))
    assert (found_nothing.returncode, found_nothing.stdout.strip()) == (0, "0"), found_nothing
    assert _pg_soa_rows(pg_store, pg_writer.other) == 1
    added = write(_pg_insert_marked(pg_writer.zone))
    assert added.returncode == 0, added
    deleted = write(_pg_deleted(f"name = '{MARK}.{pg_writer.zone}'"))
    assert (deleted.returncode, deleted.stdout.strip()) == (0, "1"), deleted


def test_postgres_row_limit_leaves_the_readers_plans(pg_store: PgServer,
                                                     pg_writer: Writer) -> None:
    """Row-level security on records (the writer's limit) changes none of the reader's plans:
    the driver's fetch and zone transfer plan as they do for the superuser, whom row-level
    security passes by."""
    with pg_store.connect() as conn:
        limited = conn.execute("SELECT relrowsecurity FROM pg_class "
                               "WHERE oid = 'records'::regclass").fetchone()
    assert limited == (True,)
    reader = psycopg.connect(host="127.0.0.1", port=pg_store.port, dbname=pg_store.dbname,
                             user=READER_ROLE, password=pg_store.reader_password)
    probes = [PgProbe(pg_store), PgProbe(SimpleNamespace(connect=lambda: reader))]
    suffixes, owners = driver_lists(dns.name.from_text(f"a.b.{pg_writer.zone}."))
    try:
        plans = [(probe.explain("lookup", PG_LOOKUP, [owners, suffixes]),
                  probe.explain("axfr", PG_AXFR, [pg_writer.zone])) for probe in probes]
    finally:
        for probe in probes:
            probe.close()
    assert plans[1] == plans[0]


def test_postgres_files_and_directories_are_private(pg_store: PgServer) -> None:
    assert mode(pg_store.password_file) == 0o600
    assert not list(pg_store.run_dir.glob("initdb*"))
    assert mode(pg_store.data_dir) == 0o700
    # The socket's directory: the server's user's only, whom its clients (named) run as too.
    assert mode(pg_store.socket_dir) == 0o700
    if os.geteuid() == 0:
        for directory in (pg_store.data_dir, pg_store.socket_dir):
            assert directory.stat().st_uid == pwd.getpwnam(SERVICE_USER).pw_uid


def test_postgres_runs_below_a_directory_it_cannot_search() -> None:
    """No parent's mode changes: the server gets its directories as descriptors."""
    if os.geteuid() != 0:
        pytest.skip("the server runs as another user only when the suite runs as root")
    closed = Path(tempfile.mkdtemp(prefix="dlzb-", dir="/tmp"))  # 0700, root's
    try:
        with PgServer(closed / "pg") as server, server.connect() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert mode(closed) == 0o700
    finally:
        shutil.rmtree(closed, ignore_errors=True)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- MariaDB --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mysql_store(run_dir: Path) -> Iterator[MysqlServer]:
    with mysql.LOADER.database.server(run_dir / "mysql") as server:
        mysql.LOADER.load(coverage_zones()[:3], server)
        yield server


def mariadb(server: MysqlServer, user: str, sql: str, *, over_socket: bool = False,
            password: str | None = None) -> subprocess.CompletedProcess[str]:
    where = ([f"--socket={server.socket}"] if over_socket
             else ["--protocol=TCP", "-h", "127.0.0.1", "-P", str(server.port)])
    return as_nobody([MARIADB_CLIENT, "--no-defaults", *where, "-u", user, "-N", "-e", sql,
                      server.database],
                     {"MYSQL_PWD": password} if password is not None else None)


@pytest.mark.parametrize("over_socket", [False, True], ids=["tcp", "socket"])
def test_mariadb_wants_the_runs_password(mysql_store: MysqlServer, over_socket: bool) -> None:
    for user in ("dlz", "dlz_reader", "root", "nobody", ""):
        refused = mariadb(mysql_store, user, "SELECT 1", over_socket=over_socket)
        assert refused.returncode != 0 and "Access denied" in refused.stderr, (user, refused)
        wrong = mariadb(mysql_store, user, "SELECT 1", over_socket=over_socket,
                        password="guessed")
        assert wrong.returncode != 0 and "Access denied" in wrong.stderr, (user, wrong)
    read = mariadb(mysql_store, "dlz_reader", "SELECT COUNT(*) FROM zones",
                   over_socket=over_socket, password=mysql_store.reader_password)
    assert read.returncode == 0 and read.stdout.strip() == "3", read


@pytest.mark.parametrize("sql", [
    "INSERT INTO zones (name) VALUES ('written.test')",
    "UPDATE records SET ttl = 1",
    "DELETE FROM xfr_clients",
    "CREATE TABLE mine (v TEXT)",
    "SELECT COUNT(*) FROM mysql.user",
])
def test_mariadb_driver_account_cannot_write(mysql_store: MysqlServer, sql: str) -> None:
    done = mariadb(mysql_store, "dlz_reader", sql, password=mysql_store.reader_password)
    assert done.returncode != 0 and "denied" in done.stderr, done


def test_mariadb_writer_account_only_when_asked(mysql_store: MysqlServer) -> None:
    """No dlz_writer until a driver that takes updates asks for it (servers/update_policy.py)."""
    done = mariadb(mysql_store, "dlz_writer", "SELECT 1", password=mysql_store.writer_password)
    assert done.returncode != 0 and "Access denied" in done.stderr, done


@pytest.fixture(scope="module")
def mysql_writer(mysql_store: MysqlServer) -> Writer:
    return make_writer("mysql", mysql_store, mysql_store.writer_password)


@pytest.mark.parametrize("sql", [
    "INSERT INTO zones (name) VALUES ('written.test')",
    "UPDATE records SET ttl = 1",
    "DELETE FROM zones",
    "DELETE FROM xfr_clients",
    "CREATE TABLE mine (v TEXT)",
    "SELECT COUNT(*) FROM mysql.user",
])
def test_mariadb_writer_writes_records_only(mysql_store: MysqlServer, mysql_writer: Writer,
                                            sql: str) -> None:
    """The updates' account adds and deletes records rows (drivers/mysql: INSERT_SQL,
    DELETE_SQL) and may do nothing else the reader may not."""
    done = mariadb(mysql_store, "dlz_writer", sql, password=mysql_writer.password)
    assert done.returncode != 0 and "denied" in done.stderr, done
    # Inserting and deleting a records row of its update zone, rolled back: allowed.
    allowed = mariadb(mysql_store, "dlz_writer", "START TRANSACTION; "
                      + _mysql_insert_marked(mysql_writer.zone)
                      + f"; DELETE FROM records WHERE name LIKE '{MARK}.%'; ROLLBACK",
                      password=mysql_writer.password)
    assert allowed.returncode == 0, allowed


def _mysql_insert_marked(zone: str) -> str:
    """A TXT row at MARK.<zone> into the zone."""
    return ("INSERT INTO records (zone_id, name, seq, type, ttl, data) SELECT id, "
            f"CONCAT('{MARK}.', name), 0, 'TXT', 1, '\"w\"' FROM zones WHERE name = '{zone}'")


def test_mariadb_writer_writes_only_its_update_zones(mysql_store: MysqlServer,
                                                     mysql_writer: Writer) -> None:
    """The writer account, logged in with its password, may add and delete the records of
    the zones its driver takes updates for (update_zones), and of no other zone: an insert
    or a delete there is refused (triggers: loaders/mysql.py limit_writes)."""
    def write(sql: str) -> subprocess.CompletedProcess[str]:
        return mariadb(mysql_store, "dlz_writer", sql, password=mysql_writer.password)

    refused = write(_mysql_insert_marked(mysql_writer.other))
    assert refused.returncode != 0 and "update zones only" in refused.stderr, refused
    other_soa = (f"zone_id = (SELECT id FROM zones WHERE name = '{mysql_writer.other}') "
                 "AND type = 'SOA'")
    refused = write(f"DELETE FROM records WHERE {other_soa}")
    assert refused.returncode != 0 and "update zones only" in refused.stderr, refused
    left = mariadb(mysql_store, "dlz_reader", f"SELECT COUNT(*) FROM records WHERE {other_soa}",
                   password=mysql_store.reader_password)
    assert (left.returncode, left.stdout.strip()) == (0, "1"), left
    assert write(_mysql_insert_marked(mysql_writer.zone)).returncode == 0
    deleted = write(f"DELETE FROM records WHERE name = '{MARK}.{mysql_writer.zone}'; "
                    "SELECT ROW_COUNT()")
    assert (deleted.returncode, deleted.stdout.strip()) == (0, "1"), deleted


# --- slapd ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ldap_target(run_dir: Path) -> Iterator[LdapServer]:
    with ldap_store.LOADER.database.server(run_dir / "ldap") as server:
        ldap_store.LOADER.load(coverage_zones()[:3], server)
        yield server


def _bound(server: LdapServer, dn: str, password: str) -> Any:
    conn = ldap.initialize(server.uri)
    conn.simple_bind_s(dn, password)
    return conn


def test_ldap_reader_reads_and_cannot_write(ldap_target: LdapServer) -> None:
    reader = _bound(ldap_target, ldap_target.driver_dn, ldap_target.driver_password)
    try:
        zones = reader.search_s(ldap_target.suffix, ldap.SCOPE_ONELEVEL,
                                "(objectClass=dlzZoneEntry)", ["dlzZoneName"])
        assert len(zones) == 3
        zone_dn = zones[0][0]
        with pytest.raises(ldap.INSUFFICIENT_ACCESS):
            reader.modify_s(zone_dn, [(ldap.MOD_REPLACE, "dlzGeneration", [b"9"])])
        with pytest.raises(ldap.INSUFFICIENT_ACCESS):
            reader.add_s(f"dlzId=written,{ldap_target.suffix}", [
                ("objectClass", [b"dlzZoneEntry"]), ("dlzId", [b"written"]),
                ("dlzZoneName", [b"written.test"])])
        with pytest.raises(ldap.INSUFFICIENT_ACCESS):
            reader.delete_s(zone_dn)
        own = reader.search_s(ldap_target.driver_dn, ldap.SCOPE_BASE, "(objectClass=*)")
        assert "userPassword" not in own[0][1]
    finally:
        reader.unbind_s()


def test_ldap_anyone_else_may_only_bind(ldap_target: LdapServer) -> None:
    with pytest.raises(ldap.INVALID_CREDENTIALS):
        _bound(ldap_target, ldap_target.driver_dn, "guessed")
    anonymous = _bound(ldap_target, "", "")
    try:
        assert anonymous.search_s(ldap_target.suffix, ldap.SCOPE_SUBTREE,
                                  "(objectClass=*)") == []
    except ldap.NO_SUCH_OBJECT:
        pass  # slapd hides the suffix itself too
    finally:
        anonymous.unbind_s()


# --- private files --------------------------------------------------------------------------


def test_config_files_are_private(run_dir: Path, ldap_target: LdapServer) -> None:
    zones = run_dir / "no-zones"
    zones.mkdir()
    named = Named(run_dir / "named-files", "")
    pdns = Pdns(run_dir / "pdns-files", {"launch": "gpgsql", "gpgsql-password": "secret"})
    files = [named.conf_path, named.rndc_conf_path, pdns.conf_path,
             Knot(run_dir / "knot-files", zones).conf_path,
             Nsd(run_dir / "nsd-files", zones).conf_path, ldap_target.config_path]
    assert {path.name: mode(path) for path in files} == {path.name: 0o600 for path in files}


# --- servers die with the suite -------------------------------------------------------------


def test_watchdog_kills_the_groups_left_when_its_pipe_ends() -> None:
    left = subprocess.Popen(["sleep", "600"], start_new_session=True)
    stopped = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        watchdog = subprocess.Popen([sys.executable, str(REPO_ROOT / "base" / "watchdog.py")],
                                    stdin=subprocess.PIPE)
        assert watchdog.stdin is not None
        watchdog.stdin.write(f"+{left.pid}\n+{stopped.pid}\n-{stopped.pid}\n".encode())
        watchdog.stdin.close()  # as when the suite dies
        assert watchdog.wait(timeout=30) == 0
        assert left.wait(timeout=30) == -signal.SIGKILL
        assert stopped.poll() is None, "a group the suite had stopped was not the watchdog's"
    finally:
        for proc in (left, stopped):
            proc.kill()
            proc.wait()


# Each database server once, with each kind of DNS server over one: pdns-gpgsql's PostgreSQL
# stands for pg's (a `serve` of pg was one more PostgreSQL and named started, 2.5 s).
@pytest.mark.parametrize(("server", "programs"), [
    ("pdns-gpgsql", ("postgres", "pdns_server")), ("mysql", ("mariadbd", "named")),
    ("ldap", ("slapd", "named"))])
def test_a_sigkilled_bench_leaves_no_server(run_root: Path, server: str,
                                            programs: tuple[str, ...]) -> None:
    root = run_root / f"killed-{server}"
    proc = start_bench(root, "serve", "--server", server, "--generate", "5")
    assert proc.stdout is not None
    try:
        output = ""
        while " port " not in output:  # serving, once it says where
            line = proc.stdout.readline().decode(errors="replace")
            assert line, output  # it ended before serving
            output += line
        running = processes_under(root)
        for program in programs:
            assert any(program in line for line in running), (program, running)
        proc.kill()  # SIGKILL: no handler of the suite runs
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 60  # a generous bound: the watchdog's SIGKILL is immediate
    while (left := processes_under(root)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == []


# --- nothing the suite starts runs as root ------------------------------------------------

# Every kind of DNS server over a small store, named over each database server (PostgreSQL,
# MariaDB, slapd) through its DLZ driver, and PowerDNS over one of them.
SERVED = ("native", "pg", "mysql", "ldap", "pdns-gpgsql", "nsd", "knot")
# Drivers started as they take RFC 2136 updates: their store's writer account's password too.
UPDATED = ("pg", "mysql")


@dataclass
class Started:
    """Every kind of process the suite starts, running: what -> its processes now; every
    password of their stores' accounts, and the files that hold the drivers' passwords."""

    pids: dict[str, Callable[[], list[int]]]
    zones: list[Zone]
    passwords: list[str]
    password_files: list[Path]


@pytest.fixture(scope="module")
def started(run_dir: Path) -> Iterator[Started]:
    zones = coverage_zones()[:3]
    queries = run_dir / "started.queries"
    queries.write_text(f"{zones[0].origin} SOA\n")
    with ExitStack() as stack:
        pids: dict[str, Callable[[], list[int]]] = {}
        stores: dict[str, LoadedStore] = {}
        for name in SERVED:
            kind = get_server(name)
            if name in UPDATED:
                kind = dataclasses.replace(kind, updates=NamedUpdatePolicy(
                    (zones[0].origin,), None, unsigned=True))
            if kind.store not in stores:
                stores[kind.store] = stack.enter_context(
                    loaded_store(kind, lambda: iter(zones), run_dir / "started"))
                if stores[kind.store].accounts_database:
                    pids[f"{kind.store}'s database server"] = stores[kind.store].database_pids
            loaded = dataclasses.replace(stores[kind.store], server=kind)
            pids[name] = stack.enter_context(loaded.dns_server(run_dir / "started", threads=2)).pids
        named = stack.enter_context(
            Named(run_dir / "started" / "valgrind", "",
                  wrapper=valgrind_wrapper(run_dir / "started" / "valgrind.log")))
        pids["named under valgrind"] = named.pids
        host = stack.enter_context(DatabaseHost())
        on_host = stack.enter_context(PgServer(run_dir / "started" / "pg-db-host", db_host=host))
        pids["PostgreSQL on a database host"] = on_host.pids
        proxy = stack.enter_context(LatencyProxy(run_dir / "started" / "toxiproxy", host,
                                                 on_host.host, on_host.port, 1))
        pids["toxiproxy on a database host"] = proxy.pids
        load = stack.enter_context(start_background(named.host, named.port, queries,
                                                    duration=600, rate=20))
        pids["dnsperf"] = lambda: [load.pid]
        recorder = stack.enter_context(Recorder(named.host, named.port, queries,
                                                run_dir / "started" / "recording.txt",
                                                qps=20, seconds=600, timeout=1))
        pids["prober"] = recorder.process.pids
        pg_server, mysql_server = stores["pg"].target, stores["mysql"].target
        ldap_server = stores["ldap"].target
        passwords = [*(password for server in (pg_server, on_host) for password in (
                         server.password, server.reader_password, server.writer_password)),
                     mysql_server.password, mysql_server.reader_password,
                     mysql_server.writer_password, ldap_server.password,
                     ldap_server.driver_password]
        files = [pg_server.passfile, mysql_server.password_file,
                 mysql_server.writer_password_file, ldap_server.password_file]
        yield Started(pids, zones, passwords, files)


def process_users(pids: list[int]) -> dict[int, str]:
    """pid -> the user it runs as, as ps says."""
    done = subprocess.run(["ps", "-o", "pid=,user=", "-p", ",".join(map(str, pids))],
                          capture_output=True, text=True, check=False)
    return {int(pid): user for pid, user in (line.split() for line in done.stdout.splitlines())}


def test_no_process_the_suite_starts_runs_as_root(started: Started) -> None:
    users = {what: process_users(pids()) for what, pids in started.pids.items()}
    assert all(users.values()), users  # each is running
    as_root = {what: found for what, found in users.items() if "root" in found.values()}
    assert as_root == {}
    if os.geteuid() == 0:
        assert {user for found in users.values() for user in found.values()} == {SERVICE_USER}


def test_no_password_in_any_started_process_environment_or_command_line(
        started: Started) -> None:
    """/proc/PID/environ (readable for a process's whole life, and in a core dump) and
    /proc/PID/cmdline (readable by every local user) hold no password of any store's account:
    the drivers read theirs from 0600 files of the servers' user, which do hold them."""
    secrets_ = [password.encode() for password in started.passwords]
    assert len(set(secrets_)) == len(secrets_) and all(secrets_)
    for path in started.password_files:
        assert mode(path) == 0o600 and any(s in path.read_bytes() for s in secrets_), path
    found = {}
    for what, pids in started.pids.items():
        for pid in pids():
            for part in ("environ", "cmdline"):
                text = Path(f"/proc/{pid}/{part}").read_bytes()
                found[(what, pid, part)] = [s for s in secrets_ if s in text]
    assert found and {where: hit for where, hit in found.items() if hit} == {}
    # What named over PostgreSQL does find in its environment: the password file's name.
    environ = Path(f"/proc/{started.pids['pg']()[0]}/environ").read_bytes().split(b"\0")
    assert f"PGPASSFILE={started.password_files[0]}".encode() in environ


def test_bind_9_20_runs_as_the_service_user(run_dir: Path, started: Started) -> None:
    """named 9.20 from its Debian 13 root: its mount namespace made as root, then setpriv."""
    try:
        bindversion.select("9.20", need_drivers=False)
    except UserError as exc:
        pytest.skip(str(exc))
    kind = get_server("native@9.20")
    with loaded_store(kind, lambda: iter(started.zones), run_dir / "started-9.20") as loaded, \
            loaded.dns_server(run_dir / "started-9.20", threads=1) as named:
        assert named.answers(str(started.zones[0].origin))
        users = process_users(named.pids())
    assert users and set(users.values()) == {SERVICE_USER if os.geteuid() == 0 else
                                             pwd.getpwuid(os.geteuid()).pw_name}


def test_mariadb_gives_the_service_user_no_account(mysql_store: MysqlServer) -> None:
    """install-db's second unix-socket account is root's, not the servers' user's (named)."""
    if os.geteuid() != 0:
        pytest.skip("the servers run as another user only when the suite runs as root")
    done = subprocess.run([MARIADB_CLIENT, "--no-defaults", f"--socket={mysql_store.socket}",
                           "-u", SERVICE_USER, "-N", "-e", "SELECT 1"],
                          env={"PATH": "/usr/bin:/bin"}, cwd="/", capture_output=True,
                          text=True, timeout=60, check=False, **as_user(SERVICE_USER))
    assert done.returncode != 0 and "Access denied" in done.stderr, done
