"""A private OpenLDAP slapd (2.5, back-mdb) under one run directory.

The configuration is a generated slapd.conf passed with `-f` rather than a cn=config directory:
it is one readable file, rewritten from this module on every start so it can never drift, and
slapd, slapadd and slapcat all accept it directly (a cn=config tree would first need its own
`slapadd -n0` step and would be a second copy of the same settings to keep in sync). The
distribution's /etc/ldap/slapd.d and its database are never read or written.

slapd runs with `-d <level>`, which keeps it in the foreground as our child (no fork into the
background), writes its log to stderr (our log file) and still prints configuration errors at
level 0; `-d stats` logs every operation, used to check that searches are indexed.

The loaders bind as the rootdn; the DLZ driver binds as a reader entry under the suffix
(`cn=dlz-reader`), which the access rules let read entries and nothing more, with a random
password per LdapServer handed to the driver in a 0600 file of the servers' user that
named.conf names (password_file=), never in named.conf or named's environment.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import secrets
import shutil
import subprocess
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import ldap
import ldap.dn
import ldap.ldapobject
import ldap.schema
from ldap.ldapobject import LDAPObject

from base.errors import UserError
from base.netns import DatabaseHost
from base.paths import REPO_ROOT
from base.process import ManagedProcess, free_port, give_to_service_user, write_private
from databases.database import (
    CacheReading,
    LentSchema,
    PrivateServer,
    ServerDatabase,
    lent_password_directory,
)
from databases.url import StoreUrl, listed

SLAPD = "/usr/sbin/slapd"
SLAPADD = "/usr/sbin/slapadd"
SLAPCAT = "/usr/sbin/slapcat"
SYSTEM_SCHEMA_DIR = Path("/etc/ldap/schema")
MODULE_DIR = Path("/usr/lib/ldap")

# The mdb map is sparse and only reserves address space, so it can be sized for the largest
# data set (a million zones of a few dozen records, plus indexes) without costing disk or RAM.
MAP_SIZE = 64 << 30
# Under Valgrind (run_under): the largest map it could give slapd here was 32 GiB.
WRAPPED_MAP_SIZE = 16 << 30
START_TIMEOUT = 30.0
# Linux limit on a unix socket path (sun_path, including the final NUL).
_SUN_PATH_MAX = 107


class LdapServer(PrivateServer):
    """One slapd instance: loopback TCP and an ldapi socket, one mdb database under `suffix`."""

    started_here = True
    # StartTLS before every bind, and the CA file (TLS_OPTIONS): never on loopback.
    starttls = False
    tls_cacert: str | None = None

    def __init__(self, run_dir: Path, *, suffix: str, schema_files: Sequence[Path],
                 indexes: Sequence[str], log_level: str = "0",
                 db_host: DatabaseHost | None = None, password: str | None = None) -> None:
        """db_host: run inside that network namespace, reached over TCP at its address only
        (no ldapi socket, which any process on this machine could reach through the file
        system); ldapi_uri is then None. password: the rootdn's (default: a fresh random one;
        a test's server played as someone else's has a known one)."""
        self.run_dir = Path(run_dir).resolve()
        self.db_host = db_host
        self.suffix = suffix
        self.schema_files = [Path(p).resolve() for p in schema_files]
        self.indexes = list(indexes)
        self.log_level = log_level
        self.port = free_port()
        self.uri = f"ldap://{db_host.address if db_host else '127.0.0.1'}:{self.port}"
        socket_path = self.run_dir / "ldapi"
        if len(str(socket_path).encode()) > _SUN_PATH_MAX and not db_host:
            raise UserError(f"run directory {self.run_dir} is too long for slapd's ldapi socket")
        self.ldapi_uri: str | None = None if db_host else \
            "ldapi://" + urllib.parse.quote(str(socket_path), safe="")
        self.bind_dn = f"cn=admin,{suffix}"
        self.password = password or secrets.token_hex(16)
        # The DLZ driver's account (ensure_reader_entry makes its entry).
        self.driver_dn = f"cn={READER_CN},{suffix}"
        self.driver_password = secrets.token_hex(16)
        self.password_file = self.run_dir / "reader.password"  # the driver reads it there
        self.config_path = self.run_dir / "slapd.conf"
        # A symlink to the live mdb directory, so that a bulk load can build a new one and
        # switch to it with one rename (see bulk_load).
        self.data_dir = self.run_dir / "data"
        self.log_path = self.run_dir / "slapd.log"
        # A TCP endpoint in front of the server (a latency proxy) that the DLZ driver is to
        # use instead of reaching the server directly; loaders always go direct.
        self.via: tuple[str, int] | None = None
        self._process: ManagedProcess | None = None
        self.map_size = MAP_SIZE
        self._write_config()

    def _write_config(self) -> None:
        for path in self.schema_files:
            if not path.is_file():
                raise UserError(f"LDAP schema file {path} does not exist")
        if not self.data_dir.exists():
            self._switch_database(self._new_database_dir())
        self._write_config_file(self.config_path, self.data_dir)

    def _write_config_file(self, path: Path, directory: Path) -> None:
        write_private(path, self._config_text(directory))  # it holds rootpw

    def _new_database_dir(self) -> Path:
        """A new mdb directory, the service user's: slapd and slapadd run as it (and write
        their pid, args, socket and slapcat's output in the run directory)."""
        directory = self.run_dir / f"mdb-{secrets.token_hex(6)}"
        directory.mkdir(parents=True)
        give_to_service_user(self.run_dir)
        give_to_service_user(directory)
        return directory

    def _switch_database(self, directory: Path) -> None:
        """Point the data symlink at directory (one atomic rename); drop the replaced one."""
        old = self.data_dir.resolve() if self.data_dir.is_symlink() else None
        fresh = self.run_dir / f"data.{directory.name}"
        fresh.symlink_to(directory.name)
        os.replace(fresh, self.data_dir)
        if old is not None and old != directory.resolve():
            shutil.rmtree(old, ignore_errors=True)

    def _config_text(self, directory: Path) -> str:
        schemas = [SYSTEM_SCHEMA_DIR / "core.schema", *self.schema_files]
        lines = [f'include "{p}"' for p in schemas]
        lines += [
            f'pidfile "{self.run_dir / "slapd.pid"}"',
            f'argsfile "{self.run_dir / "slapd.args"}"',
            f'modulepath "{MODULE_DIR}"',
            "moduleload back_mdb",
            "moduleload syncprov",
            "database mdb",
            f'suffix "{self.suffix}"',
            f'rootdn "{self.bind_dn}"',
            f"rootpw {self.password}",
            f'directory "{directory}"',
            f"maxsize {self.map_size}",
            # Benchmark data is reloadable: skip the fsync per write transaction. LMDB stays
            # consistent after a slapd crash; only an OS crash could lose the last writes.
            "dbnosync",
            # 0 = a search keeps one read snapshot to its end instead of renewing it every
            # 10000 entries, so a zone transfer never mixes two versions of a zone.
            "rtxnsize 0",
            # The reader (the DLZ driver) may read every entry but a password, and write
            # nothing; anyone else may only bind. The rootdn is above these rules.
            "access to attrs=userPassword by anonymous auth by * none",
            f'access to * by dn.exact="{self.driver_dn}" read by * none',
            # A zone transfer is one search over every entry of the zone (one snapshot): past
            # slapd's default of 500 entries a search the reader's transfer of a zone of more
            # owners would fail.
            f'limits dn.exact="{self.driver_dn}" size=unlimited',
        ]
        lines += [f"index {spec}" for spec in self.indexes]
        lines += [
            # RFC 4533 content synchronisation, which a caching ldap driver follows
            # (docs/method/cache.md): the entries' CSNs indexed for its searches from a
            # cookie, and a log of the last changes so that a cookie a little behind is
            # answered from it instead of a walk of the whole database.
            "index entryCSN,entryUUID eq",
            "overlay syncprov",
            "syncprov-sessionlog 100000",
        ]
        return "\n".join(lines) + "\n"

    # -- process control -------------------------------------------------------------------

    def start(self) -> None:
        if self._process is not None and self._process.running():
            return
        # Its data, pid, args and socket are in the run directory.
        self.hand_over({self.password_file: self.driver_password + "\n"})
        listeners = " ".join(u for u in (f"{self.uri}/", self.ldapi_uri) if u)
        argv = [*self.wrapper, SLAPD, "-f", str(self.config_path), "-h", listeners, "-d",
                self.log_level]
        self._process = self.server_process("slapd", argv)
        self._process.start()
        self._process.wait_ready(self._answers_bind, START_TIMEOUT)

    def run_under(self, wrapper: Sequence[str]) -> None:
        super().run_under(wrapper)
        # Valgrind cannot map LMDB's 64 GiB (mdb_db_open: "Invalid argument"; 32 GiB it
        # could, with Valgrind 3.19 here): a map that still holds far more than a data set
        # the suite runs under Valgrind.
        self.map_size = min(self.map_size, WRAPPED_MAP_SIZE)
        self._write_config_file(self.config_path, self.data_dir)

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None

    def running(self) -> bool:
        return self._process is not None and self._process.running()

    def _answers_bind(self) -> bool:
        try:
            self.connect().unbind_s()
        except ldap.LDAPError:
            return False
        return True

    # -- clients ---------------------------------------------------------------------------

    def connect(self) -> ldap.ldapobject.LDAPObject:
        """A python-ldap connection over loopback TCP, bound as the database's rootdn."""
        conn = ldap.initialize(self.uri)
        conn.set_option(ldap.OPT_PROTOCOL_VERSION, ldap.VERSION3)
        conn.set_option(ldap.OPT_NETWORK_TIMEOUT, 5.0)
        conn.simple_bind_s(self.bind_dn, self.password)
        return conn

    # The DNS server's environment besides its arguments: nothing (the reader's password is
    # in the file named.conf names).
    env: dict[str, str] = {}

    def bulk_load(self, ldif_path: Path) -> None:
        """Add an LDIF file offline with `slapadd -q`, all or nothing; slapd is stopped for it.

        slapadd stopped part-way (an error, Ctrl-C) leaves the entries before that point in
        its database, so it never writes the live one: the current entries (slapcat) and the
        LDIF go into a new mdb directory, and the data symlink is switched to it only once
        both are complete. Quick mode skips per-entry consistency checks, so the LDIF must be
        valid and ordered (parents first). No time limit: a million zones take minutes.
        """
        was_running = self.running()
        self.stop()
        staging = self._new_database_dir()
        staging_config = self.run_dir / f"slapd-{staging.name}.conf"
        current = self.run_dir / f"{staging.name}-current.ldif"
        try:
            self.run_set_up([SLAPCAT, "-f", str(self.config_path), "-b", self.suffix,
                             "-l", str(current)], f"slapcat of {self.data_dir}", timeout=None)
            self._write_config_file(staging_config, staging)
            for source in (current, ldif_path):
                self.run_set_up([SLAPADD, "-q", "-f", str(staging_config), "-b", self.suffix,
                                 "-l", str(source)], f"slapadd of {source}", timeout=None)
            self._switch_database(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        finally:
            current.unlink(missing_ok=True)
            staging_config.unlink(missing_ok=True)
            if was_running:
                self.start()

    # -- accounting ------------------------------------------------------------------------

    def pids(self) -> list[int]:
        return self._process.pids() if self.running() and self._process else []

    def mapped_data(self) -> tuple[int, int]:
        """(bytes of the live data.mdb resident in slapd's mappings of it, the file's data).

        The file's data is its allocated blocks, not its size: slapd's LMDB sets the file to
        its whole map size (64 GiB here), sparse, so a share of the size read 1.5% for a
        1 GB database that was all resident. The resident bytes are capped at the data: a
        200-zone test read 1.5% more resident than allocated (pages with no block on disk yet).
        """
        data_file = self.data_dir.resolve() / "data.mdb"
        resident = sum(_resident_kb(pid, data_file) for pid in self.pids()) * 1024
        allocated = data_file.stat().st_blocks * 512
        return min(resident, allocated), allocated

    @staticmethod
    def version() -> str:
        """'slapd 2.5.13' (the upstream version of the installed slapd)."""
        done = subprocess.run([SLAPD, "-VV"], capture_output=True, text=True, check=False)
        match = re.search(r"slapd (\d+\.\d+\.\d+)", done.stdout + done.stderr)
        if not match:
            raise UserError(f"cannot tell the version of {SLAPD}")
        return f"slapd {match.group(1)}"


class ExternalLdap:
    """An LDAP server the suite did not start (--store-url ldap=...): the same fields the store
    reads from an LdapServer, but nothing to start, restart or stop, and no process of ours.
    The suite's subtree is the URL's path (its suffix), bound to as the URL's user (its bind DN).
    """

    started_here = False
    db_host: DatabaseHost | None = None
    via: tuple[str, int] | None = None
    # The lent server's own socket, if the URL names one, is `uri`: the DLZ driver uses that.
    ldapi_uri: str | None = None

    def __init__(self, url: StoreUrl) -> None:
        self.url = url
        options = dict(url.options)
        # ?starttls=yes: every connection, the suite's and the driver's, runs StartTLS
        # before its bind and verifies the server's certificate (against ?tls_cacert=FILE,
        # else libldap's default CAs).
        self.starttls = options.get("starttls") == "yes"
        self.tls_cacert = options.get("tls_cacert")
        self.suffix = url.database
        self.bind_dn = url.user or ""
        self.port = url.port or _DEFAULT_PORT
        self.uri = server_uri(url)
        # OpenLDAP reads no password from the environment (its tools take -w, -W or -y), so
        # the suite has one variable of its own: the URL's password (or
        # --store-password-file's), else LDAP_PASSWORD. It reaches the DLZ driver inside
        # named in a file (hand_password_to_servers), never through named.conf or named's
        # environment.
        self.password = (url.password if url.password is not None
                         else os.environ.get(PASSWORD_ENV, "") if self.bind_dn else "")
        self.env: dict[str, str] = {}
        # The DLZ driver binds as the URL's user too.
        self.driver_dn, self.driver_password = self.bind_dn, self.password
        self.password_file: Path | None = None

    def hand_password_to_servers(self, directory: Path) -> None:
        """The bind password, if any, into a 0600 file in directory (the servers' user's)
        for the driver inside named (password_file=): the servers run as another user, who
        cannot read this process's environment."""
        if not self.driver_password:
            return
        self.password_file = directory / "driver.password"
        write_private(self.password_file, self.driver_password + "\n")

    def connect(self) -> ldap.ldapobject.LDAPObject:
        """A python-ldap connection to the URL's server, bound as its bind DN (anonymous
        without one); UserError naming the URL (without its password) when the server cannot
        be reached or refuses the bind."""
        if self.bind_dn and not self.password:
            raise self.url.error(f"names the bind DN {self.bind_dn} but no password: give it in "
                                 f"the URL or in {PASSWORD_ENV}")
        try:
            conn = ldap.initialize(self.uri)
            conn.set_option(ldap.OPT_PROTOCOL_VERSION, ldap.VERSION3)
            conn.set_option(ldap.OPT_NETWORK_TIMEOUT, _CONNECT_TIMEOUT_S)
            conn.set_option(ldap.OPT_REFERRALS, 0)  # never follow a referral elsewhere
            self._start_tls(conn)
            conn.simple_bind_s(self.bind_dn, self.password)
        except (ldap.SERVER_DOWN, ldap.CONNECT_ERROR, ldap.TIMEOUT) as exc:
            raise self.url.error(f"cannot connect: {ldap_message(exc)}") from None
        except ldap.LDAPError as exc:  # the server answered: it refused the bind
            raise self.url.error(f"cannot bind as {self.bind_dn or 'anonymous'}: "
                                 f"{ldap_message(exc)}") from None
        return conn

    def _start_tls(self, conn: LDAPObject) -> None:
        """start_tls, a failure said as such (libldap's own text for a certificate that does
        not verify is "(unknown error code)")."""
        try:
            start_tls(conn, self)
        except ldap.LDAPError as exc:
            raise self.url.error(
                f"StartTLS failed: {ldap_message(exc)} (does the server offer StartTLS, and "
                f"is its certificate, for this host name, signed by "
                f"{self.tls_cacert or 'a CA libldap trusts'}?)") from None

    def restart(self, *, cold: bool = False) -> None:
        """Nothing: the suite restarts no server it did not start (its caches stay warm)."""

    def pids(self) -> list[int]:
        return []


# The environment variable holding the bind password of a lent LDAP server (no standard one
# exists), read by the suite itself (the driver gets a file).
PASSWORD_ENV = "LDAP_PASSWORD"
# The ?settings a lent server's URL may give: StartTLS (yes), and the CA certificate file
# that verifies the server's (drivers/ldap: starttls=, tls_cacert=).
TLS_OPTIONS = ("starttls", "tls_cacert")
_CONNECT_TIMEOUT_S = 10.0
_DEFAULT_PORT = 389

# What the store reads and writes: the suite's own server or one it was lent.
LdapTarget = LdapServer | ExternalLdap


def start_tls(conn: LDAPObject, target: LdapServer | ExternalLdap) -> None:
    """StartTLS on conn, the server's certificate demanded and verified (its host name too),
    when the target asks for it (a lent server's ?starttls=yes)."""
    if not target.starttls:
        return
    conn.set_option(ldap.OPT_X_TLS_REQUIRE_CERT, ldap.OPT_X_TLS_DEMAND)
    if target.tls_cacert is not None:
        conn.set_option(ldap.OPT_X_TLS_CACERTFILE, target.tls_cacert)
    conn.set_option(ldap.OPT_X_TLS_NEWCTX, 0)
    conn.start_tls_s()


def server_uri(url: StoreUrl) -> str:
    """The LDAP URI of a --store-url's server alone: ldap://HOST:PORT (an IPv6 address in
    brackets) or ldapi:// with its socket's path percent-encoded, as libldap takes it."""
    if url.scheme == "ldapi":
        return "ldapi://" + urllib.parse.quote(url.host, safe="")
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"ldap://{host}:{url.port or _DEFAULT_PORT}"


def ldap_message(exc: ldap.LDAPError) -> str:
    """python-ldap's error as one line: its description, and the server's text if any."""
    details = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
    desc = str(details.get("desc") or type(exc).__name__)
    info = str(details.get("info") or "").strip()
    return f"{desc} ({info})" if info and info != desc else desc


class LdapDatabase(ServerDatabase[LdapTarget, LDAPObject]):
    """A store's LDAP database: a private slapd with one mdb database under `suffix`, given
    the loader's schema files and indexes, or a subtree of a lent server (--store-url) that
    must know those schemas and that the loader claims with `lent`."""

    lent_schemes = ("ldap", "ldapi")
    profiled_program = "slapd"
    # OpenLDAP 2.5 has no operation that closes one client's connection: back-monitor's
    # connection entries (cn=Connections,cn=Monitor) can be read, not modified or deleted.
    no_connection_end = ("slapd has no operation that ends one client's connection "
                         "(cn=Monitor's connection entries are read-only)")

    def __init__(self, store: str, *, suffix: str, schema_files: Sequence[Path],
                 indexes: Sequence[str], lent: LentSchema[LDAPObject] | None = None) -> None:
        super().__init__(store, lent)
        self.suffix = suffix
        self.schema_files = list(schema_files)
        self.indexes = list(indexes)

    @contextmanager
    def server(self, run_dir: Path, *,
               db_host: DatabaseHost | None = None) -> Iterator[LdapServer]:
        slapd = LdapServer(run_dir, suffix=self.suffix, schema_files=self.schema_files,
                           indexes=self.indexes, db_host=db_host)
        with slapd:
            ensure_suffix_entry(slapd)
            ensure_reader_entry(slapd)
            yield slapd

    def check_url(self, url: StoreUrl) -> None:
        if not url.database:
            raise url.error("names no suffix (…/SUFFIX at the end, e.g. "
                            "/ou=dlzbench,dc=example,dc=net): the suite's entries need a "
                            "subtree of their own")
        _check_dn(url, "suffix", url.database)
        if url.user:
            _check_dn(url, "bind DN", url.user)
        if url.scheme == "ldapi" and (url.port is not None or not url.host.startswith("/")):
            raise url.error("an ldapi:// URL names the server's socket by its absolute path, "
                            "percent-encoded: ldapi://%2Frun%2Fslapd%2Fldapi/SUFFIX")
        self.check_options(url)

    def check_options(self, url: StoreUrl) -> None:
        """?starttls=yes, and ?tls_cacert=FILE with it (absolute, readable by the servers'
        user: the driver in named reads it); over TCP only."""
        options = dict(url.options)
        for key in options:
            if key not in TLS_OPTIONS:
                raise url.error(f"?{key}= is not passed on: the {self.store} store takes "
                                "?starttls=yes and ?tls_cacert=FILE")
        if "starttls" not in options:
            if options:
                raise url.error("?tls_cacert= needs ?starttls=yes")
            return
        if options["starttls"] != "yes":
            raise url.error(f"?starttls={options['starttls']}: yes, or leave it out")
        if url.scheme == "ldapi":
            raise url.error("?starttls=yes over ldapi://: a unix socket carries nothing over a "
                            "network")
        cacert = options.get("tls_cacert")
        if cacert is not None:
            self.check_file_option(url, "tls_cacert", cacert)

    def check_external(self, url: StoreUrl, *, overwrite: bool) -> str:
        lent = self.claim(url)
        with bound(ExternalLdap(url)) as conn:
            root = _root_dse(conn, url)
            if _check_server(conn, url, root, self.schema_files):
                lent.check_lent(conn, url, overwrite=overwrite)
            return _server_version(conn, root)

    @contextmanager
    def external(self, url: StoreUrl, *, overwrite: bool) -> Iterator[ExternalLdap]:
        lent = self.claim(url)
        target = ExternalLdap(url)
        with bound(target) as conn:
            root = _root_dse(conn, url)
            if _check_server(conn, url, root, self.schema_files):
                lent.check_lent(conn, url, overwrite=overwrite)
            _create_suffix_entry(conn, url)
            lent.hold_empty(conn, url)
        with lent_password_directory(self.store) as directory:
            target.hand_password_to_servers(directory)
            yield target

    @contextmanager
    def round_trips(self, target: LdapTarget) -> Iterator[Callable[[], object]]:
        conn = ldap.initialize(driver_uri(target))
        start_tls(conn, target)
        conn.simple_bind_s(target.driver_dn, target.driver_password)
        try:
            yield conn.whoami_s
        finally:
            conn.unbind_s()

    def tcp_endpoint(self, target: LdapTarget) -> tuple[str, int]:
        if target.uri.startswith("ldapi:"):
            raise UserError(f"the {self.store} store's server is reached through a unix socket "
                            "(ldapi://): there is no TCP endpoint to put a proxy in front of")
        return urllib.parse.urlsplit(target.uri).hostname or "127.0.0.1", target.port

    def cache_reading(self, target: LdapTarget,
                      options: Mapping[str, str]) -> CacheReading | None:
        if isinstance(target, ExternalLdap):
            return None  # a server shared with others, its files not ours to look at
        # back-mdb has no cache of its own: slapd maps the database file and reads it through
        # the kernel's page cache, so what it holds is the file's share resident in its map.
        resident, size = target.mapped_data()
        return CacheReading("slapd back-mdb: data.mdb resident in slapd's mapping "
                            "(/proc/PID/smaps Rss) / the file's size", None,
                            resident_bytes=resident, mapped_bytes=size)


@contextmanager
def bound(slapd: LdapTarget) -> Iterator[LDAPObject]:
    """A bound connection, unbound at the end, except after Ctrl-C: the interrupt may have
    landed inside a python-ldap call, between its taking the connection's lock and its
    try/finally, and unbinding would then wait for that lock forever. The socket closes with
    the process anyway."""
    conn = slapd.connect()
    interrupted = False
    try:
        yield conn
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if not interrupted:
            conn.unbind_s()


def driver_uri(target: LdapTarget) -> str:
    """Where the DLZ driver reaches slapd: a proxy in front of it, else its unix socket (ldapi:
    measured 4.6% -> 5.8% of native against loopback TCP), else (on a host of its own) TCP;
    a lent server where its URL says."""
    if target.via is not None:
        return f"ldap://{target.via[0]}:{target.via[1]}"
    return target.ldapi_uri or target.uri


def ensure_suffix_entry(slapd: LdapServer) -> None:
    rdn_value = slapd.suffix.split(",", 1)[0].split("=", 1)[1]
    with bound(slapd) as conn, contextlib.suppress(ldap.ALREADY_EXISTS):
        # A restarted directory keeps its data.
        conn.add_s(slapd.suffix, [("objectClass", [b"organization"]),
                                  ("o", [rdn_value.encode()])])


# The reader entry's RDN value: the DLZ driver's bind DN is cn=READER_CN,<suffix>.
READER_CN = "dlz-reader"


def ensure_reader_entry(slapd: LdapServer) -> None:
    """The DLZ driver's bind entry with this LdapServer's password (a restarted directory
    keeps the entry: its password is replaced)."""
    password = [ssha(slapd.driver_password)]
    with bound(slapd) as conn:
        try:
            conn.add_s(slapd.driver_dn, [
                ("objectClass", [b"organizationalRole", b"simpleSecurityObject"]),
                ("cn", [READER_CN.encode()]), ("userPassword", password)])
        except ldap.ALREADY_EXISTS:
            conn.modify_s(slapd.driver_dn, [(ldap.MOD_REPLACE, "userPassword", password)])


def ssha(password: str) -> bytes:
    """A userPassword value slapd checks a simple bind against: salted SHA-1 ({SSHA}), so a
    dump of the directory (slapcat, during a bulk load) holds no password in clear."""
    salt = secrets.token_bytes(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return b"{SSHA}" + base64.b64encode(digest + salt)



# An entry's attributes as python-ldap returns them.
Entry = dict[str, list[bytes]]

# -- a lent server (--store-url ldap=...): its schema, its suffix ---------------------------

# named.conf's dlopen string cannot carry these in an argument (servers/dlz.py's _UNPASSABLE):
# a suffix or bind DN holding one could never reach the DLZ driver.
_UNPASSABLE = frozenset('"\\{}')
# The object class of a suffix entry the suite creates, by its RDN's attribute type (with the
# attributes it must have besides the RDN's); an entry of another type is the operator's to make.
_SUFFIX_CLASSES: dict[str, tuple[list[bytes], tuple[str, ...]]] = {
    "o": ([b"organization"], ()),
    "ou": ([b"organizationalUnit"], ()),
    "dc": ([b"dcObject", b"organization"], ("o",)),
}
_SCHEMA_NAME = re.compile(r"^(attributetype|objectclass)\s*\(\s*[\d.]+\s+NAME\s+'([^']+)'",
                          re.IGNORECASE | re.MULTILINE)


def _check_dn(url: StoreUrl, what: str, dn: str) -> None:
    """Refuse a suffix or bind DN that is not a DN, or that named.conf could not carry."""
    try:
        ldap.dn.str2dn(dn)
    except ldap.DECODING_ERROR:
        raise url.error(f"the {what} {dn!r} is not a DN (e.g. ou=dlzbench,dc=example,dc=net; "
                        "in the URL, percent-encode : @ / ? # and %)") from None
    if any(c.isspace() or c in _UNPASSABLE for c in dn):
        raise url.error(f"the {what} {dn!r} holds white space, a quote, a backslash or a brace: "
                        "named.conf's dlopen string cannot pass it to the DLZ driver")


def _root_dse(conn: LDAPObject, url: StoreUrl) -> Entry:
    """The server's root DSE (user and operational attributes): where its schema is, its
    naming contexts, its vendor if it says."""
    try:
        found = conn.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["*", "+"])
    except ldap.LDAPError as exc:
        raise url.error(f"cannot read the server's root DSE: {ldap_message(exc)}") from None
    return found[0][1] if found else {}


def _check_server(conn: LDAPObject, url: StoreUrl, root: Entry,
                  schema_files: Sequence[Path]) -> bool:
    """Refuse a server without the suite's schema, and a missing suffix entry the suite could
    not create; writes nothing. Whether the suffix entry exists (only then can it hold
    others' entries)."""
    missing = _missing_schema(conn, url, root, schema_files)
    if missing:
        files = " and ".join(str(p.relative_to(REPO_ROOT)) for p in schema_files)
        raise url.error(f"the server's schema lacks {listed(missing)}: add "
                        f"{files} to it (slapd.conf: "
                        "include it; cn=config: convert it with slaptest and ldapadd it)")
    if not _entry_exists(conn, url, url.database):
        _check_creatable(conn, url, root)
        return False
    return True


def _schema_names(schema_files: Sequence[Path]) -> list[str]:
    """The names of the schema files' attribute types and object classes."""
    return [name for path in schema_files
            for _, name in _SCHEMA_NAME.findall(path.read_text())]


def _missing_schema(conn: LDAPObject, url: StoreUrl, root: Entry,
                    schema_files: Sequence[Path]) -> list[str]:
    """The suite's attribute types and object classes that the server's subschema lacks."""
    where = root.get("subschemaSubentry")
    if not where:
        raise url.error("the server publishes no schema (no subschemaSubentry in its root DSE)")
    try:
        entry = conn.read_subschemasubentry_s(where[0].decode(),
                                              attrs=["attributeTypes", "objectClasses"])
    except ldap.LDAPError as exc:
        raise url.error(f"cannot read the server's schema: {ldap_message(exc)}") from None
    schema = ldap.schema.SubSchema(entry or {}, check_uniqueness=0)
    present = {name.lower() for kind in (ldap.schema.AttributeType, ldap.schema.ObjectClass)
               for oid in schema.listall(kind)
               for name in (schema.get_obj(kind, oid).names or ())}
    return [name for name in _schema_names(schema_files) if name.lower() not in present]


def _entry_exists(conn: LDAPObject, url: StoreUrl, dn: str) -> bool:
    try:
        conn.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["1.1"])
    except ldap.NO_SUCH_OBJECT:
        return False
    except ldap.LDAPError as exc:
        raise url.error(f"cannot read {dn}: {ldap_message(exc)}") from None
    return True


