"""Capacity under offered load: an open-loop sweep around each server's closed-loop maximum.

The closed-loop maximum (dnsperf keeping its queue full, as `run` measures QPS) is 100%. Then
dnsperf (Debian 13's 2.14, bench/load/dnsperf.py) offers fixed rates (`-Q`) at steps across
and past it, every step STEP_REPEATS times, and per step we record what was offered and
answered, the loss, the rcodes, reply traffic, latency percentiles, and which sockets dropped
datagrams (the server's or the load generator's, from /proc/net/udp). Seed 001 (NLnet Labs,
../shared/seeds/001_f1f5b6aa78e65a04.txt) calls a server up to the task below 5% loss; seed
002 (ISC) reports the "breaking point": here a bracket, the last step that held (95%, and
99%, answered) and the first one that did not, never a higher step that held after a lower one
failed. A step's rates are over its nominal length (dnsperf's -l, the prober's schedule):
dnsperf's own run time also holds its wait of up to -t for the last answers, and 27 of the 378
steps of the 2026-11-26 sweeps looked "not offered" by it although at least 95% of the target
had been sent over -l (all of -Q x -l by dnsperf in 20 of them). A step whose offered rate
still fell under 95% of its target is "not offered": the load generator fell short, and such a
step ends the walk up the steps (the server's breaking point is then at least the last that
held), unless the server dropped queries at its own sockets in it: then the server was
already losing queries, and the step is judged on what it answered of what was offered, like
any other. resperf's ramp (seed 004) runs beside it. Then latency at fixed offered loads: at
50% and 90% of the server's own breaking point and at one common rate, each from at least the
profile's probe count, measured open loop (the prober sends on a fixed schedule beside
dnsperf's -Q load).

Limits handled here rather than ignored:
- a -Q limiter that bursts to catch up after a stall (dnsperf 2.10's; 2.12 fixed it): every
  step still records dnsperf's per-second response counts (-S 1) and is flagged when a second
  exceeds the target by more than BURST_TOLERANCE;
- dnsperf's -v per-query lines cost it so much CPU that it could not offer more than ~28k
  queries/s here (native BIND answers over 80k): latency comes from the prober running
  beside dnsperf for the whole step (each query from a socket of its own so that every
  named worker is sampled);
- dnsperf leaves timed-out queries out of its latency: here every lost probe counts as a
  latency of the timeout in every percentile (as DNS Shotgun does), so a server does not look
  fast by losing its slowest queries.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from base.errors import UserError
from bench.load import dnsperf, resperf
from bench.load.prober import LatencyStats
from bench.measure.serial import RENAMED_SERVER, Section
from servers import kernel_rmem_max

# The offered rates, in % of the closed-loop maximum (the issue's and seed 001's range).
DEFAULT_STEPS = (10.0, 25.0, 50.0, 75.0, 90.0, 100.0, 110.0, 125.0, 150.0)
# Answered shares that define the breaking points: seed 001's 5% loss, and a strict 1%.
UP_TO_THE_TASK = 0.95
STRICT = 0.99
# A second of responses above target x (1 + this) is a burst of dnsperf's limiter.
BURST_TOLERANCE = 0.10
# A step that offered less than this share of its target rate (prober included) is "not
# offered": in the 2026-11-24 native sweep dnsperf 2.10 offered 81k/68k/59k against 92k, 104k
# and 125k targets while using 0.85-0.93 of its core, and those steps' losses were counted
# against named.
OFFERED_SHARE = 0.95
# Each offered load is measured this many times (the sweep runs up, then down, so that drift
# over the sweep lands on both sides), and reported as the median with its spread.
STEP_REPEATS = 2
# Latency percentiles of every step, and the "slowest percentiles" of the log-percentile plot.
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
SLOWEST = (100.0, 50.0, 20.0, 10.0, 5.0, 2.0, 1.0, 0.5, 0.2, 0.1)
# resperf ramps to this multiple of the closed-loop maximum.
RESPERF_REACH = 1.5
STEP_TIMEOUT_S = 1.0  # dnsperf's -t in the sweep: a query unanswered after it is lost
# dnsperf's -q in the sweep: enough outstanding queries for a whole timeout's worth of the
# target rate, so that the rate limit and not the queue bounds what is offered; but dnsperf
# 2.10's bookkeeping slows its sending as -q grows (-Q 60000 against native BIND: -q 1000 and
# 5000 offered 60k/s, -q 100000 only 26-28k/s), hence the bounds.
MIN_OUTSTANDING, MAX_OUTSTANDING = 1000, 20000


def outstanding_for(target_qps: float) -> int:
    return int(min(MAX_OUTSTANDING, max(MIN_OUTSTANDING, target_qps * STEP_TIMEOUT_S)))
# The prober beside a step is paced to PROBE_SHARE of the step's rate (at least 10 and at most
# 1,000 queries per second: 5,000 samples in a 5-s step, enough for p99.9), and dnsperf offers
# the rest, so that the two together offer exactly the step's rate. Unpaced, the prober sent
# 10-15k probes/s and took the CPU dnsperf needed to offer the rate.
PROBE_SHARE = 0.05
MIN_PROBE_QPS, MAX_PROBE_QPS = 10.0, 1000.0
MAX_PROBES = 1000000
# At the loaded-latency points the prober takes a larger share (10%: 100 probes/s at 1,000
# QPS), so that the profile's probe count (quick: 1,000) takes seconds, not minutes; each
# point lasts until it has them (at least the profile's step time).
LATENCY_PROBE_SHARE = 0.10
# The loaded-latency points: shares of the server's own 95% breaking point.
LATENCY_SHARES = (0.5, 0.9)


def probe_rate(target_qps: float, share: float = PROBE_SHARE) -> float:
    """Queries per second the prober sends during a step at target_qps."""
    return min(MAX_PROBE_QPS, max(MIN_PROBE_QPS, share * target_qps))


def latency_point_seconds(target_qps: float, probes: int, step_s: float) -> float:
    """How long a loaded-latency point runs: until the prober has sent `probes` queries at
    its rate, and at least a step's time."""
    return max(step_s, probes / probe_rate(target_qps, LATENCY_PROBE_SHARE))


