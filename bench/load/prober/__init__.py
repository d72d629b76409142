"""Latency one query at a time, measured by the C prober (bench/load/prober/prober.c).

Percentiles use the nearest-rank method: the p-th percentile of n sorted samples is the
sample at rank ceil(p/100 * n) (1-based). Every percentile is therefore a latency that was
actually measured, and p50 <= p90 <= p99 <= max holds by construction.
"""

from __future__ import annotations

import math
import re
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from base.errors import UserError
from base.process import (
    ManagedProcess,
    as_user,
    give_to_service_user,
    new_run_dir,
    run_checked,
    service_environment,
    service_user,
)
from bench.load.hosts import LoadHost

PROBER_DIR = Path(__file__).resolve().parent
PROBER_BIN = PROBER_DIR / "prober"
TASKSET = "/usr/bin/taskset"

# The transports prober.c speaks (-m), and why not DNS over TLS: it is libc only, and a TLS
# handshake per probe is not what a DoT client pays per query (it keeps its session).
PROBER_TRANSPORTS = ("udp", "tcp", "tcp-new")
NO_TLS = ("the latency prober speaks UDP and TCP, not TLS: over DoT the latency is dnsperf's "
          "mean only (results.json: qps_runs' latency_avg_s), no percentiles")

# A one-line query file for the floor: the responder echoes any question.
_FLOOR_QUERY = "floor.prober.invalid A\n"


@dataclass
class LatencyStats:
    """Latency of `count` answered queries in microseconds; `lost` ones timed out; sent from
    `source_ports` distinct ports (one socket per query: see prober.c)."""

    count: int = 0
    lost: int = 0
    source_ports: int | None = None
    mean_us: float | None = None
    p50_us: float | None = None
    p90_us: float | None = None
    p99_us: float | None = None
    max_us: float | None = None
    min_us: float | None = None
    samples_ns: list[int] = field(default_factory=list, repr=False)

    @classmethod
    def from_samples(cls, samples_ns: list[int], lost: int = 0,
                     source_ports: int | None = None) -> LatencyStats:
        if not samples_ns:
            return cls(count=0, lost=lost, source_ports=source_ports)
        ordered = sorted(samples_ns)
        return cls(count=len(ordered), lost=lost, source_ports=source_ports,
                   mean_us=statistics.fmean(ordered) / 1000,
                   p50_us=nearest_rank(ordered, 50) / 1000,
                   p90_us=nearest_rank(ordered, 90) / 1000,
                   p99_us=nearest_rank(ordered, 99) / 1000,
                   max_us=ordered[-1] / 1000, min_us=ordered[0] / 1000,
                   samples_ns=list(samples_ns))


def nearest_rank(ordered: list[int], percent: float) -> int:
    """The nearest-rank percentile of already sorted, non-empty samples."""
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


def build_prober() -> Path:
    """Build bench/load/prober/prober if it is missing or older than its source; its path."""
    run_checked(["make", "-s", "-C", str(PROBER_DIR), "prober"], "building the prober")
    return PROBER_BIN


def probe(addr: str, port: int, query_file: Path, count: int, timeout: float = 1.0,
          cpu_list: str | None = None, seconds: float | None = None,
          interval: float | None = None, dnssec: bool = False,
          open_loop: bool = False, host: LoadHost | None = None,
          transport: str = "udp") -> LatencyStats:
    """Send `count` queries from `query_file` (cycled), one at a time (with `seconds`, as many
    as fit in that time, at most `count`; with `interval`, at most one per interval seconds,
    and with `open_loop` too, one every interval on a fixed schedule whether or not the
    earlier ones were answered; with `dnssec`, the DO bit set as dnsperf -D sets it); over
    `transport` (udp, tcp or tcp-new: prober.c); their latencies. On a load host, the prober
    built here is copied there and run through ssh (never pinned)."""
    if open_loop and not interval:
        raise ValueError("an open-loop prober needs its interval")
    if transport not in PROBER_TRANSPORTS:
        raise UserError(f"the prober does not speak {transport}: {NO_TLS}")
    program = str(build_prober())
    if host is not None:
        program, query_file = host.put(PROBER_BIN, "prober"), Path(host.put(query_file))
    argv = [program, "-n", str(count), "-t", str(max(1, round(timeout * 1000))),
            *(["-l", f"{seconds:g}"] if seconds else []),
            *(["-i", str(max(1, round(interval * 1e6)))] if interval else []),
            *(["-O"] if open_loop else []),
            *(["-D"] if dnssec else []),
            "-m", transport, addr, str(port), str(query_file)]
    if host is not None:
        argv = host.command(argv)
    elif cpu_list:
        argv = [TASKSET, "-c", cpu_list, *argv]
    # Worst case every query times out; the margin covers start-up on a busy machine. Here
    # as the service user, as every process the suite starts (ssh to a load host: as the
    # suite, whose keys it uses).
    runs_as = {} if host is not None else {"env": service_environment(),
                                            **as_user(service_user())}
    done = subprocess.run(argv, capture_output=True, text=True, check=False,
                          timeout=(seconds or count * timeout) + timeout + 60, **runs_as)
    if done.returncode != 0:
        raise UserError(f"prober failed (exit {done.returncode}): {done.stderr.strip()}")
    samples = [int(line) for line in done.stdout.split()]
    summary = dict(re.findall(r"\b(sent|ports)=(\d+)", done.stderr))
    sent = int(summary.get("sent", count))
    return LatencyStats.from_samples(samples, lost=sent - len(samples),
                                     source_ports=int(summary["ports"]) if "ports" in summary
                                     else None)


