"""For tests that run `python3 -m bench`: its environment, and the processes it leaves."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def bench_env(run_root: Path) -> dict[str, str]:
    """The environment of a bench command whose servers run under run_root (DLZBENCH_RUN_DIR)."""
    return {**os.environ, "DLZBENCH_RUN_DIR": str(run_root)}


def processes_under(path: Path) -> list[str]:
    """Command lines of live processes that mention path (our servers name their run dir).

    A zombie counts as gone: it runs nothing and holds no port (PID 1 may never reap it).
    """
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if str(path) in cmdline and state != "Z":
                found.append(cmdline)
    return found


def interrupt_when(proc: subprocess.Popen, ready: Callable[[], bool],
                   timeout: float = 300) -> None:
    """Ctrl-C the bench command once `ready()` holds; it must end with status 130."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None and time.monotonic() < deadline, \
            proc.communicate()[0].decode(errors="replace")[-2000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output.decode(errors="replace")[-2000:]
