"""The private server instances, for real: PostgreSQL, MariaDB and named.

Each one starts and answers, stops without leaving a process behind, runs next to a second
instance, survives a restart with its data, fails with its own log line when it cannot start,
and is cleaned up when the Python process that started it gets SIGINT or SIGTERM.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dns.flags
import dns.rcode
import dns.rdatatype
import MySQLdb
import psycopg
import pytest

from base import process
from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import SERVICE_USER, free_port, port_is_free
from databases.mariadb import MysqlServer
from databases.postgresql import PgServer
from servers.named import Named


def is_running(pid: int) -> bool:
    """A zombie counts as gone: it runs nothing and holds no port (PID 1 may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def still_running(pids: list[int], grace: float = 10.0) -> list[int]:
    """The pids still running once `grace` seconds have passed (SIGKILL is not instant)."""
    deadline = time.monotonic() + grace
    while (left := [pid for pid in pids if is_running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def owner(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return pwd.getpwuid(int(line.split()[1])).pw_name
    raise AssertionError(f"no Uid line for {pid}")


# --- PostgreSQL ---------------------------------------------------------------------------------


def pg_select_one(pg: PgServer) -> int:
    with pg.connect() as conn:
        row = conn.execute("SELECT 1").fetchone()
    return row[0] if row else 0


@pytest.fixture(scope="module")
def pg(run_dir: Path) -> Iterator[PgServer]:
    with PgServer(run_dir / "pg-a") as server:
        yield server


def test_postgres_answers_as_dlz(pg: PgServer):
    assert pg_select_one(pg) == 1
    with pg.connect() as conn:
        assert conn.autocommit is False
        assert conn.execute("SELECT current_user, current_database()").fetchone() == (
            "dlz", "dlz")
    assert pg.version().startswith("PostgreSQL 15.")


def test_postgres_runs_as_the_service_user_on_loopback(pg: PgServer):
    assert owner(pg.pids()[0]) == (SERVICE_USER if os.geteuid() == 0
                                   else pwd.getpwuid(os.geteuid()).pw_name)
    assert Path(pg.host).is_relative_to(pg.run_dir)
    with pg.connect() as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
        assert conn.execute("SHOW fsync").fetchone() == ("off",)
    tcp = pg.conninfo().replace(f"host={pg.host}", "host=127.0.0.1")
    with psycopg.connect(tcp) as conn:
        assert conn.execute("SELECT inet_server_port()").fetchone() == (pg.port,)


def test_postgres_conninfo_is_plain_key_value(pg: PgServer):
    pairs = dict(part.split("=", 1) for part in pg.conninfo().split())
    assert pairs == {"host": pg.host, "port": str(pg.port), "dbname": "dlz", "user": "dlz",
                     "password": pg.password}


def test_postgres_pids_include_backends(pg: PgServer):
    with pg.connect() as conn:
        backend = conn.info.backend_pid
        assert backend in pg.pids()


def test_postgres_restart_keeps_data(pg: PgServer):
    with pg.connect() as conn:
        conn.execute("CREATE TABLE kept (v text)")
        conn.execute("INSERT INTO kept VALUES ('still here')")
        conn.commit()
    before = pg.pids()
    pg.restart()
    assert still_running(before) == []
    with pg.connect() as conn:
        assert conn.execute("SELECT v FROM kept").fetchall() == [("still here",)]


def test_postgres_second_instance_then_stop_leaves_nothing(pg: PgServer, run_dir: Path):
    other = PgServer(run_dir / "pg-b")
    with other:
        assert other.port != pg.port and other.host != pg.host
        assert pg_select_one(other) == 1 and pg_select_one(pg) == 1
        conn = other.connect()  # a live backend must go too
        pids = other.pids()
        assert conn.info.backend_pid in pids
    assert still_running(pids) == []
    assert other.pids() == []
    assert pg_select_one(pg) == 1


def test_postgres_that_cannot_start_reports_its_log(pg: PgServer, run_dir: Path):
    clash = PgServer(run_dir / "pg-clash")
    clash.port = pg.port  # the port is taken by the running instance
    with pytest.raises(UserError) as failure:
        clash.start()
    assert "could not bind IPv4 address" in str(failure.value)
    assert clash.pids() == []


# --- MariaDB ------------------------------------------------------------------------------------


def my_select_one(db: MysqlServer, **kw: object) -> int:
    conn = db.connect(**kw)
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT 1")
        return cursor.fetchone()[0]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def my(run_dir: Path) -> Iterator[MysqlServer]:
    with MysqlServer(run_dir / "my-a") as server:
        yield server


def test_mariadb_answers_over_socket_and_tcp(my: MysqlServer):
    assert my_select_one(my) == 1
    assert my_select_one(my, host="127.0.0.1", port=my.port) == 1
    assert my.version().startswith("MariaDB 10.11.")


def test_mariadb_takes_no_local_file_even_from_a_client_that_offers_one(my: MysqlServer,
                                                                        tmp_path: Path):
    """No client of the suite sends a file (loaders/mysql.py loads with INSERTs), so the
    private server refuses LOAD DATA LOCAL INFILE (local_infile off)."""
    data = tmp_path / "rows.tsv"
    data.write_text("a\nb\nc\n")
    conn = my.connect(local_infile=1)
    try:
        cursor = conn.cursor()
        cursor.execute("CREATE TABLE offered (v VARCHAR(10))")
        with pytest.raises(MySQLdb.Error):
            cursor.execute(f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE offered")
        cursor.execute("SELECT COUNT(*) FROM offered")
        assert cursor.fetchone() == (0,)
    finally:
        conn.close()


def test_mariadb_restart_keeps_data(my: MysqlServer):
    conn = my.connect()
    try:
        conn.cursor().execute("CREATE TABLE kept (v VARCHAR(20)) ENGINE=InnoDB")
        conn.cursor().execute("INSERT INTO kept VALUES ('still here')")
        conn.commit()
    finally:
        conn.close()
    before = my.pids()
    my.restart()
    assert still_running(before) == []
    conn = my.connect()
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT v FROM kept")
        assert cursor.fetchall() == (("still here",),)
    finally:
        conn.close()


def test_mariadb_second_instance_then_stop_leaves_nothing(my: MysqlServer, run_dir: Path):
    other = MysqlServer(run_dir / "my-b")
    with other:
        assert other.port != my.port and other.socket != my.socket
        assert my_select_one(other) == 1 and my_select_one(my) == 1
        pids = other.pids()
        assert pids
    assert still_running(pids) == []
    assert other.pids() == []
    assert my_select_one(my) == 1


def test_mariadb_that_cannot_start_reports_its_log(my: MysqlServer, run_dir: Path):
    clash = MysqlServer(run_dir / "my-clash")
    clash.port = my.port
    with pytest.raises(UserError) as failure:
        clash.start()
    assert "Address already in use" in str(failure.value)
    assert clash.pids() == []


# --- named --------------------------------------------------------------------------------------

ZONE = """$TTL 300
@    IN SOA ns1 hostmaster 1 3600 600 86400 300
@    IN NS  ns1
ns1  IN A   192.0.2.53
www  IN A   192.0.2.1
"""


def zone_body(zone_file: Path) -> str:
    return f'zone "example.test" {{ type primary; file "{zone_file}"; }};'


@pytest.fixture(scope="module")
def zone_file(run_dir: Path) -> Path:
    path = run_dir / "example.test.db"
    path.write_text(ZONE)
    return path


@pytest.fixture(scope="module")
def ns(run_dir: Path, zone_file: Path) -> Iterator[Named]:
    with Named(run_dir / "ns-a", zone_body(zone_file), threads=2) as server:
        yield server


def answer_of(ns: Named, qname: str, rdtype: str = "A", *, tcp: bool = False) -> list[str]:
    response = ns.query(qname, rdtype, tcp=tcp)
    assert response.flags & dns.flags.AA
    return sorted(rdata.to_text() for rrset in response.answer for rdata in rrset)


@pytest.mark.check
def test_server_ports_are_never_ephemeral() -> None:
    """A client's source port can take an ephemeral port between our check and the bind."""
    floor = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(20000 <= free_port() < floor for _ in range(200))


def _free_ports(count: int) -> list[int]:
    return [port for port in range(24000, 25000) if port_is_free(port)][:count]


@pytest.mark.check
def test_a_port_handed_out_is_not_handed_out_again_before_its_server_binds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two pickers at once (two test workers, two fleets started together) once got the same
    port, and mariadbd then exited with "Address already in use"."""
    first, second = _free_ports(2)
    monkeypatch.setattr(process, "PORT_RESERVATIONS", tmp_path / "ports.json")
    draws = iter([first, first, second])
    monkeypatch.setattr(process.random, "randint", lambda low, high: next(draws))
    assert (free_port(), free_port()) == (first, second)


@pytest.mark.check
def test_a_reservation_lapses_and_a_damaged_record_reserves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (port,) = _free_ports(1)
    record = tmp_path / "ports.json"
    monkeypatch.setattr(process, "PORT_RESERVATIONS", record)
    monkeypatch.setattr(process.random, "randint", lambda low, high: port)
    record.write_text(json.dumps({str(port): time.time() - 601}))
    assert free_port() == port
    record.write_text(f'{{"{port}": 1')  # a writer killed mid-write
    assert free_port() == port
    with pytest.raises(UserError, match="no free loopback port"):
        free_port()  # the one port it may draw is now reserved


def test_named_answers_udp_and_tcp(ns: Named):
    assert answer_of(ns, "www.example.test") == ["192.0.2.1"]
    assert answer_of(ns, "www.example.test", tcp=True) == ["192.0.2.1"]
    assert ns.query("nothing.example.test", "A").rcode() == dns.rcode.NXDOMAIN
    ns.wait_answers("example.test")  # returns once answered, raises otherwise
    soa = ns.query("example.test", "SOA")
    assert soa.flags & dns.flags.AA
    assert [rrset.rdtype for rrset in soa.answer] == [dns.rdatatype.SOA]
    assert ns.version().startswith(f"BIND {ns.bind.version}.")  # 9.18, or DLZBENCH_BIND's


def test_named_is_entered_once_its_zone_files_have_loaded(run_dir: Path, zone_file: Path):
    """named may answer (SERVFAIL) before a zone file has loaded; entering waits for the load.

    A race: answering before the load took about one start in ten here, hence the repeats.
    """
    for attempt in range(16):
        with Named(run_dir / f"ns-enter-{attempt}", zone_body(zone_file), threads=2) as server:
            assert answer_of(server, "www.example.test") == ["192.0.2.1"]


def test_named_keeps_its_files_in_run_dir(ns: Named):
    assert ns.conf_path.parent == ns.run_dir and ns.log_path.parent == ns.run_dir
    assert (ns.run_dir / "named.pid").read_text().strip() == str(ns.pids()[0])
    assert "running" in ns.log_path.read_text()


def test_named_reload_picks_up_new_data(ns: Named, zone_file: Path):
    zone_file.write_text(ZONE.replace("hostmaster 1 ", "hostmaster 2 ")
                         + "new  IN A   192.0.2.2\n")
    ns.reload()
    deadline = time.monotonic() + 30
    while not answer_of(ns, "new.example.test") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert answer_of(ns, "new.example.test") == ["192.0.2.2"]


def test_named_second_instance_then_stop_leaves_nothing(ns: Named, run_dir: Path,
                                                        zone_file: Path):
    other = Named(run_dir / "ns-b", zone_body(zone_file))
    with other:
        assert other.port != ns.port
        assert answer_of(other, "www.example.test") == ["192.0.2.1"]
        assert answer_of(ns, "www.example.test") == ["192.0.2.1"]
        pids = other.pids()
        assert pids
    assert still_running(pids) == []
    assert other.pids() == []


def test_named_start_again_after_stop(run_dir: Path, zone_file: Path):
    server = Named(run_dir / "ns-again", zone_body(zone_file))
    started: list[list[int]] = []
    for _ in range(2):
        server.start()
        try:
            server.wait_answers("www.example.test", "A")
            assert answer_of(server, "www.example.test") == ["192.0.2.1"]
        finally:
            pids = server.pids()
            server.stop()
        assert pids and still_running(pids) == []
        started.append(pids)
    assert not set(started[0]) & set(started[1])  # the second answer came from a new named


def test_named_broken_config_fails_with_its_error_line(run_dir: Path):
    server = Named(run_dir / "ns-broken", 'zone "x.test" { type primary; no-such-option; };')
    with pytest.raises(UserError) as failure:
        server.__enter__()
    assert "unknown option 'no-such-option'" in str(failure.value)
    assert server.pids() == []


def test_named_driver_that_will_not_load_fails_with_log_line(run_dir: Path):
    body = 'dlz "broken" { database "dlopen /nonexistent/dlz_none.so"; };'
    server = Named(run_dir / "ns-nodriver", body)
    with pytest.raises(UserError) as failure:
        server.__enter__()
    assert "dlz_dlopen failed to open library" in str(failure.value)
    assert server.pids() == []


def test_named_wait_answers_times_out_with_log(run_dir: Path):
    server = Named(run_dir / "ns-nozone", 'zone "x.test" { type primary; file "missing.db"; };')
    server.start()
    with pytest.raises(UserError) as failure:
        server.wait_answers("x.test", timeout=2)
    assert "file not found" in str(failure.value)
    assert server.pids() == []


def test_named_wait_answers_stops_at_a_zone_that_failed_to_load(run_dir: Path):
    """A zone named will not load never answers: waiting stops at its log line, not the timeout."""
    zone = run_dir / "too-many.db"
    mx = "".join(f"@ 3600 IN MX {i} mail{i}.x.test.\n" for i in range(101))
    zone.write_text("$TTL 3600\n@ IN SOA ns.x.test. host.x.test. 1 3600 600 86400 60\n"
                    f"@ IN NS ns.x.test.\nns IN A 192.0.2.1\n{mx}")
    server = Named(run_dir / "ns-toomany", f'zone "x.test" {{ type primary; file "{zone}"; }};')
    server.start()
    with pytest.raises(UserError) as failure:
        server.wait_answers("x.test", timeout=300)
    assert "zone x.test/IN: not loaded due to errors." in str(failure.value)
    assert "too many records" in str(failure.value)
    assert server.pids() == []


# --- interrupted by a signal --------------------------------------------------------------------

# Runs in a child Python: start one server, print its pids, then wait to be signalled.
CHILD = """
import json, sys, time
from pathlib import Path
from servers.named import Named
from databases.postgresql import PgServer

kind, run_dir = sys.argv[1], Path(sys.argv[2])
if kind == "postgres":
    server = PgServer(run_dir)
else:
    run_dir.mkdir(parents=True)
    (run_dir / "z.db").write_text(sys.argv[3])
    server = Named(run_dir / "ns", sys.argv[4])
with server:
    if kind == "postgres":
        conn = server.connect()
    print(json.dumps(server.pids()), flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize(("kind", "sig"), [("named", signal.SIGINT), ("named", signal.SIGTERM),
                                           ("postgres", signal.SIGINT),
                                           ("postgres", signal.SIGTERM)])
def test_signal_to_owner_stops_server(kind: str, sig: signal.Signals, run_dir: Path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    own_dir = run_dir / f"sig-{kind}-{sig.name}"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, str(own_dir), ZONE, zone_body(own_dir / "z.db")],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, f"child failed: {child.communicate(timeout=30)[1]}"
        pids = json.loads(line)
        assert len(pids) >= (2 if kind == "postgres" else 1)
        child.send_signal(sig)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    left = still_running(pids)
    for pid in left:  # so that a failing test does not leave a server behind either
        os.kill(pid, signal.SIGKILL)
    assert left == []
    assert child.returncode != 0
