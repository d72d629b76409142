"""Capacity under offered load: an open-loop sweep around each server's closed-loop maximum.

The closed-loop maximum (dnsperf keeping its queue full, as `run` measures QPS) is 100%. Then
dnsperf offers fixed rates (`-Q`) at steps across and past it, and per step we record what was
offered and answered, the loss, the rcodes, reply traffic and latency percentiles. Seed 001
(NLnet Labs, ../shared/seeds/001_f1f5b6aa78e65a04.txt) calls a server up to the task below 5%
loss; seed 002 (ISC) reports the "breaking point". resperf's ramp (seed 004) runs beside it.

Debian 12's dnsperf 2.10 has three known limits, handled here rather than ignored:
- its -Q limiter bursts to catch up after a server stall (fixed in 2.12): every step records
  dnsperf's per-second response counts (-S 1) and is flagged when a second exceeds the target
  by more than BURST_TOLERANCE, and the rate actually offered (sent / run time) is recorded
  beside the target;
- it has no latency histogram, and its -v per-query lines cost it so much CPU that it could
  not offer more than ~28k queries/s here (native BIND answers over 80k): latency comes from
  the prober running beside dnsperf for the whole step (one query at a time, each from a
  socket of its own so that every named worker is sampled);
- it leaves timed-out queries out of its latency: here every lost probe counts as a latency
  of the timeout in every percentile (as DNS Shotgun does), so a server does not look fast by
  losing its slowest queries.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from base.errors import UserError
from bench.load import dnsperf, resperf
from bench.load.prober import LatencyStats

# The offered rates, in % of the closed-loop maximum (the issue's and seed 001's range).
DEFAULT_STEPS = (10.0, 25.0, 50.0, 75.0, 90.0, 100.0, 110.0, 125.0, 150.0)
# Answered shares that define the breaking points: seed 001's 5% loss, and a strict 1%.
UP_TO_THE_TASK = 0.95
STRICT = 0.99
# A second of responses above target x (1 + this) is a burst of dnsperf's limiter.
BURST_TOLERANCE = 0.10
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


def probe_rate(target_qps: float) -> float:
    """Queries per second the prober sends during a step at target_qps."""
    return min(MAX_PROBE_QPS, max(MIN_PROBE_QPS, PROBE_SHARE * target_qps))


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


@dataclass
class Step:
    """One offered rate held for the step's duration."""

    percent: float | None         # of the closed-loop maximum; None for the common-rate step
    target_qps: float             # dnsperf -Q
    offered_qps: float            # queries sent / run time
    answered_qps: float           # queries completed / run time
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
    run: dnsperf.DnsperfRun       # dnsperf's own report (per-query lines left out)

    def to_dict(self) -> dict:
        return {**{k: v for k, v in asdict(self).items() if k != "run"},
                "run": self.run.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> Step:
        return cls(**{"udp_rcvbuf_errors": None, **data,
                      "run": dnsperf.DnsperfRun.from_dict(data["run"])})


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

    def breaking_point(self, answered: float = UP_TO_THE_TASK) -> float | None:
        """The highest offered rate with at least `answered` of its queries answered."""
        held = [s.offered_qps for s in self.steps if s.answered_fraction >= answered]
        return max(held) if held else None

    def step_near(self, qps: float | None) -> Step | None:
        """The measured step whose offered rate is closest to qps."""
        if qps is None or not self.steps:
            return None
        return min(self.steps, key=lambda s: abs(s.offered_qps - qps))

    def to_dict(self) -> dict:
        return {"server": self.server, "threads": self.threads,
                "connections": self.connections, "closed_loop_qps": self.closed_loop_qps,
                "steps": [s.to_dict() for s in self.steps],
                "common_rate_step": (None if self.common_rate_step is None
                                     else self.common_rate_step.to_dict()),
                "resperf": None if self.resperf is None else self.resperf.to_dict(),
                "error": self.error}

    @classmethod
    def from_dict(cls, data: dict) -> Curve:
        d = dict(data)
        if "driver" in d:  # written before the suite called it a server (up to 2026-11-25)
            d["server"] = d.pop("driver")
        d["steps"] = [Step.from_dict(s) for s in d.get("steps", [])]
        common = d.get("common_rate_step")
        d["common_rate_step"] = None if common is None else Step.from_dict(common)
        ramp = d.get("resperf")
        d["resperf"] = None if ramp is None else resperf.ResperfRun.from_dict(ramp)
        return cls(**d)


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
                  probes: LatencyStats, timeout_s: float, rcvbuf_errors: int | None) -> Step:
    seconds = run.run_time_s or 1.0
    percentiles, slowest = latency_figures([ns / 1e9 for ns in probes.samples_ns],
                                           probes.lost, timeout_s)
    sent = run.queries_sent + probes.count + probes.lost
    answered = run.queries_completed + probes.count
    # The first and last seconds are partial; a burst shows in a full second.
    full = run.interval_qps[1:-1] if len(run.interval_qps) > 2 else run.interval_qps
    return Step(percent=percent, target_qps=target,
                offered_qps=sent / seconds,
                answered_qps=answered / seconds,
                answered_fraction=answered / sent if sent else 0.0,
                lost=run.queries_lost, latency_us=percentiles, slowest_us=slowest,
                probes=probes.count + probes.lost, probes_lost=probes.lost,
                udp_rcvbuf_errors=rcvbuf_errors,
                reply_mbit_s=run.response_bytes * 8 * run.queries_completed / seconds / 1e6,
                burst=any(q > target * (1 + BURST_TOLERANCE) for q in full), run=run)
