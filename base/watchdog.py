"""Kill the suite's private servers once the suite is gone, however it died.

Every server runs in a session (process group) of its own, so that stopping it stops what it
forked; a suite killed by SIGKILL (or the OOM killer) runs no handler and would leave them all
running, PostgreSQL and MariaDB with their data open on loopback ports. PR_SET_PDEATHSIG does
not answer this: it fires when the *thread* that forked the server exits, and the suite starts
servers from worker threads.

This watchdog is a small process of its own (base/process.py starts one per suite process,
with its first server), reading lines from a pipe whose write end only the suite holds:
"+PGID START" when a server's process group starts (START: its leader's start time, see
process_start_time), "-PGID" when the suite has stopped it. At end of file (the suite exited,
normally or not) it SIGKILLs every group still listed: after a normal exit none is.

A group id is the leader's pid, which the kernel gives to a new process once the leader is
reaped (by the suite, or by init once the suite is gone): a group is killed by its id only
while its leader is the process that started then (same pid, same start time) and is held
stopped (SIGSTOP through a pidfd), so that it cannot exit and be reaped in between. Without
its leader, what is left of the group is killed process by process (signal_leftovers).

    python3 base/watchdog.py < PIPE

Only the standard library: base/process.py imports its helpers, and it runs on its own.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

# How long a leader sent SIGSTOP is waited for to show it stopped (a process in the middle of
# a system call stops when it returns).
STOP_WAIT_S = 2.0


def stat_fields(pid: int, task: int | None = None) -> list[str] | None:
    """/proc/PID/stat's fields (one thread's, /proc/PID/task/TASK/stat, with `task`) after
    the command name, which may hold spaces and parentheses (state first, parent second,
    process group third, utime 12th, start time 20th); None when there is no such process.
    The suite's one reader of that file (base/process.py, bench/measure/accounting.py,
    bench/measure/faults.py)."""
    path = f"/proc/{pid}/stat" if task is None else f"/proc/{pid}/task/{task}/stat"
    try:
        return Path(path).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_start_time(pid: int) -> str:
    """When pid started, in clock ticks since boot: with the pid, the process's identity
    (a pid is given again once its process is reaped). "" when there is no such process."""
    fields = stat_fields(pid)
    return fields[19] if fields is not None else ""


def signal_leftovers(group: int, sig: int) -> None:
    """sig to each process still in process group `group` once its leader is gone (reaped). A
    process holding the leader's pid means the id was given again, and a group of that id is
    another's: then none is signalled."""
    if stat_fields(group) is not None:
        return
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(int(entry.name))
            if fields is not None and fields[2] == str(group):
                _signal_member(int(entry.name), group, sig)


def _signal_member(pid: int, group: int, sig: int) -> None:
    """sig to pid if it is in the leaderless group: opened (pidfd) before its group is read
    again, so the signal reaches the process read, never one given its pid since."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return  # gone meanwhile
    try:
        fields = stat_fields(pid)
        if fields is not None and fields[2] == str(group) and stat_fields(group) is None:
            signal.pidfd_send_signal(fd, sig)
    except OSError:
        pass  # gone meanwhile
    finally:
        os.close(fd)


def watched_groups(lines: Iterable[str]) -> dict[int, str]:
    """The process groups still listed once every line has been read, with their leaders'
    start times. A "+PGID" line without one (written by hand) takes the start time the leader
    has when the line is read."""
    groups: dict[int, str] = {}
    for line in lines:
        sign, words = line[:1], line[1:].split()
        if not words or not words[0].isdigit():
            continue
        group = int(words[0])
        if sign == "+":
            groups[group] = words[1] if len(words) > 1 else process_start_time(group)
        elif sign == "-":
            groups.pop(group, None)
    return groups


def _open_leader(group: int, start: str) -> int | None:
    """A pidfd of the group's leader if the process with its pid is the one that started at
    `start` (read after opening, so the pidfd is of that process) and has not exited."""
    try:
        fd = os.pidfd_open(group)
    except OSError:
        return None
    fields = stat_fields(group)
    if fields is None or fields[19] != start or fields[0] in "ZX":
        os.close(fd)
        return None
    return fd


def _leader_state(group: int, start: str) -> str:
    """The leader's state letter (R, S, D, T, Z, ...); "" once it is gone (reaped: its pid
    free, or another process's)."""
    fields = stat_fields(group)
    return fields[0] if fields is not None and fields[19] == start else ""


def _until_state(group: int, start: str, states: tuple[str, ...]) -> bool:
    """Wait up to STOP_WAIT_S for the leader's state to be one of states ("": gone)."""
    deadline = time.monotonic() + STOP_WAIT_S
    while _leader_state(group, start) not in states:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def kill_group(group: int, start: str) -> None:
    """SIGKILL to the group whose leader started at `start`, whatever of it is left: by the
    group's id while the leader is held stopped, else the leader through its pidfd and, once
    it is gone, the rest one by one."""
    fd = _open_leader(group, start) if start else None
    if fd is None:
        signal_leftovers(group, signal.SIGKILL)
        return
    try:
        signal.pidfd_send_signal(fd, signal.SIGSTOP)
        if _until_state(group, start, ("T", "t")):
            os.killpg(group, signal.SIGKILL)
            return
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        if _until_state(group, start, ("",)):
            signal_leftovers(group, signal.SIGKILL)
    except OSError:
        signal_leftovers(group, signal.SIGKILL)  # the leader went meanwhile
    finally:
        os.close(fd)


def kill_groups(groups: Mapping[int, str]) -> None:
    for group, start in groups.items():
        kill_group(group, start)


def main() -> None:
    # A Ctrl-C at the terminal reaches the suite, which stops its servers itself; the
    # watchdog (in a session of its own anyway) waits for the end of its pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    kill_groups(watched_groups(sys.stdin))


if __name__ == "__main__":
    main()
