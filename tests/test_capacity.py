"""`bench capacity` on the tiny profile: real named, real dnsperf and resperf, no timing asserted.

Checks the sweep's shape (every step runs, offered targets increase, loss is counted and agrees
with dnsperf's own report, resperf's output is parsed, the report and plots are written),
bad step lists, and that Ctrl-C keeps the steps measured before it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from base.errors import UserError
from base.paths import REPO_ROOT
from bench.measure.capacity import latency_figures, parse_steps
from bench.measure.results import load_results
from tests.benchcli import bench_env, interrupt_when, processes_under

STEPS = (25.0, 100.0, 150.0)


def _capacity(run_root: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "bench", "capacity", "--profile", "tiny",
                             *args], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=bench_env(run_root))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, run_root: Path) -> Path:
    out = tmp_path_factory.mktemp("capacity")
    proc = _capacity(run_root / "sweep", "--servers", "memory", "--steps",
                     ",".join(f"{s:g}" for s in STEPS), "--common-rate", "200", "--out",
                     str(out))
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output.decode(errors="replace")[-3000:]
    return out


def test_every_server_is_swept_at_every_step(sweep: Path) -> None:
    curves = load_results(sweep).capacity
    assert [(c.server, c.threads) for c in curves] == [("native", 1), ("memory", 1)]
    for curve in curves:
        assert curve.closed_loop_qps and curve.closed_loop_qps > 0
        assert [s.percent for s in curve.steps] == list(STEPS)
        targets = [s.target_qps for s in curve.steps]
        assert targets == sorted(targets) and len(set(targets)) == len(targets)
        assert all(t == pytest.approx(curve.closed_loop_qps * p / 100)
                   for t, p in zip(targets, STEPS, strict=True))
        assert curve.common_rate_step is not None and curve.common_rate_step.target_qps == 200


def test_loss_is_counted_from_what_was_sent(sweep: Path) -> None:
    for curve in load_results(sweep).capacity:
        for step in curve.steps:
            run = step.run
            assert run.queries_sent > 0 and "-Q" in run.argv
            assert run.queries_lost == run.queries_sent - run.queries_completed - \
                run.queries_interrupted
            assert step.lost == run.queries_lost
            assert 0 < step.answered_fraction <= 1
            assert step.probes > 0 and step.probes_lost <= step.probes
            assert step.udp_rcvbuf_errors is not None and step.udp_rcvbuf_errors >= 0
            latency = step.latency_us
            assert latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]


def test_resperf_ramp_is_parsed(sweep: Path) -> None:
    for curve in load_results(sweep).capacity:
        ramp = curve.resperf
        assert ramp is not None and ramp.max_qps and ramp.max_qps > 0
        assert ramp.ramp and all(p.target_qps >= 0 for p in ramp.ramp)
        assert "Maximum throughput" in ramp.stdout


def test_report_and_plots(sweep: Path) -> None:
    markdown = (sweep / "results.md").read_text()
    assert "## Capacity under offered load" in markdown
    assert "### memory, 1 thread(s)" in markdown and "breaking point 5% (QPS)" in markdown
    for png in ("capacity-answered.png", "capacity-latency.png", "capacity-resperf.png",
                "capacity-percentiles.png"):
        assert (sweep / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def test_lost_queries_count_at_the_timeout() -> None:
    percentiles, slowest = latency_figures([0.0001] * 98, lost=2, timeout_s=1.0)
    assert percentiles["p50"] == 100.0
    assert percentiles["p99"] == percentiles["max"] == 1_000_000.0
    assert slowest["1"] == 1_000_000.0 and slowest["100"] == 100.0


@pytest.mark.parametrize("text", ["", "10,,20", "-5,10", "0", "ten", "nan"])
def test_bad_steps_are_one_line_errors(text: str) -> None:
    with pytest.raises(UserError) as refused:
        parse_steps(text)
    assert "--steps" in str(refused.value) and "\n" not in str(refused.value)


def test_bad_steps_on_the_command_line(run_root: Path) -> None:
    proc = _capacity(run_root / "bad", "--steps=-1,50")
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert output.decode().strip().splitlines() == [
        "error: --steps '-1,50': every step must be a positive percentage"]


def test_ctrl_c_keeps_finished_steps(tmp_path: Path, run_root: Path) -> None:
    root = run_root / "ctrl-c"
    out = tmp_path / "out"
    proc = _capacity(root, "--servers", "memory", "--steps", "10,20,30,40,50,60,70,80",
                     "--out", str(out))
    interrupt_when(proc, lambda: _steps_saved(out / "results.json"))
    assert processes_under(root) == []
    curves = load_results(out).capacity
    assert curves and curves[0].steps, "the steps measured before Ctrl-C are kept"
    assert (out / "results.md").exists()


def _steps_saved(path: Path) -> bool:
    try:
        curves = json.loads(path.read_text()).get("capacity", [])
    except (OSError, ValueError):
        return False
    return bool(curves) and bool(curves[0]["steps"])
