"""CPU time and memory of server processes, read from /proc.

CPU: a process's figure is utime + stime + cutime + cstime from /proc/<pid>/stat. The
reaped-children part (cutime, cstime) is included on purpose: a server that forks workers
(postgres backends) reaps them, and their CPU then moves into the parent's cutime/cstime.
A `CpuMeter` sums that figure over a process tree before and after; because a child's CPU
moves, not vanishes, when it exits, the difference counts a worker that was born, exited or
lived through the interval exactly once. Threads (named, mariadbd, slapd) are inside their
process's utime/stime already. A child that exits without being reaped is missed; none of our
servers leaves one.

Each figure is also kept split (`CpuMeter.user` and `.system`: utime + cutime, stime +
cstime): a change in a server's cost per query that is all system time points at the kernel
(sockets, scheduling), not at the server's own code.

What moves the machine rather than the server is read from /proc/stat around each QPS run
(`MachineMeter`): every CPU's user, system, idle, iowait, irq, softirq and steal time over the
run, and its clock (/proc/cpuinfo's "cpu MHz") at both ends. `machine_moves` names a run in
which the hypervisor took a CPU (steal above STEAL_LIMIT of its time) or a CPU ran slower
than the fastest any run of the file saw it (below SLOWER_LIMIT of that clock): a cost or a
QPS from such a run measured the machine as much as its server.

Memory: VmHWM (peak resident set) per process, summed over a set. Processes that share memory
(postgres' shared buffers) count it once each in that sum; `MemorySampler` also samples the
summed proportional set size (Pss, shared pages divided among their users), which does not.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from base.process import descendants
from base.watchdog import stat_fields

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: Iterable[int]) -> float:
    """utime + stime + cutime + cstime of every live pid, in seconds."""
    user, system = user_system_seconds(pids)
    return user + system


def user_system_seconds(pids: Iterable[int]) -> tuple[float, float]:
    """(utime + cutime, stime + cstime) of every live pid, in seconds."""
    user = system = 0
    for pid in pids:
        fields = stat_fields(pid)
        if fields is not None:
            # After the name: state is fields[0], so utime (stat field 14) is fields[11],
            # then stime, cutime, cstime.
            utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
            user += utime + cutime
            system += stime + cstime
    return user / CLK_TCK, system / CLK_TCK


def process_tree(roots: Iterable[int]) -> list[int]:
    """The roots and every live descendant of each."""
    found: list[int] = []
    for root in roots:
        for pid in (root, *descendants(root)):
            if pid not in found:
                found.append(pid)
    return found


class CpuMeter:
    """CPU seconds used by process trees over a with-block (or between start() and stop())."""

    def __init__(self, roots: Iterable[int]) -> None:
        self.roots = list(roots)
        self._before = (0.0, 0.0)
        self.user = 0.0
        self.system = 0.0

    @property
    def seconds(self) -> float:
        return self.user + self.system

    def start(self) -> None:
        self._before = user_system_seconds(process_tree(self.roots))

    def stop(self) -> float:
        # Re-discovered now: workers forked during the interval count too.
        user, system = user_system_seconds(process_tree(self.roots))
        self.user, self.system = user - self._before[0], system - self._before[1]
        return self.seconds

    def __enter__(self) -> CpuMeter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# /proc/stat's per-CPU columns after the name, in order (guest time is inside user already).
_PROC_STAT_COLUMNS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# A run in which the hypervisor took more than 2% of a CPU's time, or a CPU ran more than 5%
# below the clock the file's fastest run saw it at, moved with the machine (module docstring).
STEAL_LIMIT = 0.02
SLOWER_LIMIT = 0.95


@dataclass
class CpuTimes:
    """One CPU's time over a QPS run, in seconds, as /proc/stat counts it (user includes nice),
    and its clock (MHz, the lower of the run's two ends; None where the kernel gives none)."""

    cpu: int
    user: float = 0.0
    system: float = 0.0
    idle: float = 0.0
    iowait: float = 0.0
    irq: float = 0.0
    softirq: float = 0.0
    steal: float = 0.0
    mhz: float | None = None

    @property
    def total(self) -> float:
        return (self.user + self.system + self.idle + self.iowait + self.irq + self.softirq
                + self.steal)


def cpu_ticks() -> dict[int, list[int]]:
    """Each CPU's /proc/stat counters (_PROC_STAT_COLUMNS), in clock ticks; empty if
    unreadable."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return {}
    ticks: dict[int, list[int]] = {}
    for words in (line.split() for line in lines):
        if words and words[0].startswith("cpu") and words[0][3:].isdigit():
            ticks[int(words[0][3:])] = [int(v) for v in words[1:1 + len(_PROC_STAT_COLUMNS)]]
    return ticks


def cpu_mhz() -> dict[int, float]:
    """Each CPU's clock as /proc/cpuinfo gives it ("cpu MHz"); empty where it gives none
    (some architectures)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    clocks: dict[int, float] = {}
    cpu = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "processor":
            cpu = int(value)
        elif key == "cpu MHz" and cpu is not None:
            clocks[cpu] = float(value)
    return clocks


class MachineMeter:
    """A QPS run's span (time.monotonic() at its start and end) and every CPU's time over it
    (`cpus`: the CPUs this process may run on, which the server's and the load generator's
    are among)."""

    def __init__(self) -> None:
        self.began_s = self.ended_s = 0.0
        self.cpus: list[CpuTimes] = []
        self._ticks: dict[int, list[int]] = {}
        self._mhz: dict[int, float] = {}

    def start(self) -> None:
        self._mhz = cpu_mhz()
        self._ticks = cpu_ticks()
        self.began_s = time.monotonic()

    def stop(self) -> None:
        self.ended_s = time.monotonic()
        ticks, mhz = cpu_ticks(), cpu_mhz()
        mine = os.sched_getaffinity(0)
        self.cpus = [cpu_times(cpu, self._ticks[cpu], ticks[cpu],
                               _lower(self._mhz.get(cpu), mhz.get(cpu)))
                     for cpu in sorted(mine & ticks.keys() & self._ticks.keys())]

    def __enter__(self) -> MachineMeter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def cpu_times(cpu: int, before: Sequence[int], after: Sequence[int],
              mhz: float | None) -> CpuTimes:
    """One CPU's time between two /proc/stat readings."""
    seconds = dict(zip(_PROC_STAT_COLUMNS, ((b - a) / CLK_TCK for a, b in
                                            zip(before, after, strict=False)), strict=False))
    return CpuTimes(cpu, user=seconds.get("user", 0.0) + seconds.get("nice", 0.0),
                    system=seconds.get("system", 0.0), idle=seconds.get("idle", 0.0),
                    iowait=seconds.get("iowait", 0.0), irq=seconds.get("irq", 0.0),
                    softirq=seconds.get("softirq", 0.0), steal=seconds.get("steal", 0.0),
                    mhz=mhz)


def _lower(a: float | None, b: float | None) -> float | None:
    known = [v for v in (a, b) if v is not None]
    return min(known) if known else None


def fastest_clocks(runs: Iterable[Sequence[CpuTimes]]) -> dict[int, float]:
    """Each CPU's highest clock over a file's runs: what `machine_moves` calls its speed."""
    fastest: dict[int, float] = {}
    for cpus in runs:
        for times in cpus:
            if times.mhz is not None:
                fastest[times.cpu] = max(times.mhz, fastest.get(times.cpu, 0.0))
    return fastest


def machine_moves(cpus: Sequence[CpuTimes], fastest: dict[int, float]) -> list[str]:
    """Why a run's machine moved under it, one phrase per CPU that did ("steal 3.1% on CPU
    1", "CPU 0 at 2,100 of 2,600 MHz"); empty for a run that saw neither, or recorded no
    CPU times (files before them)."""
    moves = []
    for times in cpus:
        if times.total > 0 and times.steal > STEAL_LIMIT * times.total:
            moves.append(f"steal {100 * times.steal / times.total:.1f}% on CPU {times.cpu}")
        top = fastest.get(times.cpu)
        if times.mhz is not None and top and times.mhz < SLOWER_LIMIT * top:
            moves.append(f"CPU {times.cpu} at {times.mhz:,.0f} of {top:,.0f} MHz")
    return moves


def us_per_query(cpu_s: float | None, answered: int) -> float | None:
    """CPU microseconds per answered query (the unit of the results)."""
    if cpu_s is None or answered <= 0:
        return None
    return cpu_s * 1e6 / answered


def _status_kb(pid: int, key: str) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def peak_rss_kb(pids: Iterable[int]) -> int:
    """Sum of VmHWM (each process's peak resident set, kB) over the live pids."""
    return sum(_status_kb(pid, "VmHWM") for pid in pids)


def pss_kb(pids: Iterable[int]) -> int:
    """Sum of the proportional set size (kB) over the live pids."""
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1])
                break
    return total


