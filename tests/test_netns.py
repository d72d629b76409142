"""The database on its own host (a network namespace behind a veth pair) and added round-trip time.

Real servers in a real namespace: each is reachable only at the namespace's address (not on this
host's loopback, not through a socket in its run directory), answers real queries, and the
namespace and its veth are gone after the block, after an exception and after a signal to the
process holding them. The latency proxy runs on the database's host: it forwards real queries to
each database server there, and no user but the suite (root) reaches its control API while it
serves named; bad --db-rtt values are refused.
No test asserts a time.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import ldap
import MySQLdb
import psycopg
import pytest

from base.errors import UserError
from base.latency_proxy import TOXIPROXY, LatencyProxy, parse_db_rtt, split_rtt
from base.netns import BENCHMARK_NET, DatabaseHost, exists, interface_exists
from base.process import REPO_ROOT, SERVICE_USER, as_user
from bench.measure.latency import measure_store_added_rtt
from bench.measure.serving import loaded_store
from bench.verify.answers import ask, compare_answers
from bench.verify.compare import detail
from databases.mariadb import MysqlServer
from databases.postgresql import PgServer
from databases.slapd import LdapServer, ensure_reader_entry, ensure_suffix_entry
from loaders.ldap import INDEXES, SCHEMA_FILE, SUFFIX
from loaders.ldap import LOADER as LDAP_LOADER
from loaders.mysql import LOADER as MYSQL_LOADER
from loaders.pg import LOADER as PG_LOADER
from servers import get_server
from servers.dlz import DlzNamed
from servers.named import Named
from zonedata.derive import derive_queries
from zonedata.generator import coverage_zones

# make deps builds toxiproxy only where Go 1.23+ is installed (Debian 12's own Go is older).
needs_toxiproxy = pytest.mark.skipif(not TOXIPROXY.is_file(),
                                     reason=f"{TOXIPROXY} not built (no Go 1.23+ here)")
PG = get_server("pg")
assert isinstance(PG, DlzNamed)


def gone(host: DatabaseHost) -> bool:
    return not exists(host.name) and not interface_exists(host.host_interface)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --- the namespace alone ----------------------------------------------------------------------


def test_namespace_has_its_own_addresses_and_is_removed_after_the_block() -> None:
    with DatabaseHost() as host, DatabaseHost() as other:
        assert exists(host.name) and interface_exists(host.host_interface)
        assert host.name != other.name and host.host_interface != other.host_interface
        mine = ipaddress.ip_network(f"{host.address}/30", strict=False)
        assert ipaddress.ip_address(host.peer_address) in mine
        assert mine.subnet_of(BENCHMARK_NET)  # type: ignore[arg-type]
        assert ipaddress.ip_address(other.address) not in mine
        inside = subprocess.run(host.command([host.prefix()[0], "-j", "-4", "addr", "show"]),
                                capture_output=True, text=True, check=True).stdout
        addresses = {a["local"] for link in json.loads(inside) for a in link["addr_info"]}
        assert addresses == {"127.0.0.1", host.address}
    assert gone(host) and gone(other)


def test_namespace_is_removed_after_an_exception() -> None:
    with pytest.raises(RuntimeError, match="boom"), DatabaseHost() as host:
        assert exists(host.name)
        raise RuntimeError("boom")
    assert gone(host)


def test_removal_stops_what_still_runs_inside() -> None:
    with DatabaseHost() as host:
        sleeper = subprocess.Popen(host.command(["sleep", "600"]))
        assert _entered(host, sleeper.pid)
    sleeper.wait(timeout=10)
    assert gone(host)


def _entered(host: DatabaseHost, pid: int) -> bool:
    """Whether pid is inside the namespace within 10 s.

    `ip netns exec` joins the namespace before it execs, so right after Popen the process can
    still be outside (CI saw `ip netns pids` print nothing once).
    """
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if host.pids() == [pid]:
            return True
        time.sleep(0.02)
    return False


HOLDER = """
import json, sys, time
from base.netns import DatabaseHost
from databases.postgresql import PgServer
with DatabaseHost() as host, PgServer(sys.argv[1], db_host=host) as pg:
    print(json.dumps([host.name, host.host_interface, pg.pids()]), flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_the_holder_removes_namespace_and_server(run_dir: Path,
                                                           sig: signal.Signals) -> None:
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir / f"hold-{sig.name}")],
                             cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, f"holder failed: {child.communicate(timeout=30)[1]}"
        name, interface, pids = json.loads(line)
        assert exists(name) and interface_exists(interface) and len(pids) >= 2
        child.send_signal(sig)
        child.wait(timeout=90)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert [p for p in pids if alive(p)] == []
    assert not exists(name) and not interface_exists(interface)
    assert child.returncode != 0


