"""`--store-url`: the pg, mysql and ldap stores on a server the suite did not start.

The "external" servers are the suite's own private PostgreSQL, MariaDB and slapd, started here
by the test as an operator would run theirs: with an account that needs a password, a database
(an LDAP subtree) lent to the suite, and one that holds someone else's table (entries). The
bench commands get only the URL (and the standard environment), and must answer through the
drivers, refuse the other databases, stop nothing they did not start, and never show the password.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import dns.flags
import dns.message
import dns.query
import ldap
import MySQLdb
import psycopg
import pytest

from base.paths import REPO_ROOT
from base.process import descendants, free_port, give_to_service_user
from base.transports import OPENSSL, TlsFiles, self_signed
from bench.measure.results import read_results_file
from databases.mariadb import MysqlServer
from databases.postgresql import PgServer
from databases.slapd import PASSWORD_ENV, LdapServer
from databases.url import redact
from loaders.ldap import INDEXES, SCHEMA_FILE, ZONE_CLASS
from tests.at_once import results_at_once
from tests.benchcli import bench_env, processes_under, run_bench

PASSWORD = "Pw-7f3kq9Zx"
USER = "ext"
FOREIGN_ROWS = 3
# The lent slapd's database: the suite is lent ou=own (which it creates) and ou=shared (which
# holds ou=customers and its entries), bound to as the database's rootdn.
LDAP_BASE = "dc=example,dc=net"
LDAP_ADMIN = f"cn=admin,{LDAP_BASE}"


@dataclass
class Lent:
    """A server as an operator runs it: the URLs of its lent database (`own`), of one holding
    a table of theirs (`shared`), and of one holding a table named like the suite's. On an
    LDAP server each is the subtree ou=NAME under `under`, bound to as `user`."""

    scheme: str
    port: int
    user: str = USER
    under: str = ""
    # The certificate its TLS listener presents (self-signed: its own CA), if it has one.
    ca: Path | None = None

    def where(self, database: str) -> str:
        """The database's name, or the suffix DN of the LDAP subtree of that name."""
        return f"ou={database},{self.under}" if self.under else database

    def url(self, database: str, *, password: bool = True, user: bool = True,
            host: str | None = None) -> str:
        account = self.user + (f":{PASSWORD}" if password else "") + "@" if user else ""
        return (f"{self.scheme}://{account}{host or f'127.0.0.1:{self.port}'}/"
                f"{self.where(database)}")


@pytest.fixture(scope="module")
def lent_pg(run_dir: Path) -> Iterator[tuple[Lent, PgServer]]:
    with PgServer(run_dir / "lent-pg") as pg:
        with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")
            for database in ("own", "shared", "clash", "tls"):
                conn.execute(f"CREATE DATABASE {database} OWNER {USER}")
        _foreign_table(pg, "shared", "customers")
        _foreign_table(pg, "clash", "zones")
        # TLS too, which database tls demands; passwords on TCP from now on; this test's own
        # superuser keeps the socket.
        tls = self_signed(run_dir / "lent-pg-tls")
        with open(pg.data_dir / "postgresql.conf", "a") as conf:
            conf.write(f"ssl = on\nssl_cert_file = '{tls.cert}'\nssl_key_file = '{tls.key}'\n")
        (pg.data_dir / "pg_hba.conf").write_text(
            "local all all trust\nhostnossl tls all 127.0.0.1/32 reject\n"
            "host all all 127.0.0.1/32 scram-sha-256\n")
        with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")
        _wait_until_pg_wants_the_password(pg.port)
        yield Lent("postgresql", pg.port, ca=tls.cert), pg


def _foreign_table(pg: PgServer, database: str, table: str) -> None:
    with psycopg.connect(f"{pg.conninfo()} dbname={database} user={USER} password={PASSWORD}",
                         autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id integer)")
        conn.execute(f"INSERT INTO {table} SELECT generate_series(1, {FOREIGN_ROWS})")


