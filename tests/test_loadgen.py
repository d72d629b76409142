"""A cell whose load generator limits it is flagged: the rules on hand-made figures, and a real
run with dnsperf throttled to 20% of a core by the kernel's CPU controller (a cgroup with a
CFS quota) against a tiny named pinned to another CPU."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.load.dnsperf import DnsperfRun, build_argv, parse_output
from bench.measure import accounting
from bench.measure.cells import Cell
from bench.measure.loadgen import (
    GENERATOR_LIMIT,
    CoreUse,
    capacity_per_core,
    core_use,
    server_cpus,
)
from bench.measure.runner import pin_processes
from tests.test_measure import tiny_named, write_query_file


def _cell(dnsperf_cpu_s: float | None, named_us: float, db_us: float | None = None,
          qps: float = 10_000.0) -> Cell:
    run = DnsperfRun(argv=["handwritten"], queries_sent=int(qps), queries_completed=int(qps),
                     run_time_s=1.0, qps=qps, cpu_s=dnsperf_cpu_s)
    return Cell("x", 1, 1, qps_runs=[run, run],
                cpu_us_per_query={"named": named_us, "db": db_us, "dnsperf": 1.0})


def test_dnsperf_at_its_limit_marks_the_cell() -> None:
    assert core_use(_cell(0.8, 95.0), 1) == CoreUse(0.8, pytest.approx(0.95))
    assert core_use(_cell(0.8, 95.0), 1).load_generator_bound
    assert not core_use(_cell(0.79, 95.0), 1).load_generator_bound


def test_an_idle_pinned_server_marks_the_cell() -> None:
    # 10,000 QPS at 60 + 29 us: 0.89 of the one server core.
    assert core_use(_cell(0.3, 60.0, 29.0), 1).load_generator_bound
    assert not core_use(_cell(0.3, 60.0, 30.0), 1).load_generator_bound
    # Unpinned, the server's share of the machine is not known: dnsperf's rule only.
    assert core_use(_cell(0.3, 60.0, 29.0), None) == CoreUse(0.3, None)
    assert not core_use(_cell(0.3, 60.0, 29.0), None).load_generator_bound


def test_unaccounted_figures_mark_nothing() -> None:
    cell = _cell(None, 95.0)
    cell.cpu_us_per_query["named"] = None
    assert core_use(cell, 1) == CoreUse(None, None) and not core_use(cell, 1).load_generator_bound
    assert capacity_per_core(cell) is None
    assert capacity_per_core(_cell(0.3, 60.0, 40.0)) == pytest.approx(10_000.0)


def test_server_cpus_of_files_before_they_were_recorded() -> None:
    assert server_cpus({"server_cpus": 3}) == 3
    assert server_cpus({"pin": True, "cpu_usable": 2}) == 1
    assert server_cpus({"pin": False, "cpu_usable": 2}) is None


def _cpu_cgroup(name: str) -> Path | None:
    """A new cgroup of the CPU controller (v1 hierarchy, or v2 where it is enabled), or None
    when this machine does not let us make one."""
    for root, quota in ((Path("/sys/fs/cgroup/cpu"), "cpu.cfs_quota_us"),
                        (Path("/sys/fs/cgroup"), "cpu.max")):
        if not (root / "cgroup.procs").exists():
            continue
        group = root / name
        try:
            group.mkdir()
        except OSError:
            continue
        if (group / quota).exists():
            return group
        group.rmdir()
    return None


@pytest.fixture
def throttled() -> Iterator[Path]:
    """A cgroup whose processes get 20% of one CPU."""
    group = _cpu_cgroup(f"dlzbench-test-{os.getpid()}")
    if group is None:
        pytest.skip("no CPU cgroup can be made here")
    try:
        if (group / "cpu.cfs_quota_us").exists():
            (group / "cpu.cfs_period_us").write_text("100000")
            (group / "cpu.cfs_quota_us").write_text("20000")
        else:
            (group / "cpu.max").write_text("20000 100000")
        yield group
    finally:
        group.rmdir()


def _dnsperf_in(group: Path, port: int, query_file: Path, out: Path) -> DnsperfRun:
    """dnsperf for 2 s on CPU 1 inside `group`, its CPU time from the kernel when reaped."""
    argv = build_argv("127.0.0.1", port, query_file, duration=2, clients=4, queue_depth=100,
                      cpu_list="1")
    with open(out, "wb") as stdout:
        proc = subprocess.Popen(["/bin/sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"',
                                 "sh", *argv], stdout=stdout, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, out.read_text()[-2000:]
    run = parse_output(out.read_text(), argv)
    run.cpu_s = usage.ru_utime + usage.ru_stime
    return run


def test_a_throttled_load_generator_is_flagged(throttled: Path, run_dir: Path) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs: the server on one, dnsperf on the other")
    query_file = write_query_file(run_dir)
    with tiny_named(run_dir / "named-throttled") as named:
        pin_processes(named.pids(), "0")
        with accounting.CpuMeter(named.pids()) as named_cpu:
            run = _dnsperf_in(throttled, named.port, query_file, run_dir / "dnsperf.out")
    assert run.queries_completed > 0
    cell = Cell("native", 1, 1, qps_runs=[run], cpu_us_per_query={
        "named": accounting.us_per_query(named_cpu.seconds, run.queries_completed),
        "db": None, "dnsperf": accounting.us_per_query(run.cpu_s, run.queries_completed)})
    use = core_use(cell, 1)
    # dnsperf got no more than its quota, so its own rule cannot fire: the idle server does.
    assert use.dnsperf is not None and use.dnsperf < GENERATOR_LIMIT
    assert use.server is not None and use.load_generator_bound


def test_pinning_a_process_gone_since_it_was_listed_is_no_error() -> None:
    """A database backend may exit between server_pids() and its pinning."""
    child = subprocess.Popen(["true"])
    child.wait()
    pin_processes([child.pid], "0")
