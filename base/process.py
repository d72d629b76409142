"""Start, watch and stop one private server process; shared by every server module.

Every process is started in its own session (process group) so that stopping it also stops
whatever it forked, and is remembered until stopped so that an exit, an exception, Ctrl-C or
SIGTERM never leaves one behind; a watchdog process (base/watchdog.py) kills the groups still
running if this process dies without stopping them (SIGKILL).

A group is signalled by its id (the leader's pid) only while the leader is not reaped: a child
that has exited but was not waited for keeps its pid, so the id cannot be another process's
yet. stop() therefore waits for the leader's exit without reaping it, kills what is left of the
group, and only then reaps. A leader reaped earlier (running() polls) leaves its id free for
the kernel to give to any new process: what is left of its group is then found and signalled
process by process (pidfd), never by the id.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import json
import os
import pwd
import random
import secrets
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from base.errors import UserError
from base.paths import REPO_ROOT
from base.permissions import READ, SEARCH, Ids, first_closed
from base.watchdog import process_start_time, signal_leftovers, stat_fields

_LIVE: dict[int, ManagedProcess] = {}

# Ports below this are left alone: the standard ports of every server we run are under it
# (and, being above 1024, no server needs root to bind one).
_PORT_FLOOR = 20000

# The unprivileged system user every process the suite starts runs as when the suite itself
# runs as root (`make deps` creates it): a memory bug in a server, or in a driver inside named
# (which parses names and rows, and may listen on a network with `run --listen`), is then
# that user's, not root's. One user for every server and database server: they all work in
# the run directories the suite hands to it (give_to_service_user). Run as another user, the
# suite's processes run as that user.
SERVICE_USER = "dlzbench"
SETPRIV = "/usr/bin/setpriv"

# What a started process keeps of the suite's environment: where programs are, and the
# locale. Nothing else: the suite's environment may hold a password (PGPASSWORD, MYSQL_PWD,
# LDAP_PASSWORD for a lent server), and a process's environment is there for its whole life
# (/proc/PID/environ, a core dump).
_KEPT_ENVIRONMENT = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ")


def service_user() -> str | None:
    """Whom the suite's processes run as: SERVICE_USER when the suite runs as root, else None
    (the invoking user, who is not root)."""
    return SERVICE_USER if os.geteuid() == 0 else None


@functools.cache
def _user_ids(user: str) -> tuple[int, int, tuple[int, ...]]:
    """(uid, gid, every group) of user; a UserError if it does not exist."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise UserError(f"the system user {user!r} does not exist (`make deps`, as root, "
                        f"creates {SERVICE_USER}, whom the suite's servers run as)") from None
    return entry.pw_uid, entry.pw_gid, tuple(os.getgrouplist(user, entry.pw_gid))


def give_to_service_user(path: Path, *, tree: bool = False) -> None:
    """path, and with tree everything under it (a symlink itself, never what it points to),
    owned by the service user and its group: a server may then write there, or read a file
    only its owner may. Nothing when the suite does not run as root."""
    user = service_user()
    if user is None:
        return
    uid, gid, _ = _user_ids(user)
    os.chown(path, uid, gid, follow_symlinks=False)
    if not tree:
        return
    for top, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.chown(os.path.join(top, name), uid, gid, follow_symlinks=False)


def dropping_to_service_user(argv: Sequence[str]) -> list[str]:
    """argv, for a process that starts as root (to enter a namespace only root may: a network
    namespace, BIND 9.20's mount namespace) and then runs as the service user: setpriv first.
    Numeric ids, which mean the same inside a root whose /etc/passwd is another system's
    (servers/bindversion.py). Unchanged when the suite does not run as root."""
    user = service_user()
    if user is None:
        return list(argv)
    uid, gid, groups = _user_ids(user)
    return [SETPRIV, f"--reuid={uid}", f"--regid={gid}",
            f"--groups={','.join(str(g) for g in groups)}", "--", *argv]