def sweep_order(steps: tuple[float, ...], repeats: int) -> list[tuple[int, float]]:
    """(repeat, step) in the order measured: up the steps, then down, and so on, so that a
    drift of the machine over the sweep lands on both sides of every step."""
    order = []
    for repeat in range(repeats):
        order += [(repeat, s) for s in (steps if repeat % 2 == 0 else reversed(steps))]
    return order


def load_generator_buffer() -> int:
    """dnsperf's socket buffers (-b), in bytes: the kernel's rmem_max, as each server's
    receive buffer is sized (servers/dnsserver.py), so that the load generator's sockets do
    not overflow first; 0 when rmem_max is unreadable (dnsperf's own default then)."""
    return kernel_rmem_max() or 0


def offered_load_options() -> list[str]:
    """dnsperf's options for a load offered at a fixed rate: its responses every second
    (-S 1, to see a burst or a stall) and socket buffers as large as the server's (-b, KiB)."""
    buffer_kb = load_generator_buffer() // 1024
    return ["-S", "1", *(["-b", str(buffer_kb)] if buffer_kb else [])]


def parse_steps(text: str) -> tuple[float, ...]:
    """'10,25,50' -> (10.0, 25.0, 50.0): positive percentages, in increasing order."""
    words = [w.strip() for w in text.split(",")]
    try:
        steps = tuple(float(w) for w in words)
    except ValueError:
        raise UserError(f"--steps {text!r}: expected a comma list of percentages of the "
                        "closed-loop maximum, e.g. 10,50,100,150") from None
    if not steps or any(not math.isfinite(s) or s <= 0 for s in steps):
        raise UserError(f"--steps {text!r}: every step must be a positive percentage")
    return tuple(sorted(set(steps)))


