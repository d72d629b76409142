"""`python3 -m bench serve`: answers until told to stop, then leaves nothing running; a port
given by hand that is already taken is refused before anything starts."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import dns.flags
import dns.message
import dns.query

from base.paths import REPO_ROOT
from base.process import free_port
from tests.benchcli import bench_env, processes_under


def _serve(run_root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "bench", "serve", *args], cwd=REPO_ROOT,
                            env=bench_env(run_root),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_serve_answers_until_sigterm(run_root: Path) -> None:
    proc = _serve(run_root, "--server", "memory", "--generate", "5")
    assert proc.stdout is not None
    first = proc.stdout.readline()
    match = re.search(r"port (\d+)", first)
    assert match, first + proc.stdout.read()
    zone = proc.stdout.readline().split()[-2]  # "try: dig @127.0.0.1 -p N <zone>. SOA"
    query = dns.message.make_query(zone, "SOA")
    response = dns.query.udp(query, "127.0.0.1", port=int(match[1]), timeout=5)
    assert response.flags & dns.flags.AA and response.answer
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    assert processes_under(run_root) == []


def test_serve_refuses_a_port_in_use(run_root: Path) -> None:
    run_root = run_root / "refused"
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", port))
        proc = _serve(run_root, "--server", "memory", "--generate", "5", "--port", str(port))
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use" in output
    assert not run_root.exists(), "nothing was started"
