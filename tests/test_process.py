"""Signalling the suite's private servers (base/process.py, base/watchdog.py): never a process
that is not theirs, and a watchdog that is gone is said.

A server's process group id is its leader's pid, and the kernel gives that pid to a new process
once the leader is reaped. The two tests that need that to happen run in a PID namespace of
their own (unshare, as root), where /proc/sys/kernel/ns_last_pid says which pid the next
process gets: a "victim", a new session leader, is given the pid of a server that exited and
was reaped, and must outlive what the suite (stop) or its watchdog (at the suite's end) does to
that server's group.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from base.paths import REPO_ROOT

# Helpers of the scripts below, run inside the namespace (where this script is pid 1).
PRELUDE = """
import os, signal, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from base import process
from base.process import ManagedProcess
LOG = Path(sys.argv[2])

def exited_and_reaped(server):
    while server.running():  # running() polls: a server that exited is reaped there
        time.sleep(0.01)

def given_pid(pid):
    '''A new session leader (sleep 60) that the kernel gave pid.'''
    for _ in range(20):
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
        victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
        if victim.pid == pid:
            return victim
        victim.kill()
        victim.wait()
    raise SystemExit(f"pid {pid} was not given again")

def live_in_group(group):
    '''Processes of the group that are not zombies.'''
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[2] == str(group) and fields[0] != "Z":
            found.append(int(entry.name))
    return found
"""

# stop() of a server that exited by itself and was reaped.
STOP_AFTER_REAP = PRELUDE + """
server = ManagedProcess("short", ["sh", "-c", "exit 0"], LOG)
server.start()
exited_and_reaped(server)
victim = given_pid(server.pid)
server.stop()
time.sleep(0.2)
print("victim", "alive" if victim.poll() is None else f"killed ({victim.returncode})")
victim.kill()
"""

# The suite ends (its end of the watchdog's pipe closes) with two servers never stopped: one
# that exited by itself and was reaped (its pid given to the victim since), one that runs, with
# a child in its group.
WATCHDOG_AT_THE_END = PRELUDE + """
short = ManagedProcess("short", ["sh", "-c", "exit 0"], LOG)
short.start()
running = ManagedProcess("running", ["sh", "-c", "sleep 60 & exec sleep 60"], LOG)
running.start()
time.sleep(0.2)  # its child started
exited_and_reaped(short)
victim = given_pid(short.pid)
watchdog = process._WATCHDOG._proc
os.close(process._WATCHDOG._fd)  # as when the suite dies
watchdog.wait(timeout=30)
time.sleep(0.2)
print("victim", "alive" if victim.poll() is None else f"killed ({victim.returncode})")
print("left in the running server's group:", live_in_group(running.pid))
victim.kill()
"""


def _in_pid_namespace(script: str, tmp_path: Path) -> str:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a PID namespace")
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                           script, str(REPO_ROOT), str(tmp_path / "server.log")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_stop_spares_the_process_given_a_reaped_servers_pid(tmp_path: Path) -> None:
    assert "victim alive" in _in_pid_namespace(STOP_AFTER_REAP, tmp_path)


def test_the_watchdog_kills_its_groups_and_spares_the_pid_given_again(tmp_path: Path) -> None:
    out = _in_pid_namespace(WATCHDOG_AT_THE_END, tmp_path)
    assert "victim alive" in out, out
    assert "left in the running server's group: []" in out, out


# A server started after the watchdog was killed.
AFTER_THE_WATCHDOG = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from base import process
from base.errors import UserError
from base.process import ManagedProcess
log = Path(sys.argv[2])
first = ManagedProcess("first", ["sleep", "60"], log)
first.start()
process._WATCHDOG._proc.kill()
process._WATCHDOG._proc.wait()
second = ManagedProcess("second", ["sleep", "60"], log)
try:
    second.start()
    print("started without a watchdog")
except UserError as exc:
    print("refused:", exc)
print("second", "running" if second.running() else "stopped")
first.stop()
"""


def test_a_server_is_not_started_without_its_watchdog(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", AFTER_THE_WATCHDOG, str(REPO_ROOT),
                           str(tmp_path / "server.log")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "refused: the watchdog process" in done.stdout, done.stdout
    assert "second stopped" in done.stdout, done.stdout
    assert "watchdog process" in done.stderr, done.stderr  # first.stop() said it too
