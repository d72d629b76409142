"""A private BIND `named` (9.18, or 9.20: servers/bindversion.py): generated config, loopback
port, control channel and log in one run directory.

named runs as the invoking user (no -u) with every file it writes (pid, lock, session key,
managed keys, dumps, log) inside the run directory, so it never touches /etc/bind (except
reading the stock bind.keys trust anchors), /var/cache/bind or /run/named.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode

from base.errors import UserError
from base.process import ManagedProcess, free_port, run_checked
from servers import bindversion

_KEY_NAME = "dlzbench-rndc"
_ENTER_TIMEOUT = 120.0
_STOP_TIMEOUT = 15.0
# A wrapper such as Valgrind makes named many times slower to start and to shut down (memcheck
# writes its report at exit, which a SIGKILL after the normal time-out would lose).
_WRAPPED_SLOWDOWN = 10.0
# Per-try timeout while polling: short, so a lost datagram costs little, yet long enough for
# a driver that has to ask its database before answering.
_POLL_TRY_TIMEOUT = 0.5
# Pause between tries when nothing listens yet (the refusal comes back at once).
_POLL_PAUSE = 0.002
# named logs this once every zone has loaded (or failed to); before it, a query for a zone
# file still loading gets SERVFAIL although named already answers.
_RUNNING_LINE = re.compile(rb" general: notice: running$", re.M)
_ZONE_NOT_LOADED = re.compile(rb"zone \S+: not loaded due to errors\.", re.M)
# The counter of a statistics dump (statistics-file) holding every query received over IPv4.
_REQUESTS_RECEIVED = re.compile(r"^\s*(\d+) IPv4 requests received$", re.M)


def _quote(path: Path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _non_recursive_query(qname: str | dns.name.Name, rdtype: str,
                         payload: int | None = None, dnssec: bool = False) -> dns.message.Message:
    """A query without RD (every named here is authoritative only); with EDNS0 advertising
    payload octets when given, and the DO bit when dnssec (which needs EDNS0)."""
    if dnssec and payload is None:
        raise ValueError("the DO bit needs EDNS0: give a payload")
    query = dns.message.make_query(qname, rdtype, use_edns=None if payload is None else 0,
                                   payload=payload, want_dnssec=dnssec)
    query.flags &= ~dns.flags.RD
    return query


def _is_authoritative(response: dns.message.Message) -> bool:
    return bool(response.flags & dns.flags.AA) and response.rcode() in (
        dns.rcode.NOERROR, dns.rcode.NXDOMAIN)


class Named:
    """One private named; `with Named(dir, body) as ns:` starts it, waits until every zone
    has loaded, and always stops it.

    `wrapper` is a command prefix named runs under (e.g. `valgrind --tool=memcheck ...`): it
    gets longer start and stop time-outs. `env` is added to the inherited environment (e.g.
    LD_PRELOAD and ASAN_OPTIONS for a driver built with AddressSanitizer). `bind` is the BIND
    to run (default: the one DLZBENCH_BIND selects, 9.18 when unset).
    """

    def __init__(self, run_dir: Path, body: str, *, threads: int = 1, port: int | None = None,
                 extra_options: str = "", wrapper: Sequence[str] = (),
                 env: Mapping[str, str] | None = None,
                 bind: bindversion.Bind | None = None) -> None:
        self.bind = bind or bindversion.selected()
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.threads = threads
        self.wrapper = list(wrapper)
        self.env = dict(env) if env is not None else None
        slowdown = _WRAPPED_SLOWDOWN if self.wrapper else 1.0
        self.start_timeout = _ENTER_TIMEOUT * slowdown
        self.stop_timeout = _STOP_TIMEOUT * slowdown
        self.port = port or free_port()
        self.control_port = self._other_free_port()
        self.conf_path = self.run_dir / "named.conf"
        self.rndc_conf_path = self.run_dir / "rndc.conf"
        self.log_path = self.run_dir / "named.log"
        self._proc: ManagedProcess | None = None
        self._log_start = 0
        self._scanned_to = 0
        secret = base64.b64encode(secrets.token_bytes(32)).decode()
        self.conf_path.write_text(self._named_conf(body, extra_options, secret))
        self.rndc_conf_path.write_text(self._rndc_conf(secret))

    def _other_free_port(self) -> int:
        while (port := free_port()) == self.port:
            pass
        return port

    # --- configuration ------------------------------------------------------------------------

    def _key_clause(self, secret: str) -> str:
        return f'key "{_KEY_NAME}" {{\n\talgorithm hmac-sha256;\n\tsecret "{secret}";\n}};\n'

    def _named_conf(self, body: str, extra_options: str, secret: str) -> str:
        d = self.run_dir
        lock_file = f"\tlock-file {_quote(d / 'named.lock')};\n" if self.bind.lock_file else ""
        return f"""// Generated by dlzbench for a private instance; edits are overwritten.
