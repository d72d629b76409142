"""Run dnsperf (Debian 13's 2.14, from the root `make deps` makes) and parse its report.

dnsperf is Debian 13's, run in the Debian 13 root under .roots/trixie the way named 9.20 is
(servers/bindversion.py: the root's /usr and /etc over the host's in a private mount
namespace, every other path the host's), for every BIND: Debian 12's dnsperf 2.10 bursts to
catch up after a stall under -Q (fixed in 2.12), and a fixed offered rate is what `capacity`
measures at. resperf (bench/load/resperf.py), from the same package, runs the same way.

Two ways to run it: `run_dnsperf` for one timed QPS run, and `start_background` for a load
that holds the server at its maximum while something else (the latency prober) measures, and
that is stopped early with SIGINT (dnsperf then prints its report for the part it ran).

dnsperf's CPU time is read from the kernel when the process is reaped (wait4's rusage), so
it is exact even though the process is gone by then.

On a load host (`--load-from`, bench/load/hosts.py) dnsperf is that host's own, run through
ssh in the run's private directory there; its CPU time is the load host's kernel's account of
it (`times` after it is reaped), and it is stopped early with SIGINT sent there. Several load
hosts run at once, and `merge_runs` adds their reports into one.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from base.errors import UserError
from base.process import ManagedProcess, new_run_dir
from bench.load.hosts import LoadHost, job_cpu_seconds, job_pid
from servers import BINDS

DNSPERF = "/usr/bin/dnsperf"
TASKSET = "/usr/bin/taskset"
# dnsperf's stdout is a file here, so stdio would hold "Sending queries" back until exit.
STDBUF = ("/usr/bin/stdbuf", "-oL")
# The root holding Debian 13's dnsperf (and named 9.20): the Makefile's bind-root target.
ROOT = BINDS["9.20"]
_ROOT_STAMP = ".dlzbench-root"


def in_root(argv: Sequence[str]) -> list[str]:
    """argv (taskset, stdbuf, dnsperf or resperf, by their /usr paths) as run in the Debian 13
    root, as the service user once inside (the namespace is made as root). unshare, sh and
    setpriv exec, so the process's pid is dnsperf's own (its CPU time, its sockets)."""
    if ROOT.root is None or not (ROOT.root / _ROOT_STAMP).is_file():
        raise UserError(f"dnsperf 2.14 runs in the Debian 13 root {ROOT.root}, which is not "
                        "made: run `make deps`")
    return ROOT.command(argv, with_drivers=False, as_service_user=True)


def version() -> str | None:
    """dnsperf's version as it prints it with its usage text ("2.14.0"); None if it cannot
    run."""
    try:
        done = subprocess.run(in_root([DNSPERF, "-h"]), capture_output=True, text=True,
                              timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired, UserError):
        return None
    for line in (done.stdout + done.stderr).splitlines():
        if line.startswith("Version"):
            return line.split()[-1]
    return None

# dnsperf's `-D`: the DO bit on every query, in an EDNS0 OPT record advertising 4096 octets
# (dnsperf's MAX_EDNS_PACKET); named 9.18 still answers within its max-udp-size, 1232.
DNSSEC_OK = ("-D",)


def transport_args(transport: str, mode_option: str = "-m") -> tuple[str, ...]:
    """dnsperf's (and, with mode_option "-M", resperf's) options for a transport
    (base/transports.py). tcp-new is dnsperf 2.14's `-O num-queries-per-conn=1` over TCP:
    each client connection is closed after one query's answer and opened again (its man
    page: "will wait until the same amount of responses has been received before
    re-connecting")."""
    if transport == "udp":
        return ()
    if transport == "tcp-new":
        return (mode_option, "tcp", "-O", "num-queries-per-conn=1")
    return (mode_option, transport)

# Per-query messages are noise in the kept output; lost queries are counted in the report.
_SUPPRESS = "suppress=timeouts,unexpected"

_INT_FIELDS = {
    "Queries sent": "queries_sent",
    "Queries completed": "queries_completed",
    "Queries lost": "queries_lost",
    "Queries interrupted": "queries_interrupted",
}
_FLOAT_FIELDS = {
    "Run time (s)": "run_time_s",
    "Queries per second": "qps",
    "Latency StdDev (s)": "latency_stddev_s",
}
_LINE = re.compile(r"^\s*([A-Za-z ()/]+?):\s*(.*)$")
_RCODE = re.compile(r"(\S+) (\d+) \(")
_PACKET = re.compile(r"request ([\d.]+), response ([\d.]+)")
_LATENCY = re.compile(r"([\d.]+) \(min ([\d.]+), max ([\d.]+)\)")
_COMPLETE = re.compile(r"\[Status\] Testing complete \((.*)\)")
# `-S N`: "<unix time>: <responses per second>" every N seconds.
_INTERVAL = re.compile(r"^\d+\.\d+: ([\d.]+)$")


