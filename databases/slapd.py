"""A private OpenLDAP slapd (2.5, back-mdb) under one run directory.

The configuration is a generated slapd.conf passed with `-f` rather than a cn=config directory:
it is one readable file, rewritten from this module on every start so it can never drift, and
slapd, slapadd and slapcat all accept it directly (a cn=config tree would first need its own
`slapadd -n0` step and would be a second copy of the same settings to keep in sync). The
distribution's /etc/ldap/slapd.d and its database are never read or written.

slapd runs with `-d <level>`, which keeps it in the foreground as our child (no fork into the
background), writes its log to stderr (our log file) and still prints configuration errors at
level 0; `-d stats` logs every operation, used to check that searches are indexed.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

import ldap
import ldap.ldapobject

from base.errors import UserError
from base.netns import DatabaseHost
from base.process import ManagedProcess, free_port, run_checked
from databases.url import StoreUrl

SLAPD = "/usr/sbin/slapd"
SLAPADD = "/usr/sbin/slapadd"
SLAPCAT = "/usr/sbin/slapcat"
SYSTEM_SCHEMA_DIR = Path("/etc/ldap/schema")
MODULE_DIR = Path("/usr/lib/ldap")

# The mdb map is sparse and only reserves address space, so it can be sized for the largest
# data set (a million zones of a few dozen records, plus indexes) without costing disk or RAM.
MAP_SIZE = 64 << 30
START_TIMEOUT = 30.0
# Linux limit on a unix socket path (sun_path, including the final NUL).
_SUN_PATH_MAX = 107


class LdapServer:
    """One slapd instance: loopback TCP and an ldapi socket, one mdb database under `suffix`."""

    started_here = True

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
        self.config_path = self.run_dir / "slapd.conf"
        # A symlink to the live mdb directory, so that a bulk load can build a new one and
        # switch to it with one rename (see bulk_load).
        self.data_dir = self.run_dir / "data"
        self.log_path = self.run_dir / "slapd.log"
        # A TCP endpoint in front of the server (a latency proxy) that the DLZ driver is to
        # use instead of reaching the server directly; loaders always go direct.
        self.via: tuple[str, int] | None = None
        self._process: ManagedProcess | None = None
        self._write_config()

    def _write_config(self) -> None:
        for path in self.schema_files:
            if not path.is_file():
                raise UserError(f"LDAP schema file {path} does not exist")
        if not self.data_dir.exists():
            self._switch_database(self._new_database_dir())
        self._write_config_file(self.config_path, self.data_dir)

    def _write_config_file(self, path: Path, directory: Path) -> None:
        path.write_text(self._config_text(directory))
        path.chmod(0o600)  # it holds rootpw

    def _new_database_dir(self) -> Path:
        directory = self.run_dir / f"mdb-{secrets.token_hex(6)}"
        directory.mkdir(parents=True)
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
            "database mdb",
            f'suffix "{self.suffix}"',
            f'rootdn "{self.bind_dn}"',
            f"rootpw {self.password}",
            f'directory "{directory}"',
            f"maxsize {MAP_SIZE}",
            # Benchmark data is reloadable: skip the fsync per write transaction. LMDB stays
            # consistent after a slapd crash; only an OS crash could lose the last writes.
            "dbnosync",
            # 0 = a search keeps one read snapshot to its end instead of renewing it every
            # 10000 entries, so a zone transfer never mixes two versions of a zone.
            "rtxnsize 0",
        ]
        lines += [f"index {spec}" for spec in self.indexes]
        return "\n".join(lines) + "\n"

    # -- process control -------------------------------------------------------------------

    def start(self) -> None:
        if self._process is not None and self._process.running():
            return
        listeners = " ".join(u for u in (f"{self.uri}/", self.ldapi_uri) if u)
        argv = [SLAPD, "-f", str(self.config_path), "-h", listeners, "-d", self.log_level]
        if self.db_host:
            argv = self.db_host.command(argv)
        self._process = ManagedProcess("slapd", argv, self.log_path, cwd=self.run_dir)
        self._process.start()
        self._process.wait_ready(self._answers_bind, START_TIMEOUT)

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def running(self) -> bool:
        return self._process is not None and self._process.running()

    def __enter__(self) -> LdapServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

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

    @property
    def env(self) -> dict[str, str]:
        """A client's environment besides its arguments: none (the DLZ driver is given this
        run's throwaway rootdn password as an argument)."""
        return {}

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
            run_checked([SLAPCAT, "-f", str(self.config_path), "-b", self.suffix,
                         "-l", str(current)], f"slapcat of {self.data_dir}", timeout=None)
            self._write_config_file(staging_config, staging)
            for source in (current, ldif_path):
                run_checked([SLAPADD, "-q", "-f", str(staging_config), "-b", self.suffix,
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
        self.suffix = url.database
        self.bind_dn = url.user or ""
        self.port = url.port or _DEFAULT_PORT
        self.uri = server_uri(url)
        # OpenLDAP reads no password from the environment (its tools take -w, -W or -y), so
        # the suite has one variable of its own: the URL's password, else LDAP_PASSWORD. It
        # reaches the DLZ driver inside named as LDAP_PASSWORD too, never through named.conf.
        self.password = (url.password if url.password is not None
                         else os.environ.get(PASSWORD_ENV, "") if self.bind_dn else "")
        self.env = {PASSWORD_ENV: self.password} if self.password else {}

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
            conn.simple_bind_s(self.bind_dn, self.password)
        except (ldap.SERVER_DOWN, ldap.CONNECT_ERROR, ldap.TIMEOUT) as exc:
            raise self.url.error(f"cannot connect: {ldap_message(exc)}") from None
        except ldap.LDAPError as exc:  # the server answered: it refused the bind
            raise self.url.error(f"cannot bind as {self.bind_dn or 'anonymous'}: "
                                 f"{ldap_message(exc)}") from None
        return conn

    def restart(self) -> None:
        """Nothing: the suite restarts no server it did not start (its caches stay warm)."""

    def pids(self) -> list[int]:
        return []


# The environment variable holding the bind password of a lent LDAP server (no standard one
# exists); drivers/ldap/dlz_ldap.c reads the same name.
PASSWORD_ENV = "LDAP_PASSWORD"
_CONNECT_TIMEOUT_S = 10.0
_DEFAULT_PORT = 389

# What the store reads and writes: the suite's own server or one it was lent.
LdapTarget = LdapServer | ExternalLdap


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