def _suffix_entry(url: StoreUrl) -> tuple[str, dict[str, list[bytes]]] | None:
    """The suffix's RDN attribute and the entry the suite would create for it; None for a
    suffix whose entry the operator must make (a multi-valued RDN, or another type)."""
    rdn = ldap.dn.str2dn(url.database)[0]
    if len(rdn) != 1 or rdn[0][0].lower() not in _SUFFIX_CLASSES:
        return None
    kind, value, _ = rdn[0]
    classes, also = _SUFFIX_CLASSES[kind.lower()]
    attrs: dict[str, list[bytes]] = {"objectClass": classes, kind: [value.encode()]}
    attrs.update({name: [value.encode()] for name in also})
    return kind, attrs


def _normalized(dn: str) -> str:
    return ldap.dn.dn2str(ldap.dn.str2dn(dn)).lower()


def _check_creatable(conn: LDAPObject, url: StoreUrl, root: Entry) -> None:
    """Refuse a missing suffix entry the suite cannot create: one of a kind it does not make,
    or whose parent is missing (unless it is the top of one of the server's databases)."""
    if _suffix_entry(url) is None:
        raise url.error(f"the suffix entry {url.database} does not exist, and the suite "
                        "creates o=, ou= or dc= entries only: create it, then run again")
    parent = ldap.dn.dn2str(ldap.dn.str2dn(url.database)[1:])
    contexts = {_normalized(c.decode()) for c in root.get("namingContexts", [])}
    if _normalized(url.database) in contexts or (parent and _entry_exists(conn, url, parent)):
        return
    raise url.error(f"the suffix entry {url.database} does not exist, nor does its parent "
                    f"{parent or '(none)'}: lend the suite a subtree of an entry the server "
                    "holds")


