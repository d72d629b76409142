"""For tests that run `python3 -m bench`: running it, its environment, and the processes it
leaves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from base.paths import REPO_ROOT


def bench_env(run_root: Path) -> dict[str, str]:
    """The environment of a bench command whose servers run under run_root (DLZBENCH_RUN_DIR)."""
    return {**os.environ, "DLZBENCH_RUN_DIR": str(run_root)}


def run_bench(run_root: Path, *args: str, env: dict[str, str] | None = None,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python3 -m bench ARGS` run to its end, its servers under run_root; output as text."""
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO_ROOT,
                          env={**bench_env(run_root), **(env or {})}, capture_output=True,
                          text=True, timeout=timeout, check=False)


def start_bench(run_root: Path, *args: str) -> subprocess.Popen[bytes]:
    """`python3 -m bench ARGS` started, its servers under run_root; stdout and stderr in one
    pipe (for a test that interrupts it or reads its progress)."""
    return subprocess.Popen([sys.executable, "-m", "bench", *args], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=bench_env(run_root))


def processes_under(path: Path) -> list[str]:
    """Command lines of live processes that mention path or work inside it (our servers name
    their run dir, or run in it: PostgreSQL is handed its data directory as a descriptor).

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
            if (str(path) in cmdline or _works_in(proc, path)) and state != "Z":
                found.append(cmdline)
    return found


def _works_in(proc: Path, path: Path) -> bool:
    try:
        return Path(os.readlink(proc / "cwd")).is_relative_to(path)
    except OSError:  # gone, or a kernel thread
        return False


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
