"""CPU time and memory of server processes, read from /proc.

CPU: a process's figure is utime + stime + cutime + cstime from /proc/<pid>/stat. The
reaped-children part (cutime, cstime) is included on purpose: a server that forks workers
(postgres backends) reaps them, and their CPU then moves into the parent's cutime/cstime.
A `CpuMeter` sums that figure over a process tree before and after; because a child's CPU
moves, not vanishes, when it exits, the difference counts a worker that was born, exited or
lived through the interval exactly once. Threads (named, mariadbd, slapd) are inside their
process's utime/stime already. A child that exits without being reaped is missed; none of our
servers leaves one.

Memory: VmHWM (peak resident set) per process, summed over a set. Processes that share memory
(postgres' shared buffers) count it once each in that sum; `MemorySampler` also samples the
summed proportional set size (Pss, shared pages divided among their users), which does not.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

from base.process import descendants

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name, or None if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The name may contain spaces and parentheses: split after its last ')'.
    return text.rsplit(")", 1)[1].split()


def cpu_seconds(pids: Iterable[int]) -> float:
    """utime + stime + cutime + cstime of every live pid, in seconds."""
    ticks = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            # After the name: state is fields[0], so utime (stat field 14) is fields[11].
            ticks += sum(int(v) for v in fields[11:15])
    return ticks / CLK_TCK


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
        self._before = 0.0
        self.seconds = 0.0

    def start(self) -> None:
        self._before = cpu_seconds(process_tree(self.roots))

    def stop(self) -> float:
        # Re-discovered now: workers forked during the interval count too.
        self.seconds = cpu_seconds(process_tree(self.roots)) - self._before
        return self.seconds

    def __enter__(self) -> CpuMeter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