options {{
\tdirectory {_quote(d)};
\tpid-file {_quote(d / "named.pid")};
{lock_file}\tsession-keyfile {_quote(d / "session.key")};
\tmanaged-keys-directory {_quote(d)};
\tdump-file {_quote(d / "named_dump.db")};
\tstatistics-file {_quote(d / "named.stats")};
\tmemstatistics-file {_quote(d / "named.memstats")};
\tsecroots-file {_quote(d / "named.secroots")};
\trecursing-file {_quote(d / "named.recursing")};
\tlisten-on port {self.port} {{ 127.0.0.1; }};
\tlisten-on-v6 {{ none; }};
\trecursion no;
\tnotify no;
\tdnssec-validation no;
\tallow-transfer {{ 127.0.0.1; ::1; }};
\t// The benchmark's data has owner names of every kind; serve them, do not judge them.
\tcheck-names primary ignore;
\tcheck-names secondary ignore;
\tcheck-names response ignore;
{extra_options}
}};

{self._key_clause(secret)}
controls {{
\tinet 127.0.0.1 port {self.control_port} allow {{ 127.0.0.1; }} keys {{ "{_KEY_NAME}"; }};
}};

// Messages logged before this statement takes effect reach the same file through -L.
logging {{
\tchannel dlzbench_log {{
\t\tfile {_quote(self.log_path)};
\t\tseverity dynamic;
\t\tprint-time yes;
\t\tprint-category yes;
\t\tprint-severity yes;
\t}};
\tcategory default {{ dlzbench_log; }};
\tcategory lame-servers {{ null; }};
}};

{body}
"""

    def _rndc_conf(self, secret: str) -> str:
        return f"""{self._key_clause(secret)}
options {{
\tdefault-key "{_KEY_NAME}";
\tdefault-server 127.0.0.1;
\tdefault-port {self.control_port};
}};
"""

    # --- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Exec named and return at once; `exec_time` is then the start of the startup clock."""
        if self._proc is not None:
            return
        # named's own parser, run first so that a config error fails start() itself; errors
        # only a running named finds (a DLZ driver that will not load) fail the wait instead.
        run_checked([*self.bind.checkconf, str(self.conf_path)],
                    f"named config check of {self.conf_path}", cwd=self.run_dir, timeout=60)
        # -L sends what named logs before it has read the logging statement (a config error,
        # for one) to our log file instead of syslog.
        argv = [*self.bind.command([*self.wrapper, "/usr/sbin/named"]), "-f",
                "-n", str(self.threads), "-c", str(self.conf_path), "-L", str(self.log_path)]
        env = {**os.environ, **self.env} if self.env is not None else None
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._scanned_to = self._log_start
        self._proc = ManagedProcess("named", argv, self.log_path, cwd=self.run_dir, env=env)
        self._proc.start()

    @property
    def exec_time(self) -> float:
        """time.monotonic() just before named was exec'd."""
        return self._running_proc().exec_time

    def _running_proc(self) -> ManagedProcess:
        if self._proc is None:
            raise UserError("named is not started")
        return self._proc

    def wait_answers(self, qname: str, rdtype: str = "SOA", timeout: float = 120.0) -> float:
        """Poll until named answers qname/rdtype authoritatively; seconds since exec."""
        proc = self._running_proc()
        query = _non_recursive_query(qname, rdtype)
        what = f"authoritative answer for {qname}/{rdtype}"
        deadline = time.monotonic() + timeout
        while True:
            response = self._ask_udp(query)
            if response is not None and _is_authoritative(response):
                return round(time.monotonic() - proc.exec_time, 3)
            if not proc.running():
                self._fail(f"named exited before any {what}")
            failed = self._zone_load_failure()
            if failed is not None:
                self._fail(f"no {what}: {failed}")
            if time.monotonic() > deadline:
                self._fail(f"no {what} from named within {timeout:.0f}s")
            time.sleep(_POLL_PAUSE)

    def answers(self, qname: str, rdtype: str = "SOA") -> bool:
        """One query, no waiting and no stopping: does named answer it authoritatively now?"""
        query = _non_recursive_query(qname, rdtype)
        response = self._ask_udp(query)
        return response is not None and _is_authoritative(response)

    def _fail(self, problem: str) -> NoReturn:
        tail = self._running_proc().log_tail(30)  # read first: stopping appends shutdown lines
        self.stop()
        raise UserError(f"{problem}; log {self.log_path}:\n{tail}")

    def _ask_udp(self, query: dns.message.Message) -> dns.message.Message | None:
        """One try; None when nothing answered in time.

        A connected socket, so that "nothing listens yet" comes back at once as a refusal
        instead of costing the whole per-try timeout.
        """
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(_POLL_TRY_TIMEOUT)
            try:
                sock.connect(("127.0.0.1", self.port))
                sock.send(query.to_wire())
                while True:
                    response = dns.message.from_wire(sock.recv(65535))
                    if query.is_response(response):
                        return response
            except (OSError, dns.exception.DNSException):
                return None

    def __enter__(self) -> Named:
        self.start()
        try:
            self.wait_running()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_running(self, timeout: float | None = None) -> None:
        """Until named logs that it runs with every zone loaded (default: start_timeout)."""
        self._running_proc().wait_ready(self._zones_loaded, timeout or self.start_timeout)

    def _zone_load_failure(self) -> str | None:
        """named's first "zone ... not loaded due to errors" line of this start, if any.

        A zone that fails to load never answers, and waiting for it costs the whole startup
        timeout (an hour for `scale`): a 100,000-record zone with an over-long RRset did. The
        log is read on from where the last look ended (named logs a line per zone: ~95 MB at a
        million zones), whole lines only.
        """
        if not self.log_path.exists():
            return None
        with open(self.log_path, "rb") as log:
            log.seek(self._scanned_to)
            chunk = log.read()
        whole = chunk[:chunk.rfind(b"\n") + 1]
        self._scanned_to += len(whole)
        found = _ZONE_NOT_LOADED.search(whole)
        return found.group(0).decode(errors="replace") if found else None

    def _zones_loaded(self) -> bool:
        """Has this start of named logged that it runs with all its zones loaded?"""
        with open(self.log_path, "rb") as log:
            log.seek(self._log_start)
            return _RUNNING_LINE.search(log.read()) is not None

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.stop(timeout=self.stop_timeout)

    def reload(self) -> None:
        """`rndc reload` over this instance's own control channel and key."""
        self._running_proc()
        run_checked([*self.bind.rndc, "-c", str(self.rndc_conf_path), "reload"], "rndc reload",
                    cwd=self.run_dir, timeout=60)

    def requests_received(self) -> int:
        """IPv4 requests this process has received so far, from its own statistics (`rndc
        stats`): which of several named processes sharing a port a load reached."""
        self._running_proc()
        stats = self.run_dir / "named.stats"
        stats.unlink(missing_ok=True)  # rndc stats appends; one dump is read
        run_checked([*self.bind.rndc, "-c", str(self.rndc_conf_path), "stats"], "rndc stats",
                    cwd=self.run_dir, timeout=60)
        found = _REQUESTS_RECEIVED.search(stats.read_text())
        return int(found.group(1)) if found else 0  # a counter at 0 is not listed

    # --- clients ------------------------------------------------------------------------------

    def query(self, qname: str | dns.name.Name, rdtype: str, *, tcp: bool = False,
              timeout: float = 5.0, payload: int | None = None,
              dnssec: bool = False) -> dns.message.Message:
        """One non-recursive query; with EDNS0 advertising `payload` octets when given, and
        the DO bit when dnssec."""
        query = _non_recursive_query(qname, rdtype, payload, dnssec)
        send = dns.query.tcp if tcp else dns.query.udp
        return send(query, "127.0.0.1", port=self.port, timeout=timeout)

    def pids(self) -> list[int]:
        return self._proc.pids() if self._proc is not None else []

    def version(self) -> str:
        # "BIND 9.18.49-1~deb12u3-Debian (Extended Support Version) <id:>" -> "BIND 9.18.49"
        words = self.bind.version_line().split()
        return f"{words[0]} {words[1].split('-')[0]}"


