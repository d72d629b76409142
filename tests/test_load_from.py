"""`--load-from ssh://...`: the load generated on other hosts, reached through OpenSSH.

The load hosts are network namespaces, each with a private sshd started by the test
(tests/sshhost.py); the suite's servers run in this namespace on the address of the first
namespace's veth pair (`--listen`), which both load hosts reach. The answers are checked from
here as in every run; dnsperf, resperf and the prober run in the namespaces through ssh.
Nothing here asserts a speed: only that the figures exist, come from the load hosts, are
merged, and that nothing is left on a load host, whatever way the run ends.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from base.process import free_port
from bench.commands.cli import main as bench_main
from bench.load.dnsperf import DnsperfRun, merge_runs
from bench.load.hosts import LoadHost, SshUrl, job_cpu_seconds, parse_load_from
from bench.measure.results import load_results
from bench.measure.serial import to_json
from tests.at_once import results_at_once
from tests.benchcli import interrupt_when, processes_under, run_bench, start_bench
from tests.loadlab import share_client
from tests.sshhost import SshLoadHost


@pytest.fixture(scope="module")
def load_hosts() -> Iterator[tuple[SshLoadHost, SshLoadHost]]:
    with SshLoadHost() as first, SshLoadHost() as second:
        second.reach(first.server_address)
        share_client(first, second)
        yield first, second


def options(*hosts: SshLoadHost) -> list[str]:
    found = [word for host in hosts for word in ("--load-from", host.url)]
    return [*found, "--ssh-config", str(hosts[0].ssh_config),
            "--listen", hosts[0].server_address]


def remote_leftovers(*hosts: SshLoadHost) -> list[Path]:
    return [path for host in hosts for path in host.remote_tmp.iterdir()]


@pytest.fixture(scope="module")
def two_host_run(load_hosts: tuple[SshLoadHost, SshLoadHost], run_root: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Path:
    first, second = load_hosts
    out = tmp_path_factory.mktemp("load-from")
    done = run_bench(run_root / "two", "run", "--profile", "tiny", "--servers", "native,memory",
                     *options(first, second), "--out", str(out), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_run_from_two_load_hosts_checks_answers_and_merges_one_row(two_host_run: Path) -> None:
    results = load_results(two_host_run)
    assert [(c.server, c.status, c.mismatches) for c in results.cells] == [
        ("native", "ok", 0), ("memory", "ok", 0)]
    for cell in results.cells:
        assert cell.qps is not None and cell.qps.median > 0
        for run in cell.qps_runs:
            # One row from both hosts' dnsperf reports, each run through its host's ssh.
            assert run.stdout.count("Statistics:") == 2 and run.generators == 2
            assert run.queries_completed > 0 and run.cpu_s is not None and run.cpu_s > 0
        assert cell.cpu_us_per_query["dnsperf"] is not None
        assert cell.latency_unloaded is not None and cell.latency_unloaded.count == 100
    urls = [host["url"] for host in results.meta["load_from"]]
    assert len(urls) == 2 and all(url.startswith("ssh://root@198.1") for url in urls)
    assert all(host["dnsperf"].startswith("dnsperf 2.") and host["resperf"]
               for host in results.meta["load_from"])
    assert results.meta["pin"] is False
    assert "results.md" in {p.name for p in two_host_run.iterdir()}


def test_run_leaves_nothing_on_the_load_hosts(two_host_run: Path,
                                              load_hosts: tuple[SshLoadHost, SshLoadHost]
                                              ) -> None:
    assert remote_leftovers(*load_hosts) == []
    assert [c for host in load_hosts for c in processes_under(host.remote_tmp)] == []


def _capacity_from(host: SshLoadHost, root: Path, out: Path) -> None:
    done = run_bench(root, "capacity", "--profile", "tiny", "--servers", "native", "--steps",
                     "50,100", "--common-rate", "0", *options(host), "--out", str(out),
                     timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


def _scale_from(host: SshLoadHost, root: Path, out: Path) -> None:
    done = run_bench(root, "scale", "--profile", "tiny", "--servers", "memory",
                     "--zones-counts", "100", "--mixes", "uniform", *options(host),
                     "--out", str(out), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def capacity_and_scale(load_hosts: tuple[SshLoadHost, SshLoadHost], run_root: Path,
                       tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny `capacity` from the first load host and a tiny `scale` from the second, made at
    once (each with servers of its own, listening on its own host's pair): much of each is
    ssh sessions and the steps' pauses. Each one's results directory, by command."""
    first, second = load_hosts
    outs = {command: tmp_path_factory.mktemp(f"load-from-{command}")
            for command in ("capacity", "scale")}
    results_at_once({"capacity": partial(_capacity_from, first, run_root / "capacity",
                                         outs["capacity"]),
                     "scale": partial(_scale_from, second, run_root / "scale", outs["scale"])})
    return outs


