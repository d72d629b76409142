"""Kill the suite's private servers once the suite is gone, however it died.

Every server runs in a session (process group) of its own, so that stopping it stops what it
forked; a suite killed by SIGKILL (or the OOM killer) runs no handler and would leave them all
running, PostgreSQL and MariaDB with their data open on loopback ports. PR_SET_PDEATHSIG does
not answer this: it fires when the *thread* that forked the server exits, and the suite starts
servers from worker threads.

This watchdog is a small process of its own (base/process.py starts one per suite process,
with its first server), reading lines from a pipe whose write end only the suite holds:
"+PGID" when a server's process group starts, "-PGID" when the suite has stopped it. At end of
file (the suite exited, normally or not) it SIGKILLs every group still listed: after a normal
exit none is.

    python3 base/watchdog.py < PIPE
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterable


def watched_groups(lines: Iterable[str]) -> set[int]:
    """The process groups still listed once every line has been read."""
    groups: set[int] = set()
    for line in lines:
        sign, number = line[:1], line[1:].strip()
        if not number.isdigit():
            continue
        if sign == "+":
            groups.add(int(number))
        elif sign == "-":
            groups.discard(int(number))
    return groups


def kill_groups(groups: Iterable[int]) -> None:
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # already gone


def main() -> None:
    # A Ctrl-C at the terminal reaches the suite, which stops its servers itself; the
    # watchdog (in a session of its own anyway) waits for the end of its pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    kill_groups(watched_groups(sys.stdin))


if __name__ == "__main__":
    main()