@dataclass
class DnsperfRun:
    """One dnsperf run: every figure of its report, the command line and its raw output."""

    argv: list[str]
    queries_sent: int = 0
    queries_completed: int = 0
    queries_lost: int = 0
    queries_interrupted: int = 0
    rcodes: dict[str, int] = field(default_factory=dict)
    request_bytes: float = 0.0
    response_bytes: float = 0.0
    run_time_s: float = 0.0
    qps: float = 0.0
    latency_avg_s: float = 0.0
    latency_min_s: float = 0.0
    latency_max_s: float = 0.0
    latency_stddev_s: float | None = None  # dnsperf omits it when nothing was answered
    stopped_by: str = ""  # "time limit", "end of file" or "interruption"
    interval_qps: list[float] = field(default_factory=list)  # with -S: responses per second
    cpu_s: float | None = None  # dnsperf's own user+system CPU time
    generators: int = 1  # dnsperf processes (one per load host) whose figures these add up
    returncode: int = 0
    stdout: str = ""

    @property
    def loss_fraction(self) -> float:
        """Lost queries over sent ones (interrupted ones were still in flight, not lost)."""
        return self.queries_lost / self.queries_sent if self.queries_sent else 0.0


def duration_of(argv: Sequence[str]) -> float | None:
    """The run length dnsperf was given (`-l`, seconds) in its command line; None without
    one. (Merged runs' command lines are joined: the hosts were given the same.)"""
    for option, value in zip(argv, argv[1:], strict=False):
        if option == "-l":
            try:
                return float(value)
            except ValueError:
                return None
    return None


def parse_output(stdout: str, argv: Sequence[str]) -> DnsperfRun:
    """Parse dnsperf's report; a report without its statistics block is a UserError."""
    if "Statistics:" not in stdout:
        raise UserError(f"dnsperf printed no statistics ({' '.join(argv)}):\n"
                        f"{_tail(stdout)}")
    run = DnsperfRun(argv=list(argv), stdout=stdout)
    for line in stdout.splitlines():
        _parse_line(run, line)
    return run


def _parse_line(run: DnsperfRun, line: str) -> None:
    complete = _COMPLETE.search(line)
    if complete:
        run.stopped_by = complete.group(1)
        return
    interval = _INTERVAL.match(line)
    if interval:
        run.interval_qps.append(float(interval.group(1)))
        return
    match = _LINE.match(line)
    if not match:
        return
    label, value = match.group(1), match.group(2)
    if label in _INT_FIELDS:
        setattr(run, _INT_FIELDS[label], int(value.split()[0]))
    elif label in _FLOAT_FIELDS:
        setattr(run, _FLOAT_FIELDS[label], float(value.split()[0]))
    elif label == "Response codes":
        run.rcodes = {code: int(n) for code, n in _RCODE.findall(value)}
    elif label == "Average packet size":
        packet = _PACKET.search(value)
        if packet:
            run.request_bytes, run.response_bytes = map(float, packet.groups())
    elif label == "Average Latency (s)":
        latency = _LATENCY.search(value)
        if latency:
            run.latency_avg_s, run.latency_min_s, run.latency_max_s = map(
                float, latency.groups())


def build_argv(server: str, port: int, query_file: Path, *, duration: float,
               clients: int = 1, queue_depth: int = 100, threads: int = 1,
               timeout: float = 5.0, cpu_list: str | None = None,
               extra: Sequence[str] = (), host: LoadHost | None = None) -> list[str]:
    """The dnsperf command line, under `taskset -c cpu_list` when pinned, line-buffered, in the
    Debian 13 root; on a load host, that host's dnsperf over ssh (never pinned: the whole host
    is the load generator's), the query file copied there."""
    queries = host.put(query_file) if host is not None else str(query_file)
    argv = ["dnsperf" if host is not None else DNSPERF, "-s", server, "-p", str(port),
            "-d", queries, "-l", f"{duration:g}", "-c", str(clients), "-q", str(queue_depth),
            "-T", str(threads), "-t", f"{timeout:g}", "-O", _SUPPRESS, *extra]
    if host is not None:
        return host.command(["stdbuf", "-oL", *argv])
    if cpu_list:
        argv = [TASKSET, "-c", cpu_list, *argv]
    return in_root([*STDBUF, *argv])


