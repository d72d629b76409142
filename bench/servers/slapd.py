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

import re
import secrets
import subprocess
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

import ldap
import ldap.ldapobject

from bench.errors import UserError
from bench.servers.process import ManagedProcess, free_port, run_checked

SLAPD = "/usr/sbin/slapd"
SLAPADD = "/usr/sbin/slapadd"
SYSTEM_SCHEMA_DIR = Path("/etc/ldap/schema")
MODULE_DIR = Path("/usr/lib/ldap")

# The mdb map is sparse and only reserves address space, so it can be sized for the largest
# data set (a million zones of a few dozen records, plus indexes) without costing disk or RAM.
MAP_SIZE = 64 << 30
START_TIMEOUT = 30.0
# Linux limit on a unix socket path (sun_path, including the final NUL).
_SUN_PATH_MAX = 107


class Slapd:
    """One slapd instance: loopback TCP and an ldapi socket, one mdb database under `suffix`."""

    def __init__(self, run_dir: Path, *, suffix: str, schema_files: Sequence[Path],
                 indexes: Sequence[str], log_level: str = "0") -> None:
        self.run_dir = Path(run_dir).resolve()
        self.suffix = suffix
        self.schema_files = [Path(p).resolve() for p in schema_files]
        self.indexes = list(indexes)
        self.log_level = log_level
        self.port = free_port()
        self.uri = f"ldap://127.0.0.1:{self.port}"
        socket_path = self.run_dir / "ldapi"
        if len(str(socket_path).encode()) > _SUN_PATH_MAX:
            raise UserError(f"run directory {self.run_dir} is too long for slapd's ldapi socket")
        self.ldapi_uri = "ldapi://" + urllib.parse.quote(str(socket_path), safe="")
        self.bind_dn = f"cn=admin,{suffix}"
        self.password = secrets.token_hex(16)
        self.config_path = self.run_dir / "slapd.conf"
        self.data_dir = self.run_dir / "data"
        self.log_path = self.run_dir / "slapd.log"
        self._process: ManagedProcess | None = None
        self._write_config()

    def _write_config(self) -> None:
        for path in self.schema_files:
            if not path.is_file():
                raise UserError(f"LDAP schema file {path} does not exist")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self._config_text())
        self.config_path.chmod(0o600)  # it holds rootpw

    def _config_text(self) -> str:
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
            f'directory "{self.data_dir}"',
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
        argv = [SLAPD, "-f", str(self.config_path), "-h", f"{self.uri}/ {self.ldapi_uri}",
                "-d", self.log_level]
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

    def __enter__(self) -> Slapd:
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

    def bulk_load(self, ldif_path: Path) -> None:
        """Add an LDIF file offline with `slapadd -q`: slapd is stopped for it, then restarted.

        Quick mode skips per-entry consistency checks; the LDIF must be valid and ordered
        (parents first), and a slapadd that fails part-way leaves the entries before the
        failing one in the database.
        """
        was_running = self.running()
        self.stop()
        try:
            run_checked([SLAPADD, "-q", "-f", str(self.config_path), "-b", self.suffix,
                         "-l", str(ldif_path)], f"slapadd of {ldif_path}")
        finally:
            if was_running:
                self.start()

    # -- accounting ------------------------------------------------------------------------

    def pids(self) -> list[int]:
        return self._process.pids() if self.running() and self._process else []

    @staticmethod
    def version() -> str:
        """'slapd 2.5.13' (the upstream version of the installed slapd)."""
        done = subprocess.run([SLAPD, "-VV"], capture_output=True, text=True, check=False)
        match = re.search(r"slapd (\d+\.\d+\.\d+)", done.stdout + done.stderr)
        if not match:
            raise UserError(f"cannot tell the version of {SLAPD}")
        return f"slapd {match.group(1)}"