@dataclass(kw_only=True)  # keywords only: `run` can come last, where results.json has it
class Step:
    """One offered rate held for the step's duration."""

    percent: float | None         # of the closed-loop maximum; None for the common-rate step
    target_qps: float             # dnsperf -Q
    offered_qps: float            # queries sent / the step's nominal length (duration_s)
    answered_qps: float           # queries completed / the step's nominal length
    answered_fraction: float      # completed / sent
    lost: int
    latency_us: dict[str, float | None]   # "p50", "p90", "p99", "p99.9", "max"; lost = timeout
    slowest_us: dict[str, float | None]   # latency of the slowest X% (log-percentile plot)
    probes: int                   # prober queries behind the latency figures (part of the load)
    probes_lost: int
    # Datagrams the kernel dropped during the step because a UDP socket's receive queue was
    # full (machine-wide: named's sockets and the load generator's): where lost queries went.
    udp_rcvbuf_errors: int | None
    reply_mbit_s: float           # response octets per second, as seed 002 reports it
    burst: bool                   # a second of responses above the target (dnsperf 2.10)
    repeat: int = 0               # which of the STEP_REPEATS measurements of this load
    # The drops above per socket: the server's, the load generator's, and the rest.
    socket_drops: SocketDrops | None = None
    # The step's nominal length (dnsperf's -l, the prober's schedule), which its rates are
    # over; None in files written before it was recorded (their rates were over dnsperf's
    # run time, which holds the wait for the last answers too: __post_init__ recomputes them
    # from the raw counts and the -l of dnsperf's command line).
    duration_s: float | None = None
    run: dnsperf.DnsperfRun       # dnsperf's own report (per-query lines left out)

    json_absent: ClassVar[dict[str, Any]] = {"udp_rcvbuf_errors": None}  # files before it

    def __post_init__(self) -> None:
        if self.duration_s is None:
            seconds = dnsperf.duration_of(self.run.argv)
            if seconds and self.run.queries_sent:
                self.duration_s = seconds
                self.offered_qps, self.answered_qps, self.reply_mbit_s = step_rates(
                    self.run, self.probes, self.probes - self.probes_lost, seconds)

    @property
    def offered(self) -> bool:
        """The load generator put at least OFFERED_SHARE of the target on the server."""
        return self.offered_qps >= OFFERED_SHARE * self.target_qps

    @property
    def server_dropped(self) -> bool:
        """Datagrams were dropped at the server's own sockets: it was losing queries itself."""
        return self.socket_drops is not None and self.socket_drops.server > 0

    def outcome(self, answered: float = UP_TO_THE_TASK) -> str:
        """"held" (at least `answered` of what was sent answered) or "lost"; "not offered"
        when the load generator fell short and the server dropped nothing at its sockets."""
        return judged(self.offered, self.server_dropped, self.answered_fraction, answered)


@dataclass
class Level:
    """One offered load (a % of the closed-loop maximum) and its repeated steps."""

    percent: float
    steps: list[Step]

    @property
    def target_qps(self) -> float:
        return self.steps[0].target_qps

    @property
    def offered_qps(self) -> float:
        return statistics.median(s.offered_qps for s in self.steps)

    @property
    def offered(self) -> bool:
        """Judged on the median offered rate: a level is not offered when most of its
        repeats were not."""
        return self.offered_qps >= OFFERED_SHARE * self.target_qps

    @property
    def answered_fraction(self) -> float:
        """The median answered share of the repeats."""
        return statistics.median(s.answered_fraction for s in self.steps)

    @property
    def spread(self) -> tuple[float, float]:
        """The lowest and highest answered share of the repeats."""
        shares = [s.answered_fraction for s in self.steps]
        return min(shares), max(shares)

    @property
    def server_dropped(self) -> bool:
        """A repeat dropped datagrams at the server's own sockets."""
        return any(s.server_dropped for s in self.steps)

    def outcome(self, answered: float = UP_TO_THE_TASK) -> str:
        return judged(self.offered, self.server_dropped, self.answered_fraction, answered)