def run_dnsperf(server: str, port: int, query_file: Path, *, duration: float,
                clients: int = 1, queue_depth: int = 100, threads: int = 1,
                timeout: float = 5.0, cpu_list: str | None = None,
                extra: Sequence[str] = (), hosts: Sequence[LoadHost] = ()) -> DnsperfRun:
    """One dnsperf run of `duration` seconds, waited for; its parsed report. With load hosts,
    one dnsperf on each at once, with `clients` sockets each, their reports merged."""
    loads = [DnsperfLoad(build_argv(server, port, query_file, duration=duration,
                                    clients=clients, queue_depth=queue_depth, threads=threads,
                                    timeout=timeout, cpu_list=cpu_list, extra=extra, host=host),
                         host)
             for host in (hosts or [None])]
    with MergedLoad(loads) as load:
        # dnsperf stops by itself after `duration`, then waits up to `timeout` for stragglers.
        return load.wait(duration + timeout + 30)


def start_background(server: str, port: int, query_file: Path, *, duration: float = 3600,
                     clients: int = 1, queue_depth: int = 100, threads: int = 1,
                     timeout: float = 5.0, cpu_list: str | None = None,
                     extra: Sequence[str] = (), hosts: Sequence[LoadHost] = (),
                     rate: float | None = None) -> MergedLoad:
    """Start dnsperf without waiting (on every load host, if any); use as a context manager
    and call `stop()` for its report. Leaving the with-block without `stop()` kills it.
    `rate`: queries per second offered in all (-Q), shared equally among the load hosts."""
    sites = list(hosts) or [None]
    if rate is not None:
        extra = ["-Q", f"{max(1, round(rate / len(sites)))}", *extra]
    load = MergedLoad([])
    try:
        for host in sites:
            load.loads.append(DnsperfLoad(build_argv(
                server, port, query_file, duration=duration, clients=clients,
                queue_depth=queue_depth, threads=threads, timeout=timeout, cpu_list=cpu_list,
                extra=extra, host=host), host))
        load.wait_sending(timeout=10 if not hosts else 30)
    except BaseException:
        load.close()
        raise
    return load


class MergedLoad:
    """dnsperf running at one or more places at once, seen as one load; always stopped when
    its with-block ends."""

    def __init__(self, loads: list[DnsperfLoad]) -> None:
        self.loads = loads

    @property
    def pid(self) -> int | None:
        """The local dnsperf's pid; None when it runs on load hosts (its sockets are not
        this machine's)."""
        if len(self.loads) == 1 and self.loads[0].host is None:
            return self.loads[0].pid
        return None

    def wait_sending(self, timeout: float) -> None:
        for load in self.loads:
            load.wait_sending(timeout)

    def stop(self, timeout: float = 30) -> DnsperfRun:
        for load in self.loads:
            load.interrupt()
        return self.wait(timeout)

    def wait(self, timeout: float) -> DnsperfRun:
        return merge_runs([load.wait(timeout) for load in self.loads])

    def close(self) -> None:
        for load in self.loads:
            load.close()

    def __enter__(self) -> MergedLoad:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def merge_runs(runs: Sequence[DnsperfRun]) -> DnsperfRun:
    """Reports of dnsperf runs made at the same time from several places as one: counts,
    rates, rcodes, per-second responses and CPU added; latency averaged weighted by answered
    queries, its extremes the extremes; the spread (not additive) left out. The run time is
    the one in which the summed sending rates send the summed queries: the hosts start a
    moment apart and each runs its own length, and the load offered is the sum of each one's
    (queries sent over its own run time)."""
    if len(runs) == 1:
        return runs[0]
    answered = sum(r.queries_completed for r in runs)
    rcodes: dict[str, int] = {}
    for run in runs:
        for code, n in run.rcodes.items():
            rcodes[code] = rcodes.get(code, 0) + n
    seconds = min(len(r.interval_qps) for r in runs)
    cpu = [r.cpu_s for r in runs]

    def weighted(value: str) -> float:
        if not answered:
            return 0.0
        return sum(getattr(r, value) * r.queries_completed for r in runs) / answered

    return DnsperfRun(
        argv=[word for r in runs for word in [*r.argv, ";"]][:-1],
        queries_sent=sum(r.queries_sent for r in runs),
        queries_completed=answered,
        queries_lost=sum(r.queries_lost for r in runs),
        queries_interrupted=sum(r.queries_interrupted for r in runs),
        rcodes=rcodes, request_bytes=weighted("request_bytes"),
        response_bytes=weighted("response_bytes"),
        run_time_s=_merged_run_time(runs), qps=sum(r.qps for r in runs),
        latency_avg_s=weighted("latency_avg_s"),
        latency_min_s=min(r.latency_min_s for r in runs),
        latency_max_s=max(r.latency_max_s for r in runs), latency_stddev_s=None,
        stopped_by=", ".join(sorted({r.stopped_by for r in runs})),
        interval_qps=[sum(r.interval_qps[i] for r in runs) for i in range(seconds)],
        cpu_s=None if None in cpu else sum(c for c in cpu if c is not None),
        generators=sum(r.generators for r in runs),
        returncode=max(r.returncode for r in runs),
        stdout="\n".join(r.stdout for r in runs))