def _wait_until_pg_wants_the_password(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            psycopg.connect(host="127.0.0.1", port=port, dbname="own", user=USER,
                            password="wrong").close()
        except psycopg.OperationalError:
            return
        assert time.monotonic() < deadline, "pg_hba.conf reload never took effect"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def lent_mysql(run_dir: Path) -> Iterator[tuple[Lent, MysqlServer]]:
    with MysqlServer(run_dir / "lent-mysql") as db:
        conn = MySQLdb.connect(unix_socket=db.socket, user="root")
        try:
            cursor = conn.cursor()
            cursor.execute(f"CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'")
            for database in ("own", "shared", "clash"):
                cursor.execute(f"CREATE DATABASE {database}")
                cursor.execute(f"GRANT ALL ON {database}.* TO '{USER}'@'127.0.0.1'")
            for database, table in (("shared", "customers"), ("clash", "zones")):
                cursor.execute(f"CREATE TABLE {database}.{table} (id integer)")
                cursor.execute(f"INSERT INTO {database}.{table} VALUES (1), (2), (3)")
            conn.commit()
        finally:
            conn.close()
        yield Lent("mysql", db.port), db


@pytest.fixture(scope="module")
def lent_ldap(run_dir: Path) -> Iterator[tuple[Lent, LdapServer]]:
    with _with_monitor(LdapServer(run_dir / "lent-ldap", suffix=LDAP_BASE,
                                  schema_files=[SCHEMA_FILE], indexes=INDEXES,
                                  password=PASSWORD)) as slapd:
        _add_entries(slapd, [
            (LDAP_BASE, {"objectClass": [b"dcObject", b"organization"], "dc": [b"example"],
                         "o": [b"example"]}),
            (f"ou=shared,{LDAP_BASE}", {"objectClass": [b"organizationalUnit"],
                                        "ou": [b"shared"]}),
            (f"ou=readonly,{LDAP_BASE}", {"objectClass": [b"organizationalUnit"],
                                          "ou": [b"readonly"]}),
            (f"ou=customers,ou=shared,{LDAP_BASE}", {"objectClass": [b"organizationalUnit"],
                                                     "ou": [b"customers"]}),
            *((f"cn=c{i},ou=customers,ou=shared,{LDAP_BASE}",
               {"objectClass": [b"device"], "cn": [f"c{i}".encode()]})
              for i in range(FOREIGN_ROWS)),
        ])
        yield Lent("ldap", slapd.port, LDAP_ADMIN, LDAP_BASE), slapd


def _with_monitor(slapd: LdapServer) -> LdapServer:
    """The server with OpenLDAP's cn=Monitor, as operators often run it: where the suite reads
    the server's version (slapd.conf is read again at start); and without the suite's access
    rules (its reader alone may read), so slapd's default applies: anyone reads."""
    lines = slapd.config_path.read_text().splitlines(keepends=True)
    slapd.config_path.write_text("".join(line for line in lines if not line.startswith("access "))
                                 + "database monitor\n")
    return slapd


def loopback_certificate(directory: Path) -> TlsFiles:
    """A self-signed key and certificate for 127.0.0.1 (its subjectAltName), the key the
    servers' user's: a client that checks the host name, as libldap does, accepts it."""
    directory.mkdir(parents=True)
    files = TlsFiles(directory / "server.key", directory / "server.crt")
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(files.key), "-out", str(files.cert)],
                   check=True, capture_output=True)
    give_to_service_user(files.key)
    return files


@pytest.fixture(scope="module")
def tls_ldap(run_dir: Path) -> Iterator[tuple[Lent, LdapServer]]:
    """A slapd that offers StartTLS, logging every operation (which connection ran StartTLS
    before its bind)."""
    tls = loopback_certificate(run_dir / "lent-ldap-tls")
    slapd = LdapServer(run_dir / "tls-ldap", suffix=LDAP_BASE, schema_files=[SCHEMA_FILE],
                       indexes=INDEXES, password=PASSWORD, log_level="stats")
    config = slapd.config_path.read_text()
    slapd.config_path.write_text(config.replace(
        "database mdb", f'TLSCertificateFile "{tls.cert}"\n'
                        f'TLSCertificateKeyFile "{tls.key}"\ndatabase mdb', 1))
    with slapd:
        _add_entries(slapd, [(LDAP_BASE, {"objectClass": [b"dcObject", b"organization"],
                                          "dc": [b"example"], "o": [b"example"]})])
        yield Lent("ldap", slapd.port, LDAP_ADMIN, LDAP_BASE, ca=tls.cert), slapd


class TlsMysqlServer(MysqlServer):
    """A MariaDB that offers TLS with the given key and certificate."""

    def __init__(self, run_dir: Path, tls: TlsFiles) -> None:
        super().__init__(run_dir)
        self.tls = tls

    def _server_argv(self) -> list[str]:
        return [*super()._server_argv(), f"--ssl-cert={self.tls.cert}",
                f"--ssl-key={self.tls.key}"]