# The RCODE a recording gives a query that got no answer (prober.c: "SENT_NS -1 -1").
LOST = -1


@dataclass
class Recording:
    """Every query of a recording prober run, in the order sent: its send time on
    CLOCK_MONOTONIC (time.monotonic_ns's clock), its answer's RCODE and its latency in ns;
    LOST for both when no answer came within the time-out."""

    sent_ns: list[int] = field(default_factory=list)
    rcodes: list[int] = field(default_factory=list)
    latencies_ns: list[int] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> Recording:
        found = cls()
        with path.open() as lines:
            for line in lines:
                sent, rcode, latency = line.split()
                found.sent_ns.append(int(sent))
                found.rcodes.append(int(rcode))
                found.latencies_ns.append(int(latency))
        return found

    def __len__(self) -> int:
        return len(self.sent_ns)


class Recorder:
    """An open-loop prober run in the background that records every query it sends (-R): a
    steady offered load whose every second can be read back afterwards, whatever the server
    did meanwhile. `with` starts it and always stops it; wait() lets it end and reads it."""

    def __init__(self, addr: str, port: int, query_file: Path, out: Path, *, qps: float,
                 seconds: float, timeout: float, cpu_list: str | None = None) -> None:
        if qps <= 0 or seconds <= 0:
            raise ValueError("a recording prober needs a rate and a length")
        self.out = out
        self.seconds = seconds
        self.timeout = timeout
        argv = [str(build_prober()), "-R", "-O", "-i", str(max(1, round(1e6 / qps))),
                "-n", str(math.ceil(qps * seconds) + 1), "-l", f"{seconds:g}",
                "-t", str(max(1, round(timeout * 1000))), "-o", str(out),
                addr, str(port), str(query_file)]
        if cpu_list:
            argv = [TASKSET, "-c", cpu_list, *argv]
        self.process = ManagedProcess("prober", argv, out.with_suffix(".log"))

    def start(self) -> None:
        # The prober runs as the service user: the recording is made its own first, in
        # whichever directory the caller chose.
        self.out.touch()
        give_to_service_user(self.out)
        self.process.start()

    def wait(self) -> Recording:
        """Wait for the run's end (its length, then its last time-outs); its queries."""
        deadline = time.monotonic() + self.seconds + self.timeout + 60
        while self.process.running():
            if time.monotonic() > deadline:
                self.process.stop()
                raise UserError(f"the prober did not end; log {self.process.log_path}")
            time.sleep(0.1)
        proc = self.process.proc
        code = proc.returncode if proc is not None else None
        self.process.stop()
        if code != 0:
            raise UserError(f"prober failed (exit {code}): {self.process.log_tail(5)}")
        return Recording.read(self.out)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stop()


def measure_floor(count: int, timeout: float = 1.0, cpu_list: str | None = None
                  ) -> LatencyStats:
    """The prober's own latency floor: probe a trivial echo responder on loopback."""
    prober = build_prober()
    run_dir = new_run_dir("prober-floor")
    query_file = run_dir / "floor.queries"
    query_file.write_text(_FLOOR_QUERY)
    log = run_dir / "responder.out"
    with ManagedProcess("prober responder", [str(prober), "--responder", "0"], log) as resp:
        resp.start()
        resp.wait_ready(lambda: _responder_port(log) is not None, timeout=10)
        port = _responder_port(log) or 0  # never 0: wait_ready saw the port line
        stats = probe("127.0.0.1", port, query_file, count, timeout, cpu_list)
    query_file.unlink()
    log.unlink()
    run_dir.rmdir()
    return stats


def _responder_port(log: Path) -> int | None:
    """The port the responder printed as its first line ("port N"), once it has."""
    try:
        first = log.read_text().split("\n", 1)
    except OSError:
        return None
    if len(first) < 2 or not first[0].startswith("port "):
        return None
    return int(first[0].split()[1])