def judged(offered: bool, server_dropped: bool, answered_fraction: float,
           answered: float) -> str:
    """A load's outcome: "held" or "lost" on its answered share; "not offered" when the
    load generator sent too little and the server lost nothing at its own sockets (its loss,
    if any, says nothing of the server's limit then)."""
    if not offered and not server_dropped:
        return "not offered"
    return "held" if answered_fraction >= answered else "lost"


def levels_of(steps: Iterable[Step]) -> list[Level]:
    """The steps grouped by offered load, lowest first (the common-rate step left out)."""
    by_percent: dict[float, list[Step]] = {}
    for step in steps:
        if step.percent is not None:
            by_percent.setdefault(step.percent, []).append(step)
    return [Level(p, sorted(by_percent[p], key=lambda s: s.repeat)) for p in sorted(by_percent)]


@dataclass(frozen=True)
class BreakingPoint:
    """Where the walk up the loads ended, as a bracket in offered QPS: the last load that
    held (None when the lowest did not) and the first that failed (None when none did), with
    their % of the closed-loop maximum, and what ended the walk: "lost" (a load answered under
    the share), "not offered" (the load generator fell short of a load and the server dropped
    nothing at its sockets: the server's limit is at least the last that held), "held every
    step" (also only a lower bound) or "no steps"."""

    qps: float | None
    percent: float | None
    ended_by: str
    failed_qps: float | None = None
    failed_percent: float | None = None

    @property
    def lower_bound(self) -> bool:
        return self.ended_by in ("not offered", "held every step")


def breaking_point(levels: list[Level], answered: float = UP_TO_THE_TASK) -> BreakingPoint:
    """Walk the loads upwards; stop at the first that did not hold."""
    last: Level | None = None
    for level in levels:
        outcome = level.outcome(answered)
        if outcome != "held":
            failed = level if outcome == "lost" else None
            return BreakingPoint(None if last is None else last.offered_qps,
                                 None if last is None else last.percent, outcome,
                                 None if failed is None else failed.offered_qps,
                                 None if failed is None else failed.percent)
        last = level
    if last is None:
        return BreakingPoint(None, None, "no steps")
    return BreakingPoint(last.offered_qps, last.percent, "held every step")


@dataclass
class LatencyPoint:
    """Latency at one fixed offered load: `share` of the server's own 95% breaking point."""

    share: float
    step: Step


@dataclass
class Curve:
    """One server at one thread count: its closed-loop maximum, every step, resperf's ramp."""

    server: str
    threads: int
    connections: int
    closed_loop_qps: float | None = None
    steps: list[Step] = field(default_factory=list)
    common_rate_step: Step | None = None
    resperf: resperf.ResperfRun | None = None
    error: str | None = None
    # Latency at LATENCY_SHARES of the breaking point (the common rate is common_rate_step).
    latency_points: list[LatencyPoint] = field(default_factory=list)
    # The server's receive-buffer setting and what its sockets got (ReceiveBuffer.record()).
    receive_buffer: dict | None = None

    json_renamed: ClassVar[dict[str, str]] = RENAMED_SERVER

    def levels(self) -> list[Level]:
        return levels_of(self.steps)

    def breaking(self, answered: float = UP_TO_THE_TASK) -> BreakingPoint:
        return breaking_point(self.levels(), answered)

    def breaking_point(self, answered: float = UP_TO_THE_TASK) -> float | None:
        """The offered rate of the last load before the first that answered under
        `answered` (or was not offered): the bracket's lower end."""
        return self.breaking(answered).qps

    def step_near(self, qps: float | None) -> Step | None:
        """The measured step whose offered rate is closest to qps."""
        if qps is None or not self.steps:
            return None
        return min(self.steps, key=lambda s: abs(s.offered_qps - qps))