# --- memory checking: named under Valgrind, or loading a driver built with ASan ---------------


def valgrind_wrapper(log_file: Path, suppressions: Sequence[Path] = ()) -> list[str]:
    """The Valgrind memcheck prefix for Named(wrapper=...); the report goes to log_file."""
    return ["valgrind", "--tool=memcheck", "--num-callers=40", "--keep-debuginfo=yes",
            "--leak-check=full", "--show-leak-kinds=definite", f"--log-file={log_file}",
            *(f"--suppressions={path}" for path in suppressions)]


def valgrind_errors(report: str, our_code: re.Pattern[str]) -> list[str]:
    """Memcheck errors (blank-line separated blocks) whose stack passes through our_code.

    named and its libraries have their own reports (leaks at exit, uninitialised bytes in
    OpenSSL); only a stack through our code is ours to fix.
    """
    blocks = re.split(r"\n==\d+== \n", report)
    return [b for b in blocks if our_code.search(b) and re.search(
        r"Invalid (read|write|free)|uninitialised|Mismatched|definitely lost|overlap", b)]


def asan_environment(log_dir: Path, bind: bindversion.Bind | None = None) -> dict[str, str]:
    """Environment for Named(env=...) when it loads a driver built with -fsanitize=address.

    named itself is not instrumented, so the ASan runtime is preloaded; LeakSanitizer is off
    because named's own allocations at exit are not ours. Reports go to log_dir/asan.*. The
    runtime is that of the compiler that built the driver for `bind` (default: the selected).
    """
    gcc = (bind or bindversion.selected()).command(["gcc", "-print-file-name=libasan.so"],
                                                   with_drivers=False)
    libasan = subprocess.run(gcc, capture_output=True, text=True, check=True).stdout.strip()
    return {"LD_PRELOAD": libasan,
            "ASAN_OPTIONS": f"detect_leaks=0:abort_on_error=0:log_path={log_dir}/asan"}
