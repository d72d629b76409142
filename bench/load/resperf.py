"""resperf (Debian 13's dnsperf package, run in its root as dnsperf is): one ramp of the
offered rate, seed 004's method.

resperf raises its sending rate linearly from 0 to `max_qps` over `ramp_s` seconds and writes
a plot-data file, one line per interval: time, target and actual rate, responses and failures
per second, average latency. Its own verdict is the "Maximum throughput" line: the highest
rate of responses it saw, with the loss at that point.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from base.errors import UserError
from base.process import new_run_dir, run_checked
from bench.load.dnsperf import in_root, transport_args

RESPERF = "/usr/bin/resperf"
TASKSET = "/usr/bin/taskset"

_MAX = re.compile(r"Maximum throughput:\s+([\d.]+) qps")
_LOST = re.compile(r"Lost at that point:\s+([\d.]+)%")


@dataclass
class RampPoint:
    time_s: float
    target_qps: float
    actual_qps: float
    responses_qps: float
    failures_qps: float
    latency_avg_s: float


@dataclass
class ResperfRun:
    argv: list[str]
    max_qps: float | None = None          # resperf's "Maximum throughput"
    lost_at_max_percent: float | None = None
    ramp: list[RampPoint] = field(default_factory=list)
    stdout: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ResperfRun:
        d = dict(data)
        d["ramp"] = [RampPoint(**p) for p in d.get("ramp", [])]
        return cls(**d)


def parse(stdout: str, plot: str, argv: list[str]) -> ResperfRun:
    """resperf's report and plot file; a report without its maximum is a UserError."""
    found = _MAX.search(stdout)
    if found is None:
        raise UserError(f"resperf printed no maximum throughput ({' '.join(argv)}):\n"
                        + "\n".join(stdout.splitlines()[-10:]))
    lost = _LOST.search(stdout)
    run = ResperfRun(argv, float(found.group(1)), float(lost.group(1)) if lost else None,
                     stdout=stdout)
    for line in plot.splitlines():
        fields = line.split()
        if line.startswith("#") or len(fields) < 6:
            continue
        run.ramp.append(RampPoint(*(float(v) for v in fields[:6])))
    return run


def ramp(server: str, port: int, query_file: Path, *, max_qps: float, ramp_s: float,
         clients: int, timeout_s: float = 1.0, cpu_list: str | None = None,
         transport: str = "udp") -> ResperfRun:
    """One resperf ramp from 0 to max_qps queries per second over ramp_s seconds, over
    `transport` (dnsperf.transport_args)."""
    work = new_run_dir("resperf")
    plot = work / "resperf.plot"
    # -R: the query file is reused from its start (a ramp sends more queries than it holds).
    argv = [RESPERF, "-s", server, "-p", str(port), "-d", str(query_file), "-R",
            "-m", f"{max(1, round(max_qps))}", "-r", f"{ramp_s:g}", "-P", str(plot),
            "-C", str(clients), "-t", f"{timeout_s:g}", *transport_args(transport, "-M")]
    if cpu_list:
        argv = [TASKSET, "-c", cpu_list, *argv]
    argv = in_root(argv)
    try:
        out = run_checked(argv, "resperf", timeout=ramp_s + timeout_s + 60)
        return parse(out, plot.read_text() if plot.exists() else "", argv)
    finally:
        plot.unlink(missing_ok=True)
        work.rmdir()