@pytest.fixture(scope="module")
def tls_mysql(run_dir: Path) -> Iterator[Lent]:
    """A MariaDB whose account for the suite must connect over TLS (REQUIRE SSL)."""
    tls = loopback_certificate(run_dir / "lent-mysql-tls")
    with TlsMysqlServer(run_dir / "tls-mysql", tls) as db:
        conn = MySQLdb.connect(unix_socket=db.socket, user="root")
        try:
            cursor = conn.cursor()
            cursor.execute(f"CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}' "
                           "REQUIRE SSL")
            cursor.execute("CREATE DATABASE own")
            cursor.execute(f"GRANT ALL ON own.* TO '{USER}'@'127.0.0.1'")
            conn.commit()
        finally:
            conn.close()
        yield Lent("mysql", db.port, ca=tls.cert)


@pytest.fixture(scope="module")
def bare_ldap(run_dir: Path) -> Iterator[Lent]:
    """A slapd whose schema is OpenLDAP's core alone: not the suite's."""
    with LdapServer(run_dir / "bare-ldap", suffix=LDAP_BASE, schema_files=[], indexes=[],
                    password=PASSWORD) as slapd:
        yield Lent("ldap", slapd.port, LDAP_ADMIN, LDAP_BASE)


def _add_entries(slapd: LdapServer, entries: list[tuple[str, dict[str, list[bytes]]]]) -> None:
    conn = slapd.connect()
    try:
        for dn, attrs in entries:
            conn.add_s(dn, list(attrs.items()))
    finally:
        conn.unbind_s()


def _ldap_count(slapd: LdapServer, base: str, filterstr: str) -> int:
    """Entries at or under base matching filterstr (0 when base does not exist)."""
    conn = slapd.connect()
    try:
        return len(conn.search_s(base, ldap.SCOPE_SUBTREE, filterstr, ["1.1"]))
    except ldap.NO_SUCH_OBJECT:
        return 0
    finally:
        conn.unbind_s()


def _password_nowhere(run_root: Path, *texts: str) -> None:
    """Not in the command's output, nor in any file it wrote (named.conf, logs, results)."""
    for text in texts:
        assert PASSWORD not in text
    for path in run_root.rglob("*"):
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path