def service_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a process the suite starts: PATH and the locale of the suite's
    own, and `extra` (which must hold no secret: a password reaches a server in a file)."""
    return {**{key: os.environ[key] for key in _KEPT_ENVIRONMENT if key in os.environ},
            **(extra or {})}


def require_service_user_reaches(path: Path, what: str) -> None:
    """Refuse (UserError) a file the service user cannot read, or a directory it cannot
    search, naming the directory above it that shuts it out: the servers reading and writing
    there run as that user. Worked out from the files' modes and ACLs (base/permissions.py),
    not asked of a process of that user."""
    user = service_user()
    if user is None:
        return
    uid, _, groups = _user_ids(user)
    try:
        closed = first_closed(path, Ids(uid, groups), SEARCH if path.is_dir() else READ)
    except OSError as exc:
        raise UserError(f"{what} {path}: {exc.strerror}") from None
    if closed is None:
        return
    raise UserError(
        f"{what} {path}: the suite's servers run as the system user {user}, which cannot reach "
        f"it ({closed} is closed to it, mode {stat.S_IMODE(closed.stat().st_mode):o}); work "
        f"under a directory every user may search, or let {user} through with "
        f"`setfacl -m u:{user}:{'x' if closed.is_dir() else 'r'} {closed}`")


def new_run_dir(kind: str, base: Path | None = None) -> Path:
    """A fresh, uniquely named directory for one instance (two runs at once never share one),
    the service user's: the servers started under it write there."""
    root = Path(base or os.environ.get("DLZBENCH_RUN_DIR") or REPO_ROOT / "run")
    path = root / f"{kind}-{os.getpid()}-{secrets.token_hex(3)}"
    path.mkdir(parents=True)
    give_to_service_user(path)
    require_service_user_reaches(root.resolve(), "the run directory")
    return path


def keep_only_logs(directory: Path) -> None:
    """Delete a stopped server's data under directory, keeping its *.log files.

    A run's data sets (tens of MB even for the tiny profile, gigabytes at scale) would pile up
    run after run; the logs are what explains a failure afterwards.
    """
    if not directory.is_dir():
        return
    for path in sorted(directory.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_symlink() or path.is_file():
            if path.suffix != ".log":
                path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def write_private(path: Path, text: str) -> None:
    """Write text to path readable and writable by its owner only (0600) from its first byte:
    the file holds a key or a password (named.conf, rndc.conf, pdns.conf, ...). Its owner is
    the service user, whose servers read it (root, the suite, reads any file)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(fd, 0o600)  # a file already there keeps its mode through O_CREAT
        give_to_service_user(path)
        out.write(text)


def drop_page_cache() -> None:
    """Write back dirty pages and drop the kernel's page cache, dentries and inodes (the whole
    machine's: the kernel has no per-file knob), so the next read of any file comes from the
    disk: `faults`' db-cold start. Needs root."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        raise UserError(f"cannot drop the page cache (/proc/sys/vm/drop_caches): "
                        f"{exc.strerror}; run as root") from None