def test_capacity_from_a_load_host(load_hosts: tuple[SshLoadHost, SshLoadHost],
                                   capacity_and_scale: dict[str, Path]) -> None:
    (curve,) = load_results(capacity_and_scale["capacity"]).capacity
    assert len(curve.steps) == 4
    assert all(step.answered_qps > 0 and step.probes for step in curve.steps)
    assert curve.resperf is not None and curve.resperf.max_qps
    assert remote_leftovers(load_hosts[0]) == []


def test_scale_from_a_load_host(load_hosts: tuple[SshLoadHost, SshLoadHost],
                                capacity_and_scale: dict[str, Path]) -> None:
    second = load_hosts[1]
    results = load_results(capacity_and_scale["scale"])
    (point,) = results.scale
    assert point.key == ("memory", 100, 10, "uniform") and point.cell.status == "ok"
    assert point.cell.qps is not None and point.cell.qps.median > 0
    assert point.cell.qps_runs and all(run.cpu_s for run in point.cell.qps_runs)
    assert all(second.url.split("@")[1].split(":")[0] in " ".join(run.argv)
               for run in point.cell.qps_runs)
    assert results.meta["load_from"][0]["url"] == second.url
    assert remote_leftovers(second) == []


def test_ctrl_c_leaves_nothing_on_the_load_host(load_hosts: tuple[SshLoadHost, SshLoadHost],
                                                run_root: Path, tmp_path: Path) -> None:
    first = load_hosts[0]
    root = run_root / "ctrl-c"
    proc = start_bench(root, "capacity", "--profile", "tiny", "--servers", "native",
                       *options(first), "--out", str(tmp_path))
    # Interrupted while a tool runs there (its job's pid is recorded in the directory).
    interrupt_when(proc, lambda: _job_running(first))
    assert remote_leftovers(first) == []
    assert processes_under(first.remote_tmp) == [] and processes_under(root) == []


def test_sigkill_leaves_nothing_on_the_load_host(load_hosts: tuple[SshLoadHost, SshLoadHost],
                                                run_root: Path, tmp_path: Path) -> None:
    """Killed outright, the run cannot clean up: its ssh session's standard input closes with
    it, and the load host's own shell then kills the tool and removes the directory."""
    first = load_hosts[0]
    root = run_root / "sigkill"
    proc = start_bench(root, "capacity", "--profile", "tiny", "--servers", "native",
                       *options(first), "--out", str(tmp_path))
    deadline = time.monotonic() + 300
    while not _job_running(first):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    # Here, only its control directory is left (the next run's to remove: stale_local_dirs).
    assert [p.name for p in Path(tempfile.gettempdir()).glob(f"dlzbench-ssh-{proc.pid}-*")]
    deadline = time.monotonic() + 60
    while remote_leftovers(first) or processes_under(first.remote_tmp):
        assert time.monotonic() < deadline, (remote_leftovers(first),
                                             processes_under(first.remote_tmp))
        time.sleep(0.2)


def test_the_next_run_removes_a_killed_runs_control_directory(
        load_hosts: tuple[SshLoadHost, SshLoadHost], tmp_path: Path) -> None:
    killed = Path(tempfile.mkdtemp(prefix=f"dlzbench-ssh-{_exited_pid()}-"))
    with LoadHost(SshUrl.parse(load_hosts[0].url), load_hosts[0].ssh_config) as host:
        assert host.listing() == []
    assert not killed.exists()


def _exited_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _job_running(host: SshLoadHost) -> bool:
    """A tool runs on the load host now (its job's pid is recorded in the run's directory)."""
    try:
        return any(p.name.startswith("job-") for d in host.remote_tmp.iterdir()
                   for p in d.iterdir())
    except OSError:  # the directory went away as it was read
        return False


def test_unreachable_load_host_is_one_error_before_any_server(run_root: Path,
                                                              tmp_path: Path) -> None:
    port = free_port()  # nothing listens there: the refusal comes back at once
    done = run_bench(run_root / "unreachable", "run", "--profile", "tiny",
                     "--load-from", f"ssh://root@127.0.0.1:{port}", "--listen", "127.0.0.1",
                     "--out", str(tmp_path / "out"))
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 1 and len(errors) == 1, done.stderr
    assert errors[0].startswith(f"error: --load-from ssh://root@127.0.0.1:{port}: cannot open "
                                "an ssh session: "), errors[0]
    assert "refused" in errors[0]
    assert not (tmp_path / "out").exists()
    assert processes_under(run_root / "unreachable") == []
    assert not any(p.name.startswith("named") for p in (run_root / "unreachable").rglob("*"))


