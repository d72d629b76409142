"""resperf (Debian 13's dnsperf package, run in its root as dnsperf is): one ramp of the
offered rate, seed 004's method.

resperf raises its sending rate linearly from 0 to `max_qps` over `ramp_s` seconds and writes
a plot-data file, one line per interval: time, target and actual rate, responses and failures
per second, average latency. Its own verdict is the "Maximum throughput" line: the highest
rate of responses it saw, with the loss at that point.

On load hosts (`--load-from`) each runs its own resperf at once, ramping to its share of
`max_qps`; `merge_ramps` adds their plots interval by interval, and the merged maximum is the
highest summed rate of responses in one interval (their own maxima, each at a moment of its
own, are not added).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from base.errors import UserError
from base.process import new_run_dir, run_checked
from bench.load.dnsperf import in_root, transport_args
from bench.load.hosts import LoadHost

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
         hosts: Sequence[LoadHost] = (), transport: str = "udp") -> ResperfRun:
    """One resperf ramp from 0 to max_qps queries per second over ramp_s seconds (from every
    load host at once, if any, each to its share), over `transport` (dnsperf.transport_args)."""
    if hosts:
        return _ramp_on_hosts(server, port, query_file, max_qps=max_qps, ramp_s=ramp_s,
                              clients=clients, timeout_s=timeout_s, hosts=hosts,
                              transport=transport)
    work = new_run_dir("resperf")
    plot = work / "resperf.plot"
    argv = [RESPERF, *_options(server, port, str(query_file), max_qps, ramp_s, str(plot),
                               clients, timeout_s, transport)]
    if cpu_list:
        argv = [TASKSET, "-c", cpu_list, *argv]
    argv = in_root(argv)
    try:
        out = run_checked(argv, "resperf", timeout=ramp_s + timeout_s + 60)
        return parse(out, plot.read_text() if plot.exists() else "", argv)
    finally:
        plot.unlink(missing_ok=True)
        work.rmdir()


def _options(server: str, port: int, query_file: str, max_qps: float, ramp_s: float,
             plot: str, clients: int, timeout_s: float, transport: str) -> list[str]:
    # -R: the query file is reused from its start (a ramp sends more queries than it holds).
    return ["-s", server, "-p", str(port), "-d", query_file, "-R",
            "-m", f"{max(1, round(max_qps))}", "-r", f"{ramp_s:g}", "-P", plot,
            "-C", str(clients), "-t", f"{timeout_s:g}", *transport_args(transport, "-M")]


def _ramp_on_hosts(server: str, port: int, query_file: Path, *, max_qps: float, ramp_s: float,
                   clients: int, timeout_s: float, hosts: Sequence[LoadHost],
                   transport: str) -> ResperfRun:
    started = []
    try:
        for index, host in enumerate(hosts):
            plot = host.remote_path(f"resperf-{index}.plot")
            argv = host.command(["resperf", *_options(
                server, port, host.put(query_file), max_qps / len(hosts), ramp_s, plot,
                clients, timeout_s, transport)])
            started.append((host, plot, argv, subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
        runs = []
        for host, plot, argv, proc in started:
            out, _ = proc.communicate(timeout=ramp_s + timeout_s + 60)
            text = out.decode(errors="replace")
            if proc.returncode != 0:
                raise UserError(f"resperf on {host.label} failed (exit {proc.returncode}):\n"
                                + "\n".join(text.splitlines()[-10:]))
            runs.append(parse(text, host.read(plot), argv))
        return merge_ramps(runs)
    finally:
        for *_, proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def merge_ramps(runs: Sequence[ResperfRun]) -> ResperfRun:
    """Ramps run at once from several places as one: their plots added interval by interval
    (as far as the shortest goes), the maximum the highest summed responses per second, and
    the loss at that interval."""
    if len(runs) == 1:
        return runs[0]
    points = [RampPoint(runs[0].ramp[i].time_s,
                        *(sum(getattr(r.ramp[i], name) for r in runs)
                          for name in ("target_qps", "actual_qps", "responses_qps",
                                       "failures_qps")),
                        sum(r.ramp[i].latency_avg_s for r in runs) / len(runs))
              for i in range(min(len(r.ramp) for r in runs))]
    best = max(points, key=lambda p: p.responses_qps, default=None)
    lost = (None if best is None or not best.actual_qps
            else 100.0 * max(0.0, 1 - best.responses_qps / best.actual_qps))
    return ResperfRun([word for r in runs for word in [*r.argv, ";"]][:-1],
                      None if best is None else best.responses_qps, lost, points,
                      "\n".join(r.stdout for r in runs))