def _create_suffix_entry(conn: LDAPObject, url: StoreUrl) -> None:
    """The suffix entry, created if missing (then the suite's: it is never deleted either)."""
    made = _suffix_entry(url)
    if made is None or _entry_exists(conn, url, url.database):
        return
    try:
        conn.add_s(url.database, list(made[1].items()))
    except ldap.ALREADY_EXISTS:
        return  # made meanwhile by someone else
    except ldap.LDAPError as exc:
        raise url.error(f"the suffix entry {url.database} does not exist and the suite cannot "
                        f"create it: {ldap_message(exc)}") from None


def _server_version(conn: LDAPObject, root: Entry) -> str:
    """What the server says it is: its root DSE's vendorVersion (RFC 3045), else OpenLDAP's
    cn=Monitor (if the operator lets the bind DN read it), else what its root DSE's class
    tells."""
    def first(values: list[bytes] | None) -> str:
        return values[0].decode(errors="replace").strip() if values else ""

    vendor, version = first(root.get("vendorName")), first(root.get("vendorVersion"))
    if version:
        return version if not vendor or vendor.lower() in version.lower() \
            else f"{vendor} {version}"
    monitored = _monitored_info(conn)
    found = re.search(r"slapd (\d+\.\d+\.\d+)", monitored)
    if found:
        return f"OpenLDAP {found[1]}"
    if b"openldaprootdse" in {c.lower() for c in root.get("objectClass", [])}:
        return "OpenLDAP (version not published)"
    return vendor or "LDAP server (vendor and version not published)"


def _monitored_info(conn: LDAPObject) -> str:
    """OpenLDAP's `monitoredInfo` ("OpenLDAP: slapd 2.5.13 ..."), or '' where cn=Monitor is
    not configured or not readable."""
    try:
        found = conn.search_s("cn=Monitor", ldap.SCOPE_BASE, "(objectClass=*)",
                              ["monitoredInfo"])
    except ldap.LDAPError:
        return ""
    values = found[0][1].get("monitoredInfo") if found else None
    return values[0].decode(errors="replace") if values else ""



_MAPPING_HEADER = re.compile(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s+(.*)$")


def _resident_kb(pid: int, path: Path) -> int:
    """kB of path resident in the process's mappings of it (/proc/PID/smaps Rss lines)."""
    try:
        lines = Path(f"/proc/{pid}/smaps").read_text().splitlines()
    except OSError:  # the process ended
        return 0
    total, inside = 0, False
    for line in lines:
        header = _MAPPING_HEADER.match(line)
        if header:
            inside = header.group(1) == str(path)
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total