# results.json's "capacity": one curve per (server, threads).
SECTION = Section("capacity", list[Curve], always=True)


def latency_figures(answered_s: list[float], lost: int,
                    timeout_s: float) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """(percentiles, slowest-X% latencies) in us, every lost query counted at the timeout."""
    samples = sorted([*answered_s, *([timeout_s] * lost)])
    if not samples:
        empty = {f"p{p:g}": None for p in PERCENTILES}
        return {**empty, "max": None}, {f"{p:g}": None for p in SLOWEST}
    us = [round(v * 1e6, 1) for v in samples]
    percentiles: dict[str, float | None] = {f"p{p:g}": nearest_rank_f(us, p)
                                            for p in PERCENTILES}
    percentiles["max"] = us[-1]
    slowest: dict[str, float | None] = {f"{p:g}": nearest_rank_f(us, 100.0 - p)
                                        for p in SLOWEST}
    return percentiles, slowest


def nearest_rank_f(ordered: list[float], percent: float) -> float:
    """The nearest-rank percentile (bench/load/prober/) of sorted samples; 0 is the smallest."""
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


def step_from_run(percent: float | None, target: float, run: dnsperf.DnsperfRun,
                  probes: LatencyStats, timeout_s: float, rcvbuf_errors: int | None,
                  socket_drops: SocketDrops | None = None, repeat: int = 0, *,
                  duration_s: float) -> Step:
    """One step from dnsperf's run and the prober's beside it, both held for `duration_s`."""
    percentiles, slowest = latency_figures([ns / 1e9 for ns in probes.samples_ns],
                                           probes.lost, timeout_s)
    probes_sent = probes.count + probes.lost
    sent = run.queries_sent + probes_sent
    answered = run.queries_completed + probes.count
    offered_qps, answered_qps, reply_mbit_s = step_rates(run, probes_sent, probes.count,
                                                         duration_s)
    # The first and last seconds are partial; a burst shows in a full second.
    full = run.interval_qps[1:-1] if len(run.interval_qps) > 2 else run.interval_qps
    return Step(percent=percent, target_qps=target, offered_qps=offered_qps,
                answered_qps=answered_qps,
                answered_fraction=answered / sent if sent else 0.0,
                lost=run.queries_lost, latency_us=percentiles, slowest_us=slowest,
                probes=probes_sent, probes_lost=probes.lost,
                udp_rcvbuf_errors=rcvbuf_errors, reply_mbit_s=reply_mbit_s,
                burst=any(q > target * (1 + BURST_TOLERANCE) for q in full), run=run,
                repeat=repeat, socket_drops=socket_drops, duration_s=duration_s)


def step_rates(run: dnsperf.DnsperfRun, probes_sent: int, probes_answered: int,
               seconds: float) -> tuple[float, float, float]:
    """(offered, answered, reply Mbit/s) of a step: dnsperf's and the prober's queries over
    the step's nominal length, not over dnsperf's run time (which includes its wait of up to
    -t for the last answers: in the 2026-11-26 sweeps, steps that sent their whole target
    came out up to 17% short of it over that time)."""
    offered = (run.queries_sent + probes_sent) / seconds
    answered = (run.queries_completed + probes_answered) / seconds
    return offered, answered, run.response_bytes * 8 * run.queries_completed / seconds / 1e6


# --- where datagrams were dropped: per socket, from /proc/net/udp ---------------------------
# The kernel's UdpRcvbufErrors counter is machine-wide: in the 2026-11-24 native sweep it
# equalled dnsperf's plus the prober's losses, but it cannot say whose receive queue was
# full. /proc/net/udp's last column counts drops per socket; /proc/PID/fd maps a socket's
# inode to its process.