class DnsperfLoad:
    """A running dnsperf process; always stopped when its with-block ends."""

    def __init__(self, argv: Sequence[str], host: LoadHost | None = None) -> None:
        self.argv = list(argv)
        self.host = host
        self._dir = new_run_dir("dnsperf")
        self._out = self._dir / "dnsperf.out"
        # Started as root for in_root's namespace (on a load host: ssh, as the load host's
        # user); dnsperf itself runs as the service user.
        self._process = ManagedProcess("dnsperf", self.argv, self._out, as_root=True)
        self._process.start()

    @property
    def pid(self) -> int:
        return self._process.pid

    def wait_sending(self, timeout: float) -> None:
        """Block until dnsperf reports that it sends queries (its set-up is done)."""
        self._process.wait_ready(lambda: "Sending queries" in self._read_output(),
                                 timeout)

    def stop(self, timeout: float = 30) -> DnsperfRun:
        """Interrupt dnsperf (it reports on what it ran so far) and return that report."""
        self.interrupt()
        return self.wait(timeout)

    def interrupt(self) -> None:
        """SIGINT to dnsperf, here or on its load host."""
        proc = self._process.proc
        if proc is None or proc.returncode is not None:
            return
        if self.host is not None:
            job = job_pid(self._read_output())
            if job is not None:
                self.host.signal_job(job, signal.SIGINT)
            return
        # Not proc.poll(): that would reap dnsperf and lose its CPU time.
        os.kill(proc.pid, signal.SIGINT)

    def wait(self, timeout: float) -> DnsperfRun:
        """Wait for dnsperf to exit by itself; parse its report."""
        proc = self._process.proc
        if proc is None:
            raise UserError("dnsperf was already stopped")
        cpu_s = _reap(proc, timeout)
        self._process.stop(timeout=1)
        if proc.returncode is None:
            raise UserError(f"dnsperf did not finish within {timeout:.0f}s: "
                            f"{' '.join(self.argv)}")
        output = self._read_output()
        run = parse_output(output, self.argv)
        if self.host is not None:  # cpu_s was ssh's own: dnsperf's is the load host's
            cpu_s = job_cpu_seconds(output)
        run.cpu_s, run.returncode = cpu_s, proc.returncode
        return run

    def _read_output(self) -> str:
        try:
            return self._out.read_text(errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        proc = self._process.proc
        if self.host is not None and proc is not None and proc.poll() is None:
            # Killing ssh here would leave dnsperf running there.
            job = job_pid(self._read_output())
            if job is not None:
                self.host.signal_job(job, signal.SIGKILL)
        self._process.stop(timeout=2, sig=signal.SIGKILL)
        self._out.unlink(missing_ok=True)
        self._dir.rmdir()

    def __enter__(self) -> DnsperfLoad:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _merged_run_time(runs: Sequence[DnsperfRun]) -> float:
    rate = sum(r.queries_sent / r.run_time_s for r in runs if r.run_time_s > 0)
    if rate <= 0:
        return max(r.run_time_s for r in runs)
    return sum(r.queries_sent for r in runs) / rate


def _reap(proc: subprocess.Popen[bytes], timeout: float) -> float | None:
    """Wait up to `timeout` for proc's exit, setting its returncode; its CPU seconds, or None
    when it did not exit or was already reaped elsewhere (then its rusage is gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:
            proc.poll()
            return None
        if done:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        time.sleep(0.01)
    return None


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.splitlines()[-lines:])