def port_is_free(port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def _ephemeral_floor() -> int:
    """The lowest port the kernel hands out as a client's source port."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback port free for both TCP and UDP and reserved for a while against every other
    picker on the machine (see _reserved_ports), picked at random to keep parallel runs apart.

    Never from the ephemeral range: a port free when checked could be taken as the source port
    of some client's socket (named's own queries, dnsperf, a database client) before our
    server binds it, and named then exits with "unable to listen on any configured interfaces".
    """
    top = max(_ephemeral_floor() - 1, _PORT_FLOOR + 1000)
    with _reserved_ports() as reserved:
        for _ in range(200):
            port = random.randint(_PORT_FLOOR, top)
            if port not in reserved and port_is_free(port):
                reserved[port] = time.time()
                return port
    raise UserError("no free loopback port found")


# Where free_port records the ports it handed out, for every process of this user on the
# machine: a port is free until its server binds it, which takes up to a database's start-up
# (mariadbd binds after InnoDB's recovery), so two pickers that check at once (two test
# workers, two threads starting a pg and a mysql fleet together) could both be handed it;
# one of them then fails with "Address already in use" (CI, 2026-11-28: mariadbd on 23198).
PORT_RESERVATIONS = Path(tempfile.gettempdir()) / f"dlzbench-ports-{os.getuid()}.json"
# How long a handed-out port stays reserved: longer than any server's start-up timeout
# (120 s), after which the port is bound or its server gave up.
_RESERVATION_S = 600.0


@contextlib.contextmanager
def _reserved_ports() -> Iterator[dict[int, float]]:
    """The ports handed out in the last _RESERVATION_S seconds (port -> when), under an
    exclusive lock on the record; what the caller adds is written back."""
    with open(PORT_RESERVATIONS, "a+", encoding="ascii") as record:
        fcntl.flock(record, fcntl.LOCK_EX)  # released when the file is closed
        record.seek(0)
        now = time.time()
        reserved = {port: when for port, when in _handed_out(record.read()).items()
                    if now - _RESERVATION_S < when <= now}
        yield reserved
        record.seek(0)
        record.truncate()
        record.write(json.dumps(reserved))


def _handed_out(text: str) -> dict[int, float]:
    """The record's ports and when each was handed out; none from a record that is empty (new)
    or not one we wrote whole (a writer killed mid-write)."""
    try:
        return {int(port): float(when) for port, when in json.loads(text).items()}
    except (ValueError, TypeError, AttributeError):
        return {}


class ManagedProcess:
    """One server process with its log file; a context manager that always stops it."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, *,
                 cwd: Path | None = None, env: Mapping[str, str] | None = None,
                 as_root: bool = False, pass_fds: Sequence[int] = ()) -> None:
        """The process runs as the service user, in service_environment(env). as_root: it
        starts as the suite's own user instead, because argv enters a namespace only root may
        (and then drops to the service user itself: dropping_to_service_user), or stands for
        another machine (a test's sshd). pass_fds: descriptors the process inherits (e.g. a
        directory it reaches as /proc/self/fd/N)."""
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.cwd = cwd
        self.env = service_environment(env)
        self.user = None if as_root else service_user()
        self.pass_fds = tuple(pass_fds)
        self.proc: subprocess.Popen[bytes] | None = None
        self.exec_time = 0.0  # time.monotonic() just before exec, for startup timing

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError(f"{self.name} is not running")
        return self.proc.pid

    def start(self) -> None:
        _install_signal_handlers()
        with open(self.log_path, "ab") as log:
            # The service user's, as the process is, also when it opens its log by name
            # (named's logging channel, NSD's logfile).
            give_to_service_user(self.log_path)
            self.exec_time = time.monotonic()
            try:
                self.proc = subprocess.Popen(
                    self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    cwd=self.cwd, env=self.env, start_new_session=True,
                    pass_fds=self.pass_fds, **as_user(self.user))
            except OSError as exc:
                raise UserError(f"cannot start {self.name} ({self.argv[0]}): {exc}") from exc
        _LIVE[self.proc.pid] = self
        try:
            # Its session's process group has its pid; with its start time, the watchdog can
            # tell it from a later process given the same pid.
            _WATCHDOG.tell(f"+{self.proc.pid} {process_start_time(self.proc.pid)}")
        except UserError:
            self.stop()  # nothing would kill it if this process died
            raise

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, check: Callable[[], bool], timeout: float) -> None:
        """Poll `check` until it is true; fail with the log's tail if the process dies or stalls."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                self.stop()
                raise UserError(f"{self.name} exited during start-up; log {self.log_path}:\n"
                                f"{self.log_tail()}")
            if check():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise UserError(f"{self.name} did not answer within {timeout:.0f}s; log "
                                f"{self.log_path}:\n{self.log_tail()}")
            time.sleep(0.02)

    def stop(self, timeout: float = 15.0, sig: int = signal.SIGTERM) -> None:
        """Signal the whole process group, wait, and SIGKILL whatever is left after `timeout`."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        _LIVE.pop(proc.pid, None)
        _signal_group(proc, sig)
        if not _exited(proc, timeout):
            _signal_group(proc, signal.SIGKILL)
            _exited(proc, None)
        # Children that outlived their parent (e.g. postgres backends) share its group; the
        # parent, not reaped yet, keeps the group's id this server's.
        _signal_group(proc, signal.SIGKILL)
        try:
            _WATCHDOG.tell(f"-{proc.pid}")
        except UserError as exc:
            print(f"warning: {exc}", file=sys.stderr)  # stopped all the same
        proc.wait()

    def pids(self) -> list[int]:
        """The process and all its descendants, for CPU and memory accounting."""
        return [self.pid, *descendants(self.pid)] if self.running() else []

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> ManagedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def descendants(pid: int) -> list[int]:
    """All live descendants of pid, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(int(entry.name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))  # its ppid
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def as_user(user: str | None) -> dict[str, object]:
    """Popen arguments that run a child as `user` with that user's own groups.

    Popen's `user=` alone changes only the uid: the child would keep root's group and
    supplementary groups, and the files it creates would belong to group root.
    """
    if user is None:
        return {}
    uid, gid, groups = _user_ids(user)
    return {"user": uid, "group": gid, "extra_groups": list(groups)}


def run_checked(argv: Sequence[str], what: str, *, user: str | None = None,
                cwd: Path | None = None, input_bytes: bytes | None = None,
                timeout: float | None = 600, pass_fds: Sequence[int] = ()) -> str:
    """Run a set-up command (initdb, slapadd, …); a failure is a UserError with its output.
    As `user` (then in service_environment()), else as the suite.

    On any exception, Ctrl-C included, subprocess.run kills the command before re-raising.
    """
    try:
        done = subprocess.run(list(argv), input=input_bytes, capture_output=True, cwd=cwd,
                              timeout=timeout, check=False, pass_fds=tuple(pass_fds),
                              env=None if user is None else service_environment(),
                              **as_user(user))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{what} failed: {exc}") from exc
    out = (done.stdout + done.stderr).decode(errors="replace")
    if done.returncode != 0:
        tail = "\n".join(out.splitlines()[-20:])
        raise UserError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return out


def run_logged(argv: Sequence[str], what: str, log: Path, *, cwd: Path | None = None,
               user: str | None = None) -> None:
    """Run a set-up command whose output grows with the data (a line per zone): into log, not
    memory; a failure is a UserError with the log's last lines. No time limit but Ctrl-C. As
    `user` (then in service_environment()), else as the suite."""
    try:
        with open(log, "ab") as out:
            done = subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                  check=False, env=None if user is None else
                                  service_environment(), **as_user(user))
    except OSError as exc:
        raise UserError(f"{what} failed: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join(_last_lines(log, 20))
        raise UserError(f"{what} failed (exit {done.returncode}, {log}):\n{tail}")


def _last_lines(path: Path, count: int) -> list[str]:
    with open(path, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
        return f.read().decode(errors="replace").splitlines()[-count:]


def _exited(proc: subprocess.Popen[bytes], timeout: float | None) -> bool:
    """Wait up to timeout (None: for ever) for proc to exit, without reaping it: whether it
    has."""
    if proc.returncode is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """sig to proc's process group: by its id while proc is not reaped (a zombie keeps its
    pid, so the id is still this group's), else to what is left of it, process by process."""
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    else:
        signal_leftovers(proc.pid, sig)




class _Watchdog:
    """The pipe to this process's watchdog (base/watchdog.py), started with the first server.

    Only this process holds the pipe's write end (non-inheritable, and every child is started
    with close_fds), so the watchdog reads end of file exactly when this process is gone.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None  # kept: it outlives no reference

    def tell(self, line: str) -> None:
        """One line to the watchdog; UserError when it is gone (killed), for then nothing
        would kill the servers if this process died."""
        with self._lock:
            if self._fd is None:
                self._start()
            assert self._fd is not None
            try:
                os.write(self._fd, f"{line}\n".encode())  # under PIPE_BUF: one write
            except BrokenPipeError:
                raise UserError(f"the watchdog process (base/watchdog.py, pid {self._pid()}) "
                                "is gone: servers started now would outlive this process if "
                                "it were killed") from None

    def _pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        read_end, write_end = os.pipe()
        try:
            # A session of its own: a Ctrl-C or SIGKILL sent to the suite's process group
            # reaches the suite, not the watchdog, which must outlive it.
            self._proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("watchdog.py"))],
                stdin=read_end, stdout=subprocess.DEVNULL, start_new_session=True,
                env=service_environment())
        finally:
            os.close(read_end)
        self._fd = write_end


_WATCHDOG = _Watchdog()


def stop_all() -> None:
    for proc in list(_LIVE.values()):
        proc.stop(timeout=5)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


_handlers_installed = False


def _install_signal_handlers() -> None:
    """SIGTERM and SIGHUP unwind like Ctrl-C, so every with-block stops its servers."""
    global _handlers_installed
    if _handlers_installed or threading.current_thread() is not threading.main_thread():
        return
    _handlers_installed = True
    atexit.register(stop_all)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _raise_interrupt)
