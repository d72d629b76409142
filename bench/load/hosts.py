"""Where a load tool runs: here (None), or on a load host reached through OpenSSH
(`--load-from ssh://[user@]host[:port]`).

A `LoadHost` is open for one command's whole run. Opening it starts one ssh session (the
master of an OpenSSH connection every later ssh and scp of the run shares) whose remote shell
makes a private temporary directory (mktemp -d, mode 0700) and then waits for its standard
input to end. The query files and the prober are copied into that directory; every tool runs
in it through a small shell wrapper that records its shell's pid there, runs the tool in the
foreground and then prints the shell's `times` (the CPU the tool used, from the kernel's
accounting of the reaped child on the load host). Closing the host, or this process ending in
any way (even SIGKILL: the kernel closes the session's standard input then), ends that input:
the remote shell kills every tool still recorded and removes the directory. Nothing is left
on the load host.

The tools on the load host are its own: dnsperf and resperf from its `dnsperf` package,
coreutils' stdbuf, procps' pkill; their versions are read when the host is opened and kept in
the results' metadata. The prober is built here and copied over (libc only; the load host must
have this machine's architecture and a glibc at least as new).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shlex
import signal
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from base.errors import UserError

SSH = "/usr/bin/ssh"
SCP = "/usr/bin/scp"
# Never ask for a password or a host key (a run must not stop at a prompt), give up on a host
# that does not answer within 10 s, and notice a connection that dies mid-run.
_SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3")
_URL = re.compile(r"^ssh://(?:(?P<user>[A-Za-z0-9._][A-Za-z0-9._-]*)@)?"
                  r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(?P<port>\d+))?/?$")

# The session's remote shell: the private directory, its path on the first line, then wait for
# the end of standard input; then kill what is still recorded there and remove it.
_SESSION = ('umask 077; d=$(mktemp -d "${TMPDIR:-/tmp}/dlzbench-load.XXXXXXXX") || exit 1; '
            'echo "$d"; cat >/dev/null; '
            'for f in "$d"/job-*.pid; do [ -e "$f" ] || continue; p=$(cat "$f"); '
            'pkill -KILL -P "$p"; kill -KILL "$p"; done 2>/dev/null; rm -rf "$d"')
# One tool run: its shell's pid recorded (and printed, to signal it), the tool in the
# foreground, then the CPU of the reaped tool (the second line of `times`).
_JOB = ('cd "$0" || exit 1; echo $$ > "$0/job-$$.pid"; echo "dlzbench-job $$" >&2; "$@"; '
        's=$?; rm -f "$0/job-$$.pid"; echo dlzbench-times >&2; times >&2; exit $s')
_JOB_PID = re.compile(r"^dlzbench-job (\d+)$", re.M)
_TIMES = re.compile(r"^dlzbench-times\n.*\n(\d+)m([\d.]+)s (\d+)m([\d.]+)s$", re.M)
# What the load host says about itself: tools' versions, machine.
# dnsperf and resperf print "Version 2.10.0" (2.14: "Version: 2.14.0") with their usage.
_FACTS = ("echo dnsperf=$(dnsperf -h 2>&1 | sed -n 's/^Version:* *//p' | head -n1); "
          "echo resperf=$(resperf -h 2>&1 | sed -n 's/^Version:* *//p' | head -n1); "
          "echo package=$(dpkg-query -W -f='${Version}' dnsperf 2>/dev/null); "
          "echo machine=$(uname -m); echo kernel=$(uname -r); "
          "echo os=$(. /etc/os-release 2>/dev/null && echo \"$PRETTY_NAME\"); "
          "echo cpu_count=$(nproc); "
          "echo cpu_model=$(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo | head -n1); "
          "echo glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null); "
          "for t in stdbuf pkill; do command -v $t >/dev/null || echo missing=$t; done")
_LIVE: dict[int, LoadHost] = {}
_LOCAL_PREFIX = "dlzbench-ssh-"


@dataclass(frozen=True)
class SshUrl:
    """ssh://[user@]host[:port], as given."""

    text: str
    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> SshUrl:
        found = _URL.match(text.strip())
        if found is None:
            raise UserError(f"--load-from {text!r}: not ssh://[user@]host[:port]")
        port = found.group("port")
        if port is not None and not 0 < int(port) < 65536:
            raise UserError(f"--load-from {text}: port {port} is not between 1 and 65535")
        return cls(text.strip(), found.group("host").strip("[]"), found.group("user"),
                   int(port) if port else None)

    def destination(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host


def parse_load_from(texts: Sequence[str]) -> list[SshUrl]:
    """--load-from URLs, each checked, none given twice."""
    urls = [SshUrl.parse(text) for text in texts]
    seen = set()
    for url in urls:
        key = (url.user, url.host, url.port)
        if key in seen:
            raise UserError(f"--load-from {url.text} is given twice")
        seen.add(key)
    return urls


class LoadHost:
    """One load host over ssh, open for a run (see the module's docstring)."""

    def __init__(self, url: SshUrl, ssh_config: Path | None = None) -> None:
        self.url = url
        self.ssh_config = ssh_config
        self.directory = ""  # the private directory on the load host, once open
        self.facts: dict[str, str] = {}
        _remove_stale_local_dirs()
        # Here: the connection's control socket (a unix socket path must stay short, hence
        # /tmp), in a directory named after this process, removed by the next run if this one
        # is killed outright.
        self._local = Path(tempfile.mkdtemp(prefix=f"{_LOCAL_PREFIX}{os.getpid()}-"))
        self._control = self._local / "control"
        self._session: subprocess.Popen[bytes] | None = None
        self._copied: dict[Path, str] = {}
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return self.url.text

    # --- commands ---------------------------------------------------------------------------

    def _options(self, port_flag: str) -> list[str]:
        config = ["-F", str(self.ssh_config)] if self.ssh_config else []
        port = [port_flag, str(self.url.port)] if self.url.port else []
        return [*config, *_SSH_OPTIONS, "-o", f"ControlPath={self._control}", *port]

    def ssh(self, remote: str) -> list[str]:
        """ssh running the shell command `remote` on the load host, over the session's
        connection; no standard input."""
        return [SSH, "-n", *self._options("-p"), "-o", "ControlMaster=no",
                self.url.destination(), remote]

    def command(self, argv: Sequence[str]) -> list[str]:
        """argv run on the load host in the private directory, through the job wrapper."""
        script = " ".join(shlex.quote(word) for word in ("sh", "-c", _JOB, self.directory,
                                                         *argv))
        return self.ssh(script)

    def remote_path(self, name: str) -> str:
        return f"{self.directory}/{name}"

    # --- life cycle -------------------------------------------------------------------------

    def open(self) -> None:
        """Connect, make the private directory, read the host's facts; a host that cannot be
        reached or lacks a tool is one UserError naming it."""
        argv = [SSH, *self._options("-p"), "-o", "ControlMaster=yes",
                "-o", "ControlPersist=no", self.url.destination(), _SESSION]
        _LIVE[id(self)] = self
        self._session = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
        line = self._session.stdout.readline().decode(errors="replace").strip() \
            if self._session.stdout else ""
        if not line.startswith("/"):
            self._session.wait(timeout=30)
            error = _last_line(self._session.stderr.read() if self._session.stderr else b"")
            self.close()
            raise UserError(f"--load-from {self.label}: cannot open an ssh session: "
                            f"{error or 'no private directory made there'}")
        self.directory = line
        self.facts = self._read_facts()
        self._check_facts()

    def _read_facts(self) -> dict[str, str]:
        out = self.run_text(_FACTS, "reading the load host's tools")
        facts: dict[str, str] = {}
        for line in out.splitlines():
            key, _, value = line.partition("=")
            if key == "missing":
                facts["missing"] = f"{facts.get('missing', '')} {value}".strip()
            elif key:
                facts[key] = value.strip()
        return facts

    def _check_facts(self) -> None:
        missing = [tool for tool in ("dnsperf", "resperf") if not self.facts.get(tool)]
        missing += self.facts.get("missing", "").split()
        if missing:
            raise UserError(f"--load-from {self.label}: {', '.join(missing)} not found there "
                            "(install Debian's dnsperf, coreutils and procps packages: "
                            "docs/method/load-from.md)")
        here = subprocess.run(["uname", "-m"], capture_output=True, text=True,
                              check=False).stdout.strip()
        if self.facts.get("machine") != here:
            raise UserError(f"--load-from {self.label}: a {self.facts.get('machine')} host; "
                            f"the prober copied there is built for {here}")

    def close(self) -> None:
        """End the session: the load host kills what still runs in the directory and
        removes it. Idempotent."""
        session, self._session = self._session, None
        _LIVE.pop(id(self), None)
        if session is not None:
            if session.stdin is not None:
                try:
                    session.stdin.close()
                except OSError:
                    pass
            try:
                session.wait(timeout=30)
            except subprocess.TimeoutExpired:
                session.kill()
                session.wait()
            for stream in (session.stdout, session.stderr):
                if stream is not None:
                    stream.close()
        for path in self._local.glob("*"):
            path.unlink(missing_ok=True)
        if self._local.exists():
            self._local.rmdir()

    def __enter__(self) -> LoadHost:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- files and runs ---------------------------------------------------------------------

    def put(self, local: Path, name: str | None = None) -> str:
        """local copied into the private directory once (scp); its path there."""
        local = local.resolve()
        with self._lock:
            if local in self._copied:
                return self._copied[local]
            target = self.remote_path(name or _copy_name(local))
            argv = [SCP, "-q", "-p", *self._options("-P"), "-o", "ControlMaster=no",
                    str(local), f"{_scp_host(self.url)}:{target}"]
            _checked(argv, f"copying {local.name} to {self.label}")
            self._copied[local] = target
            return target

    def read(self, path: str) -> str:
        """A file in the private directory, as text ('' if it is not there)."""
        return self.run_text(f"cat {shlex.quote(path)} 2>/dev/null; true",
                             f"reading {path} on {self.label}")

    def run_text(self, remote: str, what: str, timeout: float = 60) -> str:
        return _checked(self.ssh(remote), what, timeout=timeout)

    def signal_job(self, job: int, sig: signal.Signals) -> None:
        """Send sig to the tool a job wrapper runs (its shell's child)."""
        name = sig.name.removeprefix("SIG")
        subprocess.run(self.ssh(f"pkill -{name} -P {job}"), capture_output=True, timeout=30,
                       check=False)

    def listing(self) -> list[str]:
        """What the private directory holds now (for tests and checks)."""
        return self.run_text(f"ls -A {shlex.quote(self.directory)}", "listing").split()

    def described(self) -> dict[str, str]:
        """The load host as the results' metadata records it."""
        facts = {k: v for k, v in self.facts.items() if k != "missing"}
        package = facts.pop("package", "")
        if facts.get("dnsperf"):
            facts["dnsperf"] = f"dnsperf {facts['dnsperf']}" + (
                f" (Debian {package})" if package else "")
        if facts.get("resperf"):
            facts["resperf"] = f"resperf {facts['resperf']}"
        return {"url": self.label, **facts}


def job_pid(output: str) -> int | None:
    """The job wrapper's shell pid, from its output."""
    found = _JOB_PID.search(output)
    return int(found.group(1)) if found else None


def job_cpu_seconds(output: str) -> float | None:
    """The CPU seconds (user + system) of the tool a job wrapper ran, from its `times`."""
    found = _TIMES.search(output)
    if found is None:
        return None
    minutes_u, seconds_u, minutes_s, seconds_s = found.groups()
    return 60 * (int(minutes_u) + int(minutes_s)) + float(seconds_u) + float(seconds_s)


def open_hosts(urls: Sequence[SshUrl], ssh_config: Path | None) -> list[LoadHost]:
    """Every load host opened, or none (a host that fails closes those already open)."""
    hosts: list[LoadHost] = []
    try:
        for url in urls:
            host = LoadHost(url, ssh_config)
            hosts.append(host)
            host.open()
    except BaseException:
        close_hosts(hosts)
        raise
    return hosts


def close_hosts(hosts: Sequence[LoadHost]) -> None:
    for host in hosts:
        host.close()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _copy_name(local: Path) -> str:
    # Two files of one name (two query files) must not overwrite each other there.
    return f"{hashlib.sha256(str(local).encode()).hexdigest()[:8]}-{local.name}"


def _scp_host(url: SshUrl) -> str:
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{url.user}@{host}" if url.user else host


def _checked(argv: Sequence[str], what: str, timeout: float = 120) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{what} failed: {exc}") from exc
    if done.returncode != 0:
        raise UserError(f"{what} failed (exit {done.returncode}): "
                        f"{_last_line(done.stderr.encode())}")
    return done.stdout


def _last_line(data: bytes) -> str:
    lines = [line for line in data.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _remove_stale_local_dirs() -> None:
    """Control directories of runs whose process is gone (killed with SIGKILL)."""
    for path in Path(tempfile.gettempdir()).glob(f"{_LOCAL_PREFIX}*-*"):
        owner = path.name.removeprefix(_LOCAL_PREFIX).split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            for entry in path.glob("*"):
                entry.unlink(missing_ok=True)
            path.rmdir()


def _close_all() -> None:
    for host in list(_LIVE.values()):
        host.close()


atexit.register(_close_all)