KILLED_HOLDER = """
import json, subprocess, time
from base.netns import DatabaseHost
host = DatabaseHost()
host.create()
sleeper = subprocess.Popen(host.command(["sleep", "600"]), start_new_session=True)
print(json.dumps([host.name, host.host_interface, sleeper.pid]), flush=True)
time.sleep(600)
"""


def test_namespace_of_a_killed_run_is_removed_by_the_next_one() -> None:
    child = subprocess.Popen([sys.executable, "-c", KILLED_HOLDER], cwd=REPO_ROOT,
                             env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    name, interface, sleeper = json.loads(child.stdout.readline())
    child.kill()  # SIGKILL: no clean-up of its own can run
    child.wait()
    assert exists(name) and alive(sleeper)
    with DatabaseHost():
        assert not exists(name) and not interface_exists(interface)
    assert not alive(sleeper)


# --- PostgreSQL on its own host ---------------------------------------------------------------


@pytest.fixture(scope="module")
def db_host() -> Iterator[DatabaseHost]:
    with DatabaseHost() as host:
        yield host
    assert gone(host)


@pytest.fixture(scope="module")
def remote_pg(db_host: DatabaseHost, run_dir: Path) -> Iterator[PgServer]:
    # The store's database: the reader role the driver connects as may read its tables.
    with PG_LOADER.database.server(run_dir / "pg", db_host=db_host) as pg:
        PG_LOADER.load(iter(coverage_zones()), pg)
        yield pg


def test_pg_answers_over_the_veth_address(remote_pg: PgServer, db_host: DatabaseHost) -> None:
    assert remote_pg.host == db_host.address
    with remote_pg.connect() as conn:
        server, client = conn.execute("SELECT inet_server_addr(), inet_client_addr()").fetchone()
        (zones,) = conn.execute("SELECT count(*) FROM zones").fetchone()
    assert (str(server), str(client)) == (db_host.address, db_host.peer_address)
    assert zones == len(coverage_zones())


def test_pg_is_not_on_this_hosts_loopback_nor_a_socket(remote_pg: PgServer) -> None:
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"host=127.0.0.1 port={remote_pg.port} dbname=dlz user=dlz "
                        f"password={remote_pg.password}", connect_timeout=3)
    assert not list(remote_pg.run_dir.rglob(".s.PGSQL.*"))
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"host={remote_pg.run_dir / 'socket'} port={remote_pg.port} "
                        f"dbname=dlz user=dlz password={remote_pg.password}", connect_timeout=3)


def test_pg_server_processes_are_inside_the_namespace(remote_pg: PgServer,
                                                      db_host: DatabaseHost) -> None:
    # PostgreSQL forks and ends short-lived processes (autovacuum workers) at any time: one that
    # ended between the two reads once failed the test. Compare a snapshot no process came to
    # or left while it was taken.
    for _ in range(5):
        mine, inside = set(remote_pg.pids()), set(db_host.pids())
        if set(remote_pg.pids()) == mine:
            break
    assert mine <= inside


# --- the pg DLZ driver in named, through the namespace and through the latency proxy ------------


@pytest.fixture(scope="module")
def memory_named(run_dir: Path) -> Iterator[Named]:
    zones = coverage_zones()
    with loaded_store("memory", lambda: iter(zones), run_dir / "memory") as loaded, \
            loaded.dns_server(run_dir / "memory", threads=2) as named:
        yield named


def differences(reference: Named, other: Named, step: int = 1) -> list[str]:
    queries = derive_queries(coverage_zones())[::step]
    assert len(queries) > 100
    return [detail(q, diff) for q in queries
            if (diff := compare_answers(q, ask(reference, q), ask(other, q))) is not None]


def test_pg_driver_answers_the_coverage_set_through_the_namespace(
        remote_pg: PgServer, memory_named: Named, run_dir: Path) -> None:
    if not PG.is_built():
        pytest.fail("the pg driver is not built (run `make build`)")
    body = PG.body(remote_pg, 2)
    assert f"host={remote_pg.host} " in body
    with Named(run_dir / "named-pg-netns", body, threads=2, env=remote_pg.env) as named:
        wrong = differences(memory_named, named)
    assert not wrong, f"{len(wrong)} differ; first ones:\n" + "\n".join(wrong[:5])