class MemorySampler:
    """Samples process trees whose children come and go (postgres backends) in a thread.

    `peak_pss_kb`: the highest summed Pss seen in one sample. `peak_hwm_kb`: the sum, over
    every process seen, of its last VmHWM: an upper bound (peaks need not coincide) that
    still counts a short-lived process that a sample saw once.
    """

    def __init__(self, roots: Iterable[int], interval: float = 0.25) -> None:
        self.roots = list(roots)
        self.interval = interval
        self.peak_pss_kb = 0
        self._hwm: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    @property
    def peak_hwm_kb(self) -> int:
        return sum(self._hwm.values())

    def sample(self) -> None:
        pids = process_tree(self.roots)
        self.peak_pss_kb = max(self.peak_pss_kb, pss_kb(pids))
        for pid in pids:
            hwm = _status_kb(pid, "VmHWM")
            if hwm:
                self._hwm[pid] = hwm

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> None:
        self.sample()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def __enter__(self) -> MemorySampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def udp_receive_buffer_errors() -> int | None:
    """The kernel's count of UDP datagrams dropped because a socket's receive queue was full
    (RcvbufErrors in /proc/net/snmp), machine-wide; None if unreadable."""
    try:
        lines = [line.split() for line in Path("/proc/net/snmp").read_text().splitlines()
                 if line.startswith("Udp:")]
        names, values = lines[0], lines[1]
        return int(values[names.index("RcvbufErrors")])
    except (OSError, IndexError, ValueError):
        return None