_SOCKET_LINK = re.compile(r"^socket:\[(\d+)\]$")


@dataclass
class SocketDrops:
    """Datagrams dropped during a step: at the server's sockets, at the load generator's
    (dnsperf's), and elsewhere (the machine-wide count less those two: the prober's
    one-query sockets, and any other process on the machine)."""

    server: int
    load_generator: int
    elsewhere: int | None  # None: the machine-wide counter was unreadable


def udp_socket_drops(text: str) -> dict[int, int]:
    """/proc/net/udp (or udp6) text -> {socket inode: datagrams dropped}."""
    drops = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 13 and fields[9].isdigit():
            drops[int(fields[9])] = int(fields[12])
    return drops


def socket_inodes(fd_targets: Iterable[str]) -> set[int]:
    """readlink values of /proc/PID/fd entries -> the inodes of those that are sockets."""
    found = set()
    for target in fd_targets:
        match = _SOCKET_LINK.match(target)
        if match:
            found.add(int(match.group(1)))
    return found


def process_socket_inodes(pids: Iterable[int]) -> set[int]:
    """The socket inodes the processes hold open (a process gone meanwhile holds none)."""
    targets = []
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for name in names:
            try:
                targets.append(os.readlink(fd_dir / name))
            except OSError:
                continue
    return socket_inodes(targets)


def read_udp_socket_drops() -> dict[int, int]:
    """Every UDP socket's drop count on this machine (IPv4 and IPv6)."""
    drops: dict[int, int] = {}
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            drops.update(udp_socket_drops(Path(table).read_text()))
        except OSError:
            continue
    return drops


def attribute_drops(before: dict[int, int], after: dict[int, int], server: set[int],
                    load_generator: set[int], machine: int | None) -> SocketDrops:
    """Drops between two readings, summed over the server's sockets and the load generator's;
    a socket absent before counts from zero (it was opened during the step)."""
    def grown(inodes: set[int]) -> int:
        return sum(after[i] - before.get(i, 0) for i in inodes if i in after)

    at_server, at_client = grown(server), grown(load_generator - server)
    elsewhere = None if machine is None else max(0, machine - at_server - at_client)
    return SocketDrops(at_server, at_client, elsewhere)


class SocketWatch:
    """Reads the drop counts of a process's UDP sockets every INTERVAL_S while it runs, in a
    thread: dnsperf closes its sockets when it exits, and with them their counts. Drops in
    its last interval are missed here (and counted "elsewhere")."""

    INTERVAL_S = 0.1

    def __init__(self, pid: int | None) -> None:
        """pid None: dnsperf runs on load hosts, whose sockets are not this machine's to
        read (their drops are then counted "elsewhere")."""
        self.pid = pid
        self.inodes: set[int] = set()
        self.last: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.INTERVAL_S):
                return

    def sample(self) -> None:
        if self.pid is None:
            return
        inodes = process_socket_inodes([self.pid])
        drops = read_udp_socket_drops()
        self.inodes |= inodes
        self.last.update({i: drops[i] for i in inodes if i in drops})

    def __enter__(self) -> SocketWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


_SS_SOCKET = re.compile(r"\bino:(\d+)\b")
_SS_RCVBUF = re.compile(r"\brb(\d+)\b")


def socket_receive_buffers(ss_text: str, inodes: set[int]) -> list[int]:
    """`ss -uanme` text -> the receive buffer (bytes, as the kernel holds it: twice what
    SO_RCVBUF was given) of each socket among `inodes`."""
    buffers = []
    inode = None
    for line in ss_text.splitlines():
        found = _SS_SOCKET.search(line)
        if found:
            inode = int(found.group(1))
        size = _SS_RCVBUF.search(line)
        if size and inode in inodes:
            buffers.append(int(size.group(1)))
            inode = None
    return buffers