@pytest.fixture(scope="module")
def proxied_named(remote_pg: PgServer, db_host: DatabaseHost,
                  run_dir: Path) -> Iterator[tuple[LatencyProxy, Named]]:
    """named over the pg driver reaching the database through a 1 ms latency proxy."""
    with LatencyProxy(run_dir / "toxiproxy", db_host, remote_pg.host, remote_pg.port,
                      1) as proxy:
        remote_pg.via = (proxy.listen_host, proxy.listen_port)
        body = PG.body(remote_pg, 2)
        remote_pg.via = None
        assert f"host={proxy.listen_host} port={proxy.listen_port} " in body
        with Named(run_dir / "named-pg-proxied", body, threads=2, env=remote_pg.env) as named:
            yield proxy, named


@needs_toxiproxy
def test_pg_driver_answers_through_the_latency_proxy(
        proxied_named: tuple[LatencyProxy, Named], memory_named: Named) -> None:
    wrong = differences(memory_named, proxied_named[1], step=10)
    assert not wrong, f"{len(wrong)} differ; first ones:\n" + "\n".join(wrong[:5])


# Run as another user: "connected" when it reaches address:port over TCP, else the error's name.
CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), 5).close()
except OSError as exc:
    sys.exit(type(exc).__name__)
print("connected")
"""


def connection_as(user: str, address: str, port: int) -> str:
    done = subprocess.run(["/usr/bin/python3", "-I", "-c", CONNECT, address, str(port)],
                          capture_output=True, text=True, timeout=30, cwd="/", **as_user(user))
    return (done.stdout or done.stderr).strip()


@needs_toxiproxy
def test_no_other_user_reaches_the_proxys_control_api(
        proxied_named: tuple[LatencyProxy, Named]) -> None:
    """The control API has no authentication: whoever reaches it can point the proxy, and so
    named's database connection, elsewhere. Neither the servers' user (the proxy's own) nor
    any other reaches it, where it listened before (127.0.0.1) nor at the proxy's address."""
    proxy, named = proxied_named
    answer, _ = ask(named, (coverage_zones()[0].origin, "SOA"))
    assert answer.rcode == "NOERROR"  # named is answering through the proxy
    for user in (SERVICE_USER, "nobody"):
        # The user reaches the proxy itself: what is refused below is the control API alone.
        assert connection_as(user, proxy.listen_host, proxy.listen_port) == "connected", user
        for address in ("127.0.0.1", proxy.listen_host):
            assert connection_as(user, address, proxy.api_port) == "ConnectionRefusedError", \
                (user, address)
    assert proxy.version() == "toxiproxy 2.12.0"  # the suite does reach it


# --- the latency proxy ------------------------------------------------------------------------


@needs_toxiproxy
def test_proxy_forwards_real_queries_with_the_requested_toxics(
        remote_pg: PgServer, db_host: DatabaseHost, run_dir: Path) -> None:
    with LatencyProxy(run_dir / "toxiproxy-3", db_host, remote_pg.host, remote_pg.port,
                      3) as proxy:
        assert proxy.listen_host == db_host.address
        toxics = {t["stream"]: t["attributes"]["latency"] for t in proxy.toxics()}
        assert toxics == {"upstream": 2, "downstream": 1}
        via = (f"host={proxy.listen_host} port={proxy.listen_port} dbname=dlz user=dlz "
               f"password={remote_pg.password}")
        with psycopg.connect(via) as conn:
            (zones,) = conn.execute("SELECT count(*) FROM zones").fetchone()
        assert zones == len(coverage_zones())
        added = measure_store_added_rtt(PG_LOADER.database, remote_pg, proxy, samples=5).as_json()
        assert added["requested_ms"] == 3 and added["samples"] == 5
        assert added["tool"] == "toxiproxy 2.12.0"
        pids = proxy.pids()
        assert pids and set(pids) <= set(db_host.pids())
    assert [p for p in pids if alive(p)] == []


@pytest.mark.check
def test_rtt_is_split_into_whole_milliseconds_adding_up() -> None:
    assert [split_rtt(ms) for ms in (1, 2, 5)] == [(1, 0), (1, 1), (3, 2)]


@pytest.mark.check
@pytest.mark.parametrize(("text", "ms"), [("0", 0), ("1", 1), ("2ms", 2), ("5.0", 5)])
def test_good_db_rtt_values(text: str, ms: int) -> None:
    assert parse_db_rtt(text) == ms


@pytest.mark.check
@pytest.mark.parametrize(("text", "why"), [("-1", "must be 0"), ("6", "must be 0"),
                                           ("0.5ms", "whole milliseconds"), ("2s", "expected"),
                                           ("fast", "expected")])
def test_bad_db_rtt_values_are_one_clear_line(text: str, why: str) -> None:
    with pytest.raises(UserError, match=why) as refused:
        parse_db_rtt(text)
    message = str(refused.value)
    assert message.startswith("--db-rtt") and "\n" not in message


# --- MariaDB and slapd on their own host --------------------------------------------------------


def test_mariadb_only_on_the_veth_address(db_host: DatabaseHost, run_dir: Path) -> None:
    with MysqlServer(run_dir / "mariadb", db_host=db_host) as db:
        MYSQL_LOADER.load(iter(coverage_zones()[:5]), db)
        conn = db.connect()
        try:
            cursor = conn.cursor()
            cursor.execute("SELECT count(*), @@bind_address FROM zones")
            assert cursor.fetchone() == (5, db_host.address)
        finally:
            conn.close()
        for elsewhere in ({"host": "127.0.0.1", "port": db.port}, {"unix_socket": db.socket}):
            with pytest.raises(MySQLdb.OperationalError):
                MySQLdb.connect(user=db.user, password=db.password, connect_timeout=3,
                                **elsewhere)
        assert not list(db.run_dir.glob("*.sock"))
        mysql = get_server("mysql")
        assert isinstance(mysql, DlzNamed)
        assert f"host={db_host.address} port={db.port} " in mysql.body(db, 1)
        with LatencyProxy(run_dir / "toxiproxy-mariadb", db_host,
                          *MYSQL_LOADER.database.tcp_endpoint(db), 1) as proxy:
            # The proxy reaches the server from the namespace's own address: the loader's
            # account (tune's round trips) and the driver's are there too.
            for user, password in ((db.user, db.password),
                                   (db.driver_user, db.reader_password)):
                proxied = db.connect(host=proxy.listen_host, port=proxy.listen_port,
                                     user=user, password=password)
                try:
                    cursor = proxied.cursor()
                    cursor.execute("SELECT count(*) FROM zones")
                    assert cursor.fetchone() == (5,), user
                finally:
                    proxied.close()
        pids = db.pids()
        assert set(pids) <= set(db_host.pids())
    assert [p for p in pids if alive(p)] == []


def test_slapd_only_on_the_veth_address(db_host: DatabaseHost, run_dir: Path) -> None:
    slapd = LdapServer(run_dir / "slapd", suffix=SUFFIX, schema_files=[SCHEMA_FILE],
                  indexes=INDEXES, db_host=db_host)
    with slapd:
        ensure_suffix_entry(slapd)
        assert slapd.uri == f"ldap://{db_host.address}:{slapd.port}"
        assert slapd.ldapi_uri is None and not (slapd.run_dir / "ldapi").exists()
        conn = slapd.connect()
        try:
            assert conn.search_s(SUFFIX, ldap.SCOPE_BASE)[0][0] == SUFFIX
        finally:
            conn.unbind_s()
        with pytest.raises(ldap.SERVER_DOWN):
            loopback = ldap.initialize(f"ldap://127.0.0.1:{slapd.port}")
            loopback.set_option(ldap.OPT_NETWORK_TIMEOUT, 3.0)
            loopback.simple_bind_s(slapd.bind_dn, slapd.password)
        ensure_reader_entry(slapd)  # the DLZ driver's account, which the round trips bind as
        with LatencyProxy(run_dir / "toxiproxy-slapd", db_host,
                          *LDAP_LOADER.database.tcp_endpoint(slapd), 1) as proxy:
            proxied = ldap.initialize(f"ldap://{proxy.listen_host}:{proxy.listen_port}")
            proxied.simple_bind_s(slapd.driver_dn, slapd.driver_password)
            try:
                assert proxied.whoami_s() == f"dn:{slapd.driver_dn}"
            finally:
                proxied.unbind_s()
        pids = slapd.pids()
        assert pids and set(pids) <= set(db_host.pids())
    assert [p for p in pids if alive(p)] == []
