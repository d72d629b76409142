"""A private BIND `named` (9.18, or 9.20: servers/bindversion.py): generated config, loopback
port, control channel and log in one run directory.

named is started as the service user (base.process; no -u, so no part of it runs as root)
with every file it writes (pid, lock, session key, managed keys, dumps, log) inside the run
directory, so it never touches /etc/bind (except reading the stock bind.keys trust anchors),
/var/cache/bind or /run/named.
"""

from __future__ import annotations

import base64
import re
import secrets
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from base.process import give_to_service_user, run_checked, write_private
from base.transports import TlsFiles
from servers import bindversion
from servers.dnsserver import DnsServer, ReceiveBuffer

_KEY_NAME = "dlzbench-rndc"
# A wrapper such as Valgrind makes named many times slower to start and to shut down (memcheck
# writes its report at exit, which a SIGKILL after the normal time-out would lose).
_WRAPPED_SLOWDOWN = 10.0
# The counter of a statistics dump (statistics-file) holding every query received over IPv4.
_REQUESTS_RECEIVED = re.compile(r"^\s*(\d+) IPv4 requests received$", re.M)


def _quote(path: Path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


class Named(DnsServer):
    """One private named; `with Named(dir, body) as ns:` starts it, waits until every zone
    has loaded, and always stops it.

    `wrapper` is a command prefix named runs under (e.g. `valgrind --tool=memcheck ...`): it
    gets longer start and stop time-outs. `env` is named's environment besides PATH and the
    locale (base.process.service_environment; e.g. LD_PRELOAD and ASAN_OPTIONS for a driver
    built with AddressSanitizer), never a password. `bind` is the BIND to run (default: the
    one DLZBENCH_BIND selects, 9.18 when unset).
    """

    program = "named"
    # named logs this once every zone has loaded (or failed to); before it, a query for a
    # zone file still loading gets SERVFAIL although named already answers.
    ready_line = re.compile(rb" general: notice: running$", re.M)
    zone_loaded_line = re.compile(rb": loaded serial ")
    zone_failed_line = re.compile(rb"zone \S+: not loaded due to errors\.", re.M)

    def __init__(self, run_dir: Path, body: str, *, threads: int = 1, port: int | None = None,
                 extra_options: str = "", wrapper: Sequence[str] = (),
                 env: Mapping[str, str] | None = None,
                 bind: bindversion.Bind | None = None) -> None:
        super().__init__(run_dir, threads=threads, port=port, env=env)
        self.bind = bind or bindversion.selected()
        self.wrapper: list[str] = []
        self.run_under(wrapper)
        self.control_port = self.other_free_port()
        # udp-receive-buffer (BIND 9.18 and 9.20; 0, the default, leaves the kernel's
        # rmem_default, 212,992 bytes here): named's receive queues overflowed under
        # open-loop load in the 2026-11-24 native sweep, so it is set, to rmem_max.
        self.receive_buffer = ReceiveBuffer.sized_to_rmem_max("udp-receive-buffer")
        self.conf_path = self.run_dir / "named.conf"
        self.rndc_conf_path = self.run_dir / "rndc.conf"
        self._conf = (body, extra_options, base64.b64encode(secrets.token_bytes(32)).decode())
        self.tls: TlsFiles | None = None
        self._write_conf()

    def _write_conf(self) -> None:
        # Both hold the control channel's key, and named.conf a DLZ driver's arguments.
        body, extra_options, secret = self._conf
        write_private(self.conf_path, self._named_conf(body, extra_options, secret))
        write_private(self.rndc_conf_path, self._rndc_conf(secret))

    def serve_tls(self, files: TlsFiles) -> None:
        """From the next start, DNS over TLS too (BIND 9.18's own `tls` statement and a
        `listen-on ... tls` on a port of its own: tls_port)."""
        self.tls = files
        self.tls_port = self.other_free_port()
        self._write_conf()

    def _tls_clauses(self) -> tuple[str, str]:
        """The top-level `tls` statement and the options' DoT listener (none without TLS)."""
        if self.tls is None:
            return "", ""
        return (f'tls dlzbench-dot {{\n\tkey-file {_quote(self.tls.key)};\n'
                f'\tcert-file {_quote(self.tls.cert)};\n}};\n',
                f"\tlisten-on port {self.tls_port} tls dlzbench-dot {{ {self.host}; }};\n")

    def run_under(self, wrapper: Sequence[str]) -> None:
        """From the next start, run under the command prefix `wrapper` (Valgrind), with the
        longer start and stop time-outs it needs; for a named a ServerKind built."""
        if self.wrapper:
            raise ValueError(f"named already runs under {self.wrapper[0]}")
        if not wrapper:
            return
        self.wrapper = list(wrapper)
        self.start_timeout *= _WRAPPED_SLOWDOWN
        self.stop_timeout *= _WRAPPED_SLOWDOWN

    # --- configuration ------------------------------------------------------------------------

    def _receive_buffer_option(self) -> str:
        size = self.receive_buffer.bytes
        return "" if size is None else f"\tudp-receive-buffer {size};\n"

    def _key_clause(self, secret: str) -> str:
        return f'key "{_KEY_NAME}" {{\n\talgorithm hmac-sha256;\n\tsecret "{secret}";\n}};\n'

    def _named_conf(self, body: str, extra_options: str, secret: str) -> str:
        d = self.run_dir
        lock_file = f"\tlock-file {_quote(d / 'named.lock')};\n" if self.bind.lock_file else ""
        tls, listen_tls = self._tls_clauses()
        return f"""// Generated by dlzbench for a private instance; edits are overwritten.
{tls}options {{
\tdirectory {_quote(d)};
\tpid-file {_quote(d / "named.pid")};
{lock_file}\tsession-keyfile {_quote(d / "session.key")};
\tmanaged-keys-directory {_quote(d)};
\tdump-file {_quote(d / "named_dump.db")};
\tstatistics-file {_quote(d / "named.stats")};
\tmemstatistics-file {_quote(d / "named.memstats")};
\tsecroots-file {_quote(d / "named.secroots")};
\trecursing-file {_quote(d / "named.recursing")};
\tlisten-on port {self.port} {{ {self.host}; }};
{listen_tls}\tlisten-on-v6 {{ none; }};
\t// TCP and DoT clients at once: 150 by default, fewer than the open-loop prober keeps in
\t// flight over tcp-new (a connection per query, up to a time-out's worth), and the
\t// listen queue past the default 10 for as many connections opened at once
\t// (docs/method/transports.md).
\ttcp-clients 10000;
\ttcp-listen-queue 1024;
{self._receive_buffer_option()}\trecursion no;
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

    def check_config(self) -> None:
        # named's own parser, run first so that a config error fails start() itself; errors
        # only a running named finds (a DLZ driver that will not load) fail the wait instead.
        run_checked([*self.bind.checkconf, str(self.conf_path)],
                    f"named config check of {self.conf_path}", cwd=self.run_dir, timeout=60)

    def argv(self) -> list[str]:
        # -L sends what named logs before it has read the logging statement (a config error,
        # for one) to our log file instead of syslog.
        return self.bind.command([*self.wrapper, "/usr/sbin/named", "-f", "-n",
                                  str(self.threads), "-c", str(self.conf_path), "-L",
                                  str(self.log_path)], as_service_user=True)

    def starts_as_root(self) -> bool:
        """BIND 9.20 from its root: its mount namespace is made as root (bindversion)."""
        return self.bind.root is not None

    def reload(self) -> None:
        """`rndc reload` over this instance's own control channel and key."""
        self.rndc("reload")

    def rndc(self, *args: str) -> None:
        """One rndc command over this instance's own control channel and key."""
        self.control("rndc", [*self.bind.rndc, "-c", str(self.rndc_conf_path)], *args)

    def requests_received(self) -> int:
        """IPv4 requests this process has received so far, from its own statistics (`rndc
        stats`): which of several named processes sharing a port a load reached."""
        self._running_proc()
        stats = self.run_dir / "named.stats"
        stats.unlink(missing_ok=True)  # rndc stats appends; one dump is read
        self.rndc("stats")
        found = _REQUESTS_RECEIVED.search(stats.read_text())
        return int(found.group(1)) if found else 0  # a counter at 0 is not listed

    def version(self) -> str:
        # "BIND 9.18.49-1~deb12u3-Debian (Extended Support Version) <id:>" -> "BIND 9.18.49"
        words = self.bind.version_line().split()
        return f"{words[0]} {words[1].split('-')[0]}"


# --- memory checking: named under Valgrind, or loading a driver built with ASan ---------------


def valgrind_wrapper(log_file: Path, suppressions: Sequence[Path] = ()) -> list[str]:
    """The Valgrind memcheck prefix for Named(wrapper=...); the report goes to log_file, made
    here the service user's, whom named (and so Valgrind) runs as."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.touch()
    give_to_service_user(log_file)
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


def ubsan_environment(log_dir: Path) -> dict[str, str]:
    """Environment for Named(env=...) when it loads a driver built with -fsanitize=undefined:
    UBSan's runtime comes with the driver (no preload); the first report stops named, its
    text in log_dir/ubsan.*."""
    return {"UBSAN_OPTIONS": f"halt_on_error=1:print_stacktrace=1:log_path={log_dir}/ubsan"}


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