def _verify_4_zones_through(root: Path, store: str, url: str) -> None:
    """`verify` of 4 generated zones with the store at url: every answer as native BIND's but
    for the known classes (exit 0), and the password in no output or file."""
    done = run_bench(root, "verify", "--generate", "4", "--records", "6", "--servers", store,
                     "--store-url", f"{store}={url}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"^{store}: \d+/\d+ identical", done.stdout, re.MULTILINE), done.stdout
    _password_nowhere(root, done.stdout, done.stderr)


def _serve_answers_and_stops(root: Path, store: str, url: str, env: dict[str, str],
                             *options: str) -> str:
    """`serve` of 3 zones from the store at url (and options): its first zone's SOA answered
    with AA, the password in no environment or command line of the processes it started
    (/proc/PID/environ, /proc/PID/cmdline) nor in its own command line; then SIGTERM stops it
    (exit 130); what it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "bench", "serve", "--server", store,
                             "--generate", "3", "--store-url", f"{store}={url}", *options],
                            cwd=REPO_ROOT, env={**bench_env(root), **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    match = re.search(r"port (\d+)", first)
    assert match, first + proc.stdout.read()
    second = proc.stdout.readline()
    zone = second.split()[-2]  # "try: dig @127.0.0.1 -p N <zone>. SOA"
    response = dns.query.udp(dns.message.make_query(zone, "SOA"), "127.0.0.1",
                             port=int(match[1]), timeout=5)
    assert response.flags & dns.flags.AA and response.answer
    assert PASSWORD.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    started = descendants(proc.pid)
    assert any(b"named" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in started)
    for pid in started:
        for part in ("environ", "cmdline"):
            assert PASSWORD.encode() not in Path(f"/proc/{pid}/{part}").read_bytes(), (pid, part)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    return first + second + proc.stdout.read()


def _pg_rows(pg: PgServer, database: str, statement: str) -> int:
    with psycopg.connect(f"{pg.conninfo()} dbname={database}") as conn:
        row = conn.execute(statement).fetchone()
    assert row is not None
    return int(row[0])


def _mysql_rows(db: MysqlServer, database: str, statement: str) -> int:
    conn = MySQLdb.connect(unix_socket=db.socket, user="root", database=database)
    try:
        cursor = conn.cursor()
        cursor.execute(statement)
        return int(cursor.fetchone()[0])
    finally:
        conn.close()


# --- answers through the drivers ------------------------------------------------------------

def test_pg_verify_through_a_url_with_password(lent_pg: tuple[Lent, PgServer],
                                               run_root: Path) -> None:
    lent, pg = lent_pg
    root = run_root / "pg-verify"
    _verify_4_zones_through(root, "pg", lent.url("own"))
    assert _pg_rows(pg, "own", "SELECT count(*) FROM zones") == 4
    # A private server's log outlives its data (keep_only_logs): none was started.
    assert not list(root.rglob("postgres.log"))
    assert processes_under(root) == []


def test_mysql_verify_with_the_account_from_my_cnf(lent_mysql: tuple[Lent, MysqlServer],
                                                    run_root: Path) -> None:
    lent, db = lent_mysql
    root = run_root / "mysql-verify"
    home = run_root / "home"  # outside root: the password is in this file, by design
    home.mkdir()
    (home / ".my.cnf").write_text(f"[client]\nuser = {USER}\npassword = {PASSWORD}\n")
    (home / ".my.cnf").chmod(0o600)
    done = run_bench(root, "verify", "--generate", "4", "--records", "6", "--servers", "mysql",
                     "--store-url", f"mysql={lent.url('own', user=False)}", env={"HOME": str(home)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^mysql: \d+/\d+ identical", done.stdout, re.MULTILINE), done.stdout
    _password_nowhere(root, done.stdout, done.stderr)
    assert _mysql_rows(db, "own", "SELECT count(*) FROM zones") == 4
    assert not list(root.rglob("mariadb.log")), "no MariaDB of its own was started"
    assert processes_under(root) == []


def test_pg_serve_with_the_password_from_a_pgpass_file(lent_pg: tuple[Lent, PgServer],
                                                       run_root: Path) -> None:
    lent, pg = lent_pg
    root = run_root / "pg-serve"
    root.mkdir()
    passfile = root / "pgpass"
    passfile.write_text(f"127.0.0.1:{lent.port}:own:{USER}:{PASSWORD}\n")
    passfile.chmod(0o600)
    output = _serve_answers_and_stops(root, "pg", lent.url("own", password=False),
                                      {"PGPASSFILE": str(passfile)})
    passfile.unlink()
    _password_nowhere(root, output)
    assert processes_under(root) == []
    # The lent server was not stopped: it still answers.
    assert _pg_rows(pg, "own", "SELECT count(*) FROM zones") == 3


def test_pg_serve_with_the_password_from_a_password_file(lent_pg: tuple[Lent, PgServer],
                                                         run_root: Path) -> None:
    """--store-password-file: the password neither in the URL on the command line nor in the
    environment."""
    lent, _ = lent_pg
    root = run_root / "pg-serve-password-file"
    root.mkdir()
    secret = root / "pg.password"
    secret.write_text(f"{PASSWORD}\n")
    secret.chmod(0o600)
    output = _serve_answers_and_stops(root, "pg", lent.url("own", password=False), {},
                                      "--store-password-file", f"pg={secret}")
    secret.unlink()
    _password_nowhere(root, output)
    assert processes_under(root) == []


def test_a_password_file_needs_its_url_and_no_other_password(lent_pg: tuple[Lent, PgServer],
                                                             run_root: Path) -> None:
    lent, _ = lent_pg
    root = run_root / "pg-password-file-refused"
    root.mkdir()
    secret = root / "pg.password"
    secret.write_text(f"{PASSWORD}\n")
    for options, said in ((["--store-url", f"pg={lent.url('own')}"], "give it once"),
                          ([], "no --store-url for the pg store")):
        line = _one_error_line(run_bench(root, "load", "--stores", "pg", "--generate", "2",
                                         *options, "--store-password-file", f"pg={secret}"))
        assert said in line, line
    secret.write_text("\n")
    line = _one_error_line(run_bench(root, "load", "--stores", "pg", "--generate", "2",
                                     "--store-url", f"pg={lent.url('own', password=False)}",
                                     "--store-password-file", f"pg={secret}"))
    assert "holds no password" in line, line


def test_pg_serve_verifies_a_lent_server_over_tls(lent_pg: tuple[Lent, PgServer],
                                                  run_root: Path) -> None:
    """?sslmode=verify-ca&sslrootcert=: the suite's connections and named's driver (a
    database that refuses any connection without TLS) verify the server's certificate; one
    signed by another CA is refused before anything starts."""
    lent, pg = lent_pg
    root = run_root / "pg-serve-tls"
    url = f"{lent.url('tls', password=False)}?sslmode=verify-ca&sslrootcert={lent.ca}"
    output = _serve_answers_and_stops(root, "pg", url, {"PGPASSWORD": PASSWORD})
    _password_nowhere(root, output)
    assert _pg_rows(pg, "tls", "SELECT count(*) FROM zones") == 3
    other = self_signed(run_root / "other-ca")
    line = _one_error_line(run_bench(root, "load", "--stores", "pg", "--generate", "2",
                                     "--store-url", f"pg={lent.url('tls')}?sslmode=verify-ca"
                                                    f"&sslrootcert={other.cert}"))
    assert "certificate verify failed" in line, line
    # Without TLS the database refuses: what the driver met, had the URL's TLS not reached it.
    line = _one_error_line(run_bench(root, "load", "--stores", "pg", "--generate", "2",
                                     "--store-url", f"pg={lent.url('tls')}?sslmode=disable"))
    assert "no encryption" in line, line


def _run_tiny(root: Path, store: str, lent: Lent) -> subprocess.CompletedProcess[str]:
    return run_bench(root, "run", "--profile", "tiny", "--servers", store,
                     "--out", str(root / "results"), "--store-url", f"{store}={lent.url('own')}")


@pytest.fixture(scope="module")
def tiny_runs(lent_mysql: tuple[Lent, MysqlServer], lent_ldap: tuple[Lent, LdapServer],
              run_root: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """A tiny `run` through each lent server, the two made at once (each with its own run
    root and lent server): a run is mostly fixed-length dnsperf runs and servers' starts, so
    the two overlap (one after the other: 30 s of the suite on 2 vCPUs)."""
    lents = {"mysql": lent_mysql[0], "ldap": lent_ldap[0]}
    return results_at_once({store: partial(_run_tiny, run_root / f"{store}-run", store, lent)
                            for store, lent in lents.items()})


@pytest.mark.parametrize("store,server", [("mysql", "MariaDB 10.11."), ("ldap", "OpenLDAP 2.5.")])
def test_run_tiny_accounts_no_cpu_of_a_lent_server(
        store: str, server: str, run_root: Path, request: pytest.FixtureRequest,
        tiny_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    lent, _ = request.getfixturevalue(f"lent_{store}")
    root = run_root / f"{store}-run"
    out = root / "results"
    done = tiny_runs[store]
    assert done.returncode == 0, done.stdout + done.stderr
    _password_nowhere(root, done.stdout, done.stderr)
    results = read_results_file(out)
    assert results["meta"]["store_urls"][store].startswith(
        lent.url("own").replace(PASSWORD, "***") + f" ({server}")
    (cell,) = [c for c in results["cells"] if c["server"] == store]
    assert cell["status"] == "ok", cell
    assert cell["cpu_us_per_query"]["db"] is None
    assert cell["peak_rss_kb"]["db"] is None
    assert cell["cpu_us_per_query"]["server"] is not None
    assert processes_under(root) == []


def test_ldap_verify_through_a_url_with_password(lent_ldap: tuple[Lent, LdapServer],
                                                 run_root: Path) -> None:
    lent, slapd = lent_ldap
    root = run_root / "ldap-verify"
    _verify_4_zones_through(root, "ldap", lent.url("own"))
    # ou=own did not exist: the suite created it, and its zones are under it.
    assert _ldap_count(slapd, lent.where("own"), f"(objectClass={ZONE_CLASS.decode()})") == 4
    assert not list(root.rglob("slapd.log")), "no slapd of its own was started"
    assert processes_under(root) == []


def test_ldap_serve_through_its_socket_with_the_password_from_the_environment(
        lent_ldap: tuple[Lent, LdapServer], run_root: Path) -> None:
    lent, slapd = lent_ldap
    root = run_root / "ldap-serve"
    assert slapd.ldapi_uri is not None
    socket = slapd.ldapi_uri.removeprefix("ldapi://")  # the path, percent-encoded
    url = replace(lent, scheme="ldapi").url("own", password=False, host=socket)
    output = _serve_answers_and_stops(root, "ldap", url, {PASSWORD_ENV: PASSWORD})
    _password_nowhere(root, output)
    assert processes_under(root) == []
    # The lent server was not stopped: it still answers, with the suite's zones in it.
    assert _ldap_count(slapd, lent.where("own"), f"(objectClass={ZONE_CLASS.decode()})") == 3


def test_ldap_serve_binds_only_after_starttls(tls_ldap: tuple[Lent, LdapServer],
                                             run_root: Path) -> None:
    """?starttls=yes&tls_cacert=: every connection to the lent server, the suite's and the
    driver's inside named, runs StartTLS, the server's certificate verified, before it binds;
    a certificate of another CA is one error line."""
    lent, slapd = tls_ldap
    root = run_root / "ldap-serve-tls"
    seen = slapd.log_path.stat().st_size
    url = f"{lent.url('own', password=False)}?starttls=yes&tls_cacert={lent.ca}"
    output = _serve_answers_and_stops(root, "ldap", url, {PASSWORD_ENV: PASSWORD})
    _password_nowhere(root, output)
    with open(slapd.log_path, "rb") as log:
        log.seek(seen)
        text = log.read().decode(errors="replace")
    binds = set(re.findall(r"conn=(\d+) op=\d+ BIND dn=", text))
    tls = set(re.findall(r"conn=(\d+) op=0 STARTTLS", text))
    assert len(binds) >= 3 and binds <= tls, text[-3000:]  # the checks, the loader, named
    other = loopback_certificate(run_root / "other-ldap-ca")
    line = _one_error_line(run_bench(root, "load", "--stores", "ldap", "--generate", "2",
                                     "--store-url", f"ldap={lent.url('own')}?starttls=yes"
                                                    f"&tls_cacert={other.cert}"))
    assert "StartTLS failed" in line and str(other.cert) in line, line


def test_mysql_serve_verifies_a_lent_server_over_tls(tls_mysql: Lent, run_root: Path) -> None:
    """?tls_ca=: the suite's connections and the driver's inside named demand TLS (the
    account is REQUIRE SSL) and verify the server's certificate and host name; a certificate
    of another CA, or no ?tls_ca= against that account, is one error line."""
    root = run_root / "mysql-serve-tls"
    url = f"{tls_mysql.url('own', password=False)}?tls_ca={tls_mysql.ca}"
    output = _serve_answers_and_stops(root, "mysql", url, {"MYSQL_PWD": PASSWORD})
    _password_nowhere(root, output)
    other = loopback_certificate(run_root / "other-mysql-ca")
    line = _one_error_line(run_bench(root, "load", "--stores", "mysql", "--generate", "2",
                                     "--store-url", f"mysql={tls_mysql.url('own')}"
                                                    f"?tls_ca={other.cert}"))
    assert "cannot connect" in line and "certificate" in line.lower(), line
    line = _one_error_line(run_bench(root, "load", "--stores", "mysql", "--generate", "2",
                                     "--store-url", f"mysql={tls_mysql.url('own')}"))
    assert "Access denied" in line, line


# --- refusals ----------------------------------------------------------------------------------

@pytest.fixture(params=["pg", "mysql", "ldap"])
def lent(request: pytest.FixtureRequest) -> tuple[str, Lent, object]:
    lent, server = request.getfixturevalue(f"lent_{request.param}")
    return request.param, lent, server


@pytest.fixture(params=["pg", "mysql"])
def lent_sql(request: pytest.FixtureRequest) -> tuple[str, Lent, object]:
    """A lent SQL database: where a table can be named like one of the suite's."""
    lent, server = request.getfixturevalue(f"lent_{request.param}")
    return request.param, lent, server


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    return lines[0]


def _foreign_rows(store: str, server: object, database: str, table: str) -> int:
    if store == "ldap":
        assert isinstance(server, LdapServer)
        return _ldap_count(server, f"ou={table},ou={database},{LDAP_BASE}", "(objectClass=device)")
    statement = f"SELECT count(*) FROM {table}"
    if store == "pg":
        assert isinstance(server, PgServer)
        return _pg_rows(server, database, statement)
    assert isinstance(server, MysqlServer)
    return _mysql_rows(server, database, statement)


def _has_suite_tables(store: str, server: object, database: str) -> bool:
    if store == "ldap":
        assert isinstance(server, LdapServer)
        return bool(_ldap_count(server, f"ou={database},{LDAP_BASE}",
                                f"(objectClass={ZONE_CLASS.decode()})"))
    if store == "pg":
        assert isinstance(server, PgServer)
        return bool(_pg_rows(server, database, "SELECT count(*) FROM pg_tables WHERE "
                                               "tablename = 'records'"))
    assert isinstance(server, MysqlServer)
    return bool(_mysql_rows(server, database, "SELECT count(*) FROM information_schema.tables "
                                               "WHERE table_schema = DATABASE() "
                                               "AND table_name = 'records'"))


def test_refuses_a_database_holding_other_objects(lent: tuple[str, Lent, object],
                                                  run_root: Path) -> None:
    store, where, server = lent
    url = where.url("shared")
    root = run_root / f"{store}-shared"
    line = _one_error_line(run_bench(root, "load", "--stores", store, "--generate", "2",
                                     "--store-url", f"{store}={url}"))
    assert url.replace(PASSWORD, "***") in line and "customers" in line, line
    assert not _has_suite_tables(store, server, "shared"), "nothing was written"
    # Told to share it: the suite's tables go beside the foreign one, which is left as it was.
    # Twice: the second command empties the suite's own data first, and only that.
    for _ in range(2):
        done = run_bench(root, "load", "--stores", store, "--generate", "2",
                         "--store-url", f"{store}={url}", "--store-url-overwrite")
        assert done.returncode == 0, done.stdout + done.stderr
        _password_nowhere(root, done.stdout, done.stderr)
        assert _has_suite_tables(store, server, "shared")
        assert _foreign_rows(store, server, "shared", "customers") == FOREIGN_ROWS


def test_refuses_a_table_named_like_its_own_even_when_told_to_share(
        lent_sql: tuple[str, Lent, object], run_root: Path) -> None:
    store, where, server = lent_sql
    line = _one_error_line(run_bench(run_root / f"{store}-clash", "load", "--stores", store,
                                     "--generate", "2", "--store-url",
                                     f"{store}={where.url('clash')}", "--store-url-overwrite"))
    assert "zones" in line and "not created by the suite" in line, line
    assert _foreign_rows(store, server, "clash", "zones") == FOREIGN_ROWS
    assert not _has_suite_tables(store, server, "clash")


@pytest.mark.parametrize("store,scheme,user,path", [
    ("pg", "postgresql", USER, "own"), ("mysql", "mysql", USER, "own"),
    ("ldap", "ldap", LDAP_ADMIN, f"ou=own,{LDAP_BASE}")])
def test_a_closed_port_is_one_error_line(store: str, scheme: str, user: str, path: str,
                                         run_root: Path) -> None:
    url = f"{scheme}://{user}:{PASSWORD}@127.0.0.1:{free_port()}/{path}"
    line = _one_error_line(run_bench(run_root / f"{store}-closed", "load", "--stores", store,
                                     "--generate", "2", "--store-url", f"{store}={url}"))
    assert line.startswith(f"error: --store-url {store}={url.replace(PASSWORD, '***')}: "
                           "cannot connect"), line


def test_run_checks_every_url_before_measuring_anything(run_root: Path) -> None:
    """The reference is measured first for minutes: a bad second store must stop the run
    before that, not become a failed cell at its end."""
    root = run_root / "run-closed"
    out = root / "results"
    url = f"mysql://{USER}:{PASSWORD}@127.0.0.1:{free_port()}/own"
    line = _one_error_line(run_bench(root, "run", "--profile", "tiny", "--servers", "mysql",
                                     "--out", str(out), "--store-url", f"mysql={url}"))
    assert "cannot connect" in line, line
    assert not out.exists()


def test_a_bind_that_may_not_write_is_one_error_line(lent_ldap: tuple[Lent, LdapServer],
                                                      run_root: Path) -> None:
    """Anonymous: slapd lets it read (the checks pass) but not write, which the first add of
    the load finds."""
    lent, slapd = lent_ldap
    line = _one_error_line(run_bench(run_root / "ldap-anonymous", "load", "--stores", "ldap",
                                     "--generate", "2", "--store-url",
                                     f"ldap={lent.url('readonly', user=False)}"))
    assert "cannot add dlzId=" in line and "authentication required" in line, line
    assert _ldap_count(slapd, lent.where("readonly"), "(objectClass=*)") == 1


def test_a_server_without_the_suites_schema_is_one_error_line(bare_ldap: Lent,
                                                              run_root: Path) -> None:
    line = _one_error_line(run_bench(run_root / "ldap-bare", "load", "--stores", "ldap",
                                     "--generate", "2", "--store-url",
                                     f"ldap={bare_ldap.url('own')}"))
    assert "lacks dlzId" in line and "schemas/ldap/dlz.schema" in line, line


@pytest.mark.parametrize("given,says", [
    ("pg=mysql://u:{pw}@127.0.0.1:1/own", "takes postgresql:// or postgres:// URLs"),
    ("mysql=postgresql://u:{pw}@127.0.0.1:1/own", "takes mysql:// or mariadb:// URLs"),
    ("pg=postgresql://u:{pw}@127.0.0.1:1", "names no database"),
    ("pg=postgresql://u:{pw}@127.0.0.1:http/own", "port is not a number"),
    ("postgresql://u:{pw}@127.0.0.1:1/own", "expected STORE=URL"),
    ("ldap=ldap://cn=admin:{pw}@127.0.0.1:389/dlz", "suffix 'dlz' is not a DN"),
    ("ldap=ldap://admin:{pw}@127.0.0.1:389/o=dlz", "bind DN 'admin' is not a DN"),
    ("ldap=ldap://cn=admin:{pw}@127.0.0.1:389", "names no suffix"),
    ("ldap=ldapi://cn=admin:{pw}@slapd/o=dlz", "names the server's socket by its absolute"),
    ("fs=file:///tmp/dlz", "cannot use a server the suite did not start (pg, mysql and ldap "
                           "can)"),
    ("pg=postgresql://u:{pw}@127.0.0.1:1/own?require_auth=scram-sha-256", "needs libpq 16"),
    ("pg=postgresql://u:{pw}@127.0.0.1:1/own?sslcert=/etc/c.pem", "?sslcert= is not passed on"),
    ("pg=postgresql://u:{pw}@127.0.0.1:1/own?sslmode=maybe", "libpq takes disable"),
    ("pg=postgresql://u:{pw}@127.0.0.1:1/own?sslrootcert=ca.pem", "an absolute path"),
    ("pg=postgresql://u:{pw}@127.0.0.1:1/own?sslmode=require&sslmode=disable", "given twice"),
    ("mysql=mysql://u:{pw}@127.0.0.1:1/own?ssl=1", "takes ?tls_ca=FILE"),
    ("mysql=mysql://u:{pw}@127.0.0.1:1/own?tls_ca=ca.pem", "an absolute path"),
    ("ldap=ldap://cn=admin:{pw}@127.0.0.1:389/o=dlz?tls_cacert=/etc/ca.pem",
     "needs ?starttls=yes"),
    ("ldap=ldap://cn=admin:{pw}@127.0.0.1:389/o=dlz?starttls=no", "yes, or leave it out"),
    ("ldap=ldapi://%2Frun%2Fslapd/o=dlz?starttls=yes", "a unix socket carries nothing"),
    ("bogus=postgresql://u:{pw}@127.0.0.1:1/own", "unknown store"),
])
def test_bad_urls_are_one_error_line(given: str, says: str, run_root: Path) -> None:
    root = run_root / "bad"
    line = _one_error_line(run_bench(root, "load", "--stores", "pg", "--generate", "2",
                                     "--store-url", given.format(pw=PASSWORD)))
    assert says in line, line


@pytest.mark.check
@pytest.mark.parametrize("given, shown", [
    ("pg=postgresql://u:pw@h:5432/db", "pg=postgresql://u:***@h:5432/db"),
    ("pg=postgresql://u:p/w@h/db", "pg=postgresql://u:***@h/db"),
    ("pg=postgresql://u:p@w@h/db", "pg=postgresql://u:***@h/db"),
    ("pg=postgresql://u@h/db", "pg=postgresql://u@h/db"),
    ("a postgresql://u:x/y@h/db and mysql://v:z@k/d", "a postgresql://u:***@h/db and mysql://v:***@k/d"),
])
def test_redact_hides_everything_up_to_the_authoritys_last_at(given: str, shown: str) -> None:
    assert redact(given) == shown