@pytest.mark.check
@pytest.mark.parametrize(("given", "expected"), [
    (["--load-from", "root@host"], "--load-from 'root@host': not ssh://[user@]host[:port]"),
    (["--load-from", "ssh://host:0"], "--load-from ssh://host:0: port 0 is not between 1"),
    (["--load-from", "ssh://a b"], "not ssh://[user@]host[:port]"),
    (["--load-from", "ssh://h", "--load-from", "ssh://h/"], "--load-from ssh://h/ is given "
                                                          "twice"),
    (["--load-from", "ssh://h"], "give --listen ADDRESS"),
    (["--ssh-config", "/dev/null"], "--ssh-config is the ssh configuration for --load-from"),
    (["--listen", "localhost"], "--listen 'localhost': not an IPv4 address"),
    (["--listen", "192.0.2.1"], "--listen 192.0.2.1: not an address of this machine"),
])
def test_load_from_options_that_do_not_fit_are_one_error(tmp_path, capsys, monkeypatch, given,
                                                         expected):
    monkeypatch.setenv("DLZBENCH_RUN_DIR", str(tmp_path / "run"))
    assert bench_main(["run", "--profile", "tiny", *given, "--out", str(tmp_path / "o")]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines()
              if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], errors
    assert not (tmp_path / "o").exists() and not (tmp_path / "run").exists()


@pytest.mark.check
def test_urls_keep_user_host_and_port() -> None:
    assert parse_load_from(["ssh://load1", "ssh://bench@10.0.0.7:2222", "ssh://[fd00::7]:22"]) \
        == [SshUrl("ssh://load1", "load1"), SshUrl("ssh://bench@10.0.0.7:2222", "10.0.0.7",
                                                   "bench", 2222),
            SshUrl("ssh://[fd00::7]:22", "fd00::7", None, 22)]


@pytest.mark.check
def test_remote_cpu_is_read_from_the_shells_times() -> None:
    output = "dlzbench-job 7\nreport\ndlzbench-times\n0m0.01s 0m0.02s\n1m2.50s 0m0.25s\n"
    assert job_cpu_seconds(output) == pytest.approx(62.75)
    assert job_cpu_seconds("no times here") is None


@pytest.mark.check
def test_merged_reports_add_counts_and_weigh_latency() -> None:
    one = DnsperfRun(["a"], queries_sent=100, queries_completed=90, queries_lost=10,
                     rcodes={"NOERROR": 90}, qps=900.0, latency_avg_s=0.001,
                     latency_min_s=0.0005, latency_max_s=0.01, run_time_s=1.0,
                     interval_qps=[900.0], cpu_s=0.5, stopped_by="time limit")
    two = DnsperfRun(["b"], queries_sent=30, queries_completed=30, rcodes={"NOERROR": 20,
                                                                           "NXDOMAIN": 10},
                     qps=300.0, latency_avg_s=0.003, latency_min_s=0.0001,
                     latency_max_s=0.02, run_time_s=1.1, interval_qps=[300.0, 10.0],
                     cpu_s=None, stopped_by="time limit")
    merged = merge_runs([one, two])
    assert (merged.queries_sent, merged.queries_completed, merged.queries_lost) == (130, 120, 10)
    assert merged.rcodes == {"NOERROR": 110, "NXDOMAIN": 10} and merged.qps == 1200.0
    assert merged.latency_avg_s == pytest.approx((0.001 * 90 + 0.003 * 30) / 120)
    assert (merged.latency_min_s, merged.latency_max_s) == (0.0001, 0.02)
    # Offered: each host's own rate, added (100/1.0 + 30/1.1 queries a second).
    assert 130 / merged.run_time_s == pytest.approx(100 / 1.0 + 30 / 1.1)
    assert merged.interval_qps == [1200.0]
    assert merged.cpu_s is None, "a host whose CPU is unknown leaves the sum unknown"
    assert merged.generators == 2
    assert json.loads(json.dumps(to_json(merged)))["argv"] == ["a", ";", "b"]


def test_sshd_of_the_test_is_its_own(load_hosts: tuple[SshLoadHost, SshLoadHost]) -> None:
    """The load hosts' sshds run with the test's configuration, inside their namespaces."""
    for host in load_hosts:
        listing = subprocess.run(["ip", "netns", "pids", host.namespace.name],
                                 capture_output=True, text=True, check=True).stdout.split()
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                    for pid in listing if Path(f"/proc/{pid}").exists()]
        assert any(str(host.directory / "sshd_config") in c for c in commands), commands
