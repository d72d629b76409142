"""`python3 -m bench advise` over hand-made results files whose answers are known: the ranking,
interpolation inside the measured ranges and the nearest point (never an extrapolation)
outside them with the command that would measure there, intervals and flags carried to the
text, bad input as one line; the page it writes, rendered in headless Chromium; and the
committed results' examples in README.md and docs/method/advise.md as the command gives them."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from base.errors import UserError
from base.process import as_user, give_to_service_user, service_environment, service_user
from bench.commands.cli import build_parser, main
from bench.load.dnsperf import DnsperfRun
from bench.measure import advice as adv
from bench.measure.advice import FAILS, MEETS, UNDECIDED, Requirement, advise
from bench.measure.capacity import Curve, Step
from bench.measure.catalogue import Catalogue
from bench.measure.results import Results, save_results
from bench.measure.startup import StartupPoint
from bench.measure.tuning import Recommendation, Tuning
from bench.measure.writes import CEILING, ServerWrites, StepRun, Writes
from bench.report.advise import figure_text, html_page, page, plain, write_advice

CHECK = pytest.mark.check

BIND = "BIND 9.18.49-1~deb12u3-Debian (Extended Support Version) <id:>"
MACHINE = {"cpu_model": "Test CPU", "cpu_count": 2}
AFTER_THE_RULE = "2026-12-01T10:00:00+00:00"
BEFORE_THE_RULE = "2026-11-21T13:00:00+00:00"
THOUSAND = "1000 generated zones x ~10 records (seed 1)"


# ---------------------------------------------------------------- hand-made results

def _step(percent: float, offered: float, answered: float, p99_ms: float, repeat: int) -> Step:
    lost = round(offered * 5 * (1 - answered))
    return Step(percent=percent, target_qps=offered, offered_qps=offered,
                answered_qps=offered * answered, answered_fraction=answered, lost=lost,
                latency_us={"p50": 100.0, "p99": 1000 * p99_ms}, slowest_us={}, probes=100,
                probes_lost=0, udp_rcvbuf_errors=0, reply_mbit_s=1.0, burst=False,
                run=DnsperfRun(argv=["dnsperf", "-l", "5"]), repeat=repeat, duration_s=5.0)


def _curve(server: str, closed: float,
           loads: list[tuple[float, float, float, tuple[float, float]]]) -> Curve:
    """loads: (percent, offered QPS, answered share, (p99 ms of the two repeats))."""
    steps = [_step(percent, offered, answered, p99, repeat)
             for percent, offered, answered, p99s in loads
             for repeat, p99 in enumerate(p99s)]
    return Curve(server=server, threads=1, connections=1, closed_loop_qps=closed, steps=steps)


def _save(root: Path, name: str, results: Results) -> Path:
    directory = root / name
    save_results(results, directory)
    return directory


def capacity_run(root: Path, name: str = "cap", bind: str = BIND) -> Path:
    """pg breaks at 9,000-11,000 QPS, fs holds every step to 20,000 (a lower bound), mysql
    at 1,500-3,000, ldap holds to 5,000 with a p99 of 6-9 ms, bdb-hash at 2,500-3,500."""
    curves = [
        _curve("pg", 10000, [(10, 1000, 1.0, (1.0, 1.2)), (50, 5000, 1.0, (2.0, 3.0)),
                             (90, 9000, 0.99, (4.0, 6.0)), (110, 11000, 0.5, (900, 1000))]),
        _curve("fs", 20000, [(10, 2000, 1.0, (0.5, 0.7)), (50, 10000, 1.0, (1.0, 1.4)),
                             (100, 20000, 0.99, (2.0, 2.4))]),
        _curve("mysql", 3000, [(50, 1500, 1.0, (3.0, 3.0)), (100, 3000, 0.6, (900, 900))]),
        _curve("ldap", 5000, [(10, 500, 1.0, (6.0, 7.0)), (100, 5000, 1.0, (8.0, 9.0)),
                              (110, 5500, 0.5, (900, 900))]),
        _curve("bdb-hash", 5000, [(50, 2500, 1.0, (1.0, 1.0)), (70, 3500, 0.5, (900, 900))]),
    ]
    meta = {"bind": bind, **MACHINE, "date": AFTER_THE_RULE, "command": "capacity",
            "dataset": THOUSAND}
    return _save(root, name, Results(meta=meta, capacity=curves))


def startup_run(root: Path) -> Path:
    """pg starts in 0.1 s at 1,000 zones and 1.0 s at 100,000 (10 and 100 MiB); before the
    rule."""
    points = [StartupPoint("pg", 1000, startup_ms=100, server_rss_kb=10 * 1024),
              StartupPoint("pg", 100000, startup_ms=1000, server_rss_kb=100 * 1024)]
    meta = {"bind": BIND, **MACHINE, "date": BEFORE_THE_RULE, "command": "startup"}
    return _save(root, "boot", Results(meta=meta, startup_scaling=points))


def tune_run(root: Path) -> Path:
    """At a 1-ms round trip pg wants 8 threads and 16 connections."""
    best = Recommendation(server="pg", threads=8, connections=16, qps=4000.0, p99_us=None,
                          best_qps=4100.0, best_threads=16, best_connections=16,
                          tolerance=0.05)
    meta = {"bind": BIND, **MACHINE, "date": BEFORE_THE_RULE, "command": "tune",
            "dataset": THOUSAND, "db_rtt_ms": 1}
    return _save(root, "tune-pg-rtt1",
                 Results(meta=meta, tuning=Tuning(db_host="netns", db_rtt_ms=1,
                                                  recommendations=[best])))


def _runs(rate: int, writes_per_s: float, p99_ms: float, visible_ms: float | None,
          cpu_us: float) -> list[StepRun]:
    """Six repeats, each figure -10% and +10% at the ends: the 95% interval of six."""
    factors = (0.9, 1.0, 1.0, 1.0, 1.0, 1.1)
    return [StepRun(rate=rate, repeat=i, seconds=10.0, sent=10000, answered=10000,
                    p99_us=1000 * p99_ms * f, writes=round(10 * writes_per_s * f),
                    server_cpu_s=cpu_us * 10000 / 1e6, db_cpu_s=0.0, cpu_window_s=10.0,
                    visibility_ms=[] if visible_ms is None else [visible_ms] * 20)
            for i, f in enumerate(factors)]


def writes_run(root: Path) -> Path:
    """pg: read p99 1, 2, 3, 4 ms at 0, 10, 100 writes/s and its ceiling, 200/s; writes
    visible in 5 and 7 ms at 10 and 100/s; CPU per read 100 -> 150 us. memory: not written."""
    pg = ServerWrites("pg", read_qps=1000.0, runs=[
        *_runs(0, 0, 1.0, None, 100.0), *_runs(10, 10, 2.0, 5.0, 110.0),
        *_runs(100, 100, 3.0, 7.0, 150.0), *_runs(CEILING, 200, 4.0, 9.0, 200.0)])
    memory = ServerWrites("memory", status="n/a",
                          error="memory reads its store once (at start or reload)")
    section = Writes(method="store", profile="default", dataset=THOUSAND, step_s=10.0,
                     repeats=6, rates=[0, 10, 100, CEILING], servers=[pg, memory])
    meta = {"bind": BIND, **MACHINE, "date": AFTER_THE_RULE, "command": "writes",
            "dataset": THOUSAND}
    return _save(root, "writes", Results(meta=meta, writes=section))


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("advise-results")
    for make in (capacity_run, startup_run, tune_run, writes_run):
        make(root)
    return root


def catalogue(root: Path) -> Catalogue:
    found = Catalogue({})
    for directory in sorted(p for p in root.iterdir() if p.is_dir()):
        found.add(directory)
    return found


def advice_for(root: Path, servers: list[str] | None = None, **wanted: float | bool) -> adv.Advice:
    requirement = Requirement(**{"zones": 1000, "peak_qps": 3000, "p99_ms": 5, **wanted})
    return advise(catalogue(root), requirement, bind="9.18", given=True, servers=servers)


def server(advice: adv.Advice, name: str) -> adv.ServerAdvice:
    return next(s for s in advice.servers if s.server == name)


def approx(value: float | None) -> object:
    return pytest.approx(value, rel=1e-9)


# ---------------------------------------------------------------- the ranking

@CHECK
def test_ranks_who_meets_by_headroom_and_says_why_the_rest_fell_out(results: Path) -> None:
    advice = advice_for(results, ["pg", "fs", "mysql", "ldap", "bdb-hash"])
    assert [s.server for s in advice.by_verdict(MEETS)] == ["fs", "pg"]
    assert [s.server for s in advice.by_verdict(FAILS)] == ["mysql", "ldap"]
    assert [s.server for s in advice.by_verdict(UNDECIDED)] == ["bdb-hash"]
    fs, pg = server(advice, "fs"), server(advice, "pg")
    assert fs.check("headroom").estimate.value == approx(20000 / 3000)
    headroom = pg.check("headroom").estimate
    assert (headroom.value, headroom.high) == (approx(3.0), approx(11000 / 3000))
    assert server(advice, "mysql").check("headroom").why == "past"
    assert server(advice, "ldap").check("p99").why == "over"
    assert server(advice, "bdb-hash").check("headroom").why == "bracket"
    text = plain(page(advice, with_figure=False))
    assert "1. fs: threads 1 (cap; 1,000 zones)" in text
    assert "- mysql: headroom 0.5–1x over 3,000 QPS (cap; 1,000 zones, database local, " \
        "1 thread)" in text
    assert "- ldap: p99 at 3,000 QPS 7.6 ms [7.1–8.1], over 5 ms (cap; 1,000 zones, database " \
        "local, 1 thread; interpolated between 500 and 5,000 QPS offered)" in text


@CHECK
def test_a_server_out_on_what_it_cannot_do_is_sent_to_no_measurement(results: Path) -> None:
    """memory is not written live: no sweep at another zone count would change that; mysql's
    breaking point at a larger zone count could."""
    advice = advice_for(results, ["memory", "mysql"], zones=5000, writes_per_s=5)
    memory, mysql = server(advice, "memory"), server(advice, "mysql")
    assert memory.verdict == mysql.verdict == FAILS
    assert memory.missing and memory.deciding() == []
    assert [m.kind for m in mysql.deciding()] == [adv.SWEEP_ZONES]
    assert [c.servers for c, _ in advice.commands()] == [("mysql",)]


@CHECK
def test_the_peak_inside_a_bracket_names_the_loads_that_decide(results: Path) -> None:
    bdb = server(advice_for(results, ["bdb-hash"]), "bdb-hash")
    (missing,) = [m for m in bdb.missing if m.command and m.command.name == "capacity"]
    assert missing.kind == adv.SWEEP_BRACKET
    assert missing.command.text() == \
        "python3 -m bench capacity --servers bdb-hash --threads 1 --steps 50,60,70"


# ---------------------------------------------------------------- inside and outside the ranges

@CHECK
def test_interpolates_between_measured_points_with_their_intervals(results: Path) -> None:
    pg = server(advice_for(results, ["pg"], zones=10000), "pg")
    p99 = pg.check("p99").estimate
    # halfway between 1,000 QPS (1.1 ms, repeats 1.0 and 1.2) and 5,000 (2.5, 2.0 and 3.0)
    assert (p99.value, p99.low, p99.high) == (approx(1.8), approx(1.5), approx(2.1))
    assert p99.basis.measured == (1000, 5000)
    startup = pg.figures["startup_s"]
    share = 9000 / 99000
    assert startup.value == approx(0.1 + share * 0.9)
    assert pg.figures["rss_mib"].value == approx(10 + share * 90)
    assert startup.basis.measured == (1000, 100000) and startup.basis.inside
    assert "startup at 10,000 zones 0.18 s, named 18.2 MiB (boot; interpolated between 1,000 " \
        "and 100,000 zones; before the rule)" in plain(page(advice_for(results, ["pg"],
                                                                       zones=10000), False))


@CHECK
def test_outside_the_measured_range_the_nearest_point_and_the_command(results: Path) -> None:
    pg = server(advice_for(results, ["pg"], zones=500000, peak_qps=500), "pg")
    startup = pg.figures["startup_s"]
    assert startup.value == approx(1.0)  # the 100,000-zone figure, not a line drawn past it
    assert startup.basis.measured == (100000,) and not startup.basis.inside
    p99 = pg.check("p99").estimate
    assert (p99.value, p99.basis.measured) == (approx(1.1), (1000,))
    commands = {m.kind: m.command.text() for m in pg.missing if m.command is not None}
    assert commands[adv.STARTUP_ZONES] == \
        "python3 -m bench startup --servers pg --zones-counts 500000"
    assert commands[adv.P99_AT_PEAK] == commands[adv.SWEEP_ZONES] == \
        "python3 -m bench capacity --servers pg --threads 1 --generate 500000 " \
        "--common-rate 500"


@CHECK
def test_settings_at_the_round_trip_and_the_measurements_it_lacks(results: Path) -> None:
    at_one = server(advice_for(results, ["pg"], db_rtt_ms=1), "pg")
    assert (at_one.figures["threads"].value, at_one.figures["connections"].value) == (8, 16)
    missing = {m.kind: m for m in at_one.missing}
    assert (missing[adv.SWEEP_RTT].command, missing[adv.SWEEP_RTT].no_command) == (
        None, adv.CAPACITY_NO_RTT)
    assert adv.TUNE_RTT not in missing
    assert "- the breaking point at the round trip (pg): no command takes it yet" in plain(
        page(advice_for(results, ["pg"], db_rtt_ms=1), False))
    at_two = server(advice_for(results, ["pg"], db_rtt_ms=2), "pg")
    assert at_two.figures["threads"].basis.measured == (1.0,)
    tune = next(m for m in at_two.missing if m.kind == adv.TUNE_RTT)
    assert tune.command.text() == "python3 -m bench tune --server pg --db-host netns --db-rtt 2"
    local = server(advice_for(results, ["pg"]), "pg")  # the sweep's own setting stands
    assert local.figures["threads"].runs == ("cap",) and "connections" not in local.figures
    assert adv.TUNE_RTT not in {m.kind for m in local.missing}
    half = server(advice_for(results, ["pg"], db_rtt_ms=0.5), "pg")
    tune = next(m for m in half.missing if m.kind == adv.TUNE_RTT)
    assert (tune.command, tune.no_command) == (None, adv.TUNE_WHOLE_MS)


@CHECK
def test_writes_interpolated_in_the_rate_the_store_took(results: Path) -> None:
    pg = server(advice_for(results, ["pg", "memory"], writes_per_s=50), "pg")
    share = 40 / 90
    reads = pg.check("read_p99").estimate
    assert (reads.value, reads.low, reads.high) == (
        approx(2 + share), approx(1.8 + share * 0.9), approx(2.2 + share * 1.1))
    assert pg.figures["visible_p99_ms"].value == approx(5 + share * 2)
    assert pg.figures["cpu_per_read_us"].value == approx(110 + share * 40)
    assert pg.check("writes").verdict == MEETS
    over = advice_for(results, ["pg", "memory"], writes_per_s=300)
    assert server(over, "pg").check("writes").why == "ceiling"
    memory = server(over, "memory").check("writes")
    assert (memory.verdict, memory.why) == (FAILS, "not written")
    text = plain(page(over, False))
    assert "- pg: writes: at most 200/s [180–220], short of 300 writes/s (writes; 1,000 " \
        "zones, 1,000 reads/s)" in text
    assert "memory reads its store once (at start or reload)" in text


@CHECK
def test_flags_and_lower_bounds_are_carried_to_the_text(results: Path) -> None:
    advice = advice_for(results, ["fs", "pg"])
    fs = server(advice, "fs")
    breaking = fs.figures["breaking"]
    assert adv.LOWER_BOUND in breaking.flags and figure_text(breaking) == "≥ 20,000"
    text = plain(page(advice, False))
    assert "headroom ≥ 6.7x over 3,000 QPS (cap; 1,000 zones, 1 thread; a load-generator " \
        "lower bound)" in text
    assert adv.EARLY in server(advice, "pg").figures["startup_s"].flags
    assert adv.EARLY not in server(advice, "pg").check("p99").estimate.flags


@CHECK
def test_signed_zones_rule_out_who_serves_them_without_signatures(results: Path) -> None:
    advice = advice_for(results, ["pg", "pdns-gpgsql"], signed=True)
    assert server(advice, "pg").check("signed").why == "no signatures"
    assert server(advice, "pdns-gpgsql").check("signed").why == "refuses"


@CHECK
def test_every_command_it_prints_parses(results: Path) -> None:
    advice = advice_for(results, None, zones=250000, peak_qps=4000, db_rtt_ms=1,
                        writes_per_s=50)
    commands = [command.text() for command, _ in advice.commands()]
    assert commands
    for text in commands:
        words = shlex.split(text)
        assert words[:3] == ["python3", "-m", "bench"]
        build_parser().parse_args(words[3:])


# ---------------------------------------------------------------- bad input, one line each

def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["advise", *argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    return err


REQUIRED = ("--zones", "1000", "--peak-qps", "3000", "--p99-ms", "5")


@CHECK
@pytest.mark.parametrize(("argv", "says"), [
    (("--zones", "0", "--peak-qps", "1", "--p99-ms", "1"), "--zones 0: must be more than 0"),
    (("--zones", "1e3.5", "--peak-qps", "1", "--p99-ms", "1"), "expected a number"),
    (("--zones", "10.5", "--peak-qps", "1", "--p99-ms", "1"), "expected a whole number"),
    (("--zones", "10", "--peak-qps", "-5", "--p99-ms", "1"), "--peak-qps -5: must be more"),
    (("--zones", "10", "--peak-qps", "5", "--p99-ms", "nan"), "expected a finite number"),
    ((*REQUIRED, "--db-rtt", "-1"), "--db-rtt -1: cannot be negative"),
    ((*REQUIRED, "--writes", "-2"), "--writes -2: cannot be negative"),
    ((*REQUIRED, "--servers", "pg,nosuch"), "unknown server 'nosuch'"),
])
def test_bad_numbers_and_names_are_one_line(capsys: pytest.CaptureFixture[str],
                                            argv: tuple[str, ...], says: str) -> None:
    assert says in _error(capsys, *argv)


@CHECK
def test_a_directory_that_is_not_results_is_one_line(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("not results\n")
    assert "not a results directory" in _error(capsys, *REQUIRED, "--results", str(tmp_path))
    assert "no such directory" in _error(capsys, *REQUIRED, "--results",
                                         str(tmp_path / "missing"))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.json").write_text("{not json")
    assert "broken: not a results directory this suite can read" in _error(
        capsys, *REQUIRED, "--results", str(broken))


@CHECK
def test_results_of_two_binds_are_not_mixed(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    a = capacity_run(tmp_path, "on-9.18")
    b = capacity_run(tmp_path, "on-9.20", bind=BIND.replace("9.18.49", "9.20.30"))
    err = _error(capsys, *REQUIRED, "--results", str(a), str(b))
    assert "results of different BINDs mixed" in err and "9.20" in err


@CHECK
def test_reads_a_directory_of_results_directories(results: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", *REQUIRED, "--servers", "fs,pg", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "Advice: 1,000 zones, 3,000 QPS at peak, p99 under 5 ms, " \
        "the database local"
    assert f"1. fs: threads 1 ({results.as_posix()}/cap; 1,000 zones)" in out


# ---------------------------------------------------------------- the page

@CHECK
def test_the_page_is_self_contained(results: Path, tmp_path: Path) -> None:
    written = write_advice(advice_for(results, ["pg", "fs", "mysql"]), tmp_path / "out")
    assert [p.name for p in written] == ["advice.md", "advice.png", "advice.html"]
    page_html = written[2].read_text()
    assert re.findall(r"""(?:src|href)=["'](?!data:)""", page_html) == []
    assert page_html.count('src="data:image/png;base64,') == 1
    assert "<script" not in page_html and "http" not in page_html
    markdown = written[0].read_text()
    assert "![Breaking point" in markdown and "(advice.png)" in markdown
    assert written[1].read_bytes().startswith(b"\x89PNG")


def test_the_page_renders_in_headless_chromium_with_its_figure(results: Path,
                                                              tmp_path: Path) -> None:
    """Chromium loads the page from a file, with every network request sent to a closed
    port: the figure decodes (its natural width is the PNG's), the headings show."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (make deps installs it)")
    blocks = page(advice_for(results, ["pg", "fs", "mysql"]), with_figure=True)
    written = write_advice(advice_for(results, ["pg", "fs", "mysql"]), tmp_path / "out")
    width = int.from_bytes(written[1].read_bytes()[16:20], "big")
    probe = tmp_path / "probe.html"
    # The page carries no script; the probe adds one that writes what the browser decoded.
    probe.write_text(html_page(blocks, written[1].read_bytes()).replace(
        "</body>", "<script>window.addEventListener('load', () => {"
        "const img = document.getElementById('advice-figure');"
        "document.body.dataset.figureWidth = img.naturalWidth;"
        "document.body.dataset.figureComplete = img.complete;});</script></body>"))
    # A browser parsing a page is run as the servers' user, like every process the suite starts.
    profile = tmp_path / "profile"
    profile.mkdir()
    give_to_service_user(profile)
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={profile}", "--proxy-server=127.0.0.1:9",
         "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        env=service_environment(), cwd="/", capture_output=True, text=True, timeout=120,
        check=True, **as_user(service_user()))
    body = re.search(r"<body[^>]*>", done.stdout)
    assert body is not None, done.stderr[-2000:]
    assert f'data-figure-width="{width}"' in body.group(0)
    assert 'data-figure-complete="true"' in body.group(0)
    assert "<h1>Advice: 1,000 zones, 3,000 QPS at peak" in done.stdout
    assert "Fell out" in done.stdout


# ---------------------------------------------------------------- the committed results

@CHECK
def test_the_committed_results_give_advice() -> None:
    advice = advise(Catalogue.committed(), Requirement(400000, 20000, 5, 1, 50), bind="9.18")
    assert advice.machine == "AMD EPYC, 2 CPUs"
    pg = server(advice, "pg")
    assert pg.verdict == FAILS and pg.check("headroom").estimate.runs == ("capacity-2026-11-26",)
    assert (pg.figures["threads"].value, pg.figures["connections"].value) == (32, 64)
    assert adv.EARLY in pg.figures["threads"].flags  # tune ran before the rule


@CHECK
def test_the_committed_results_of_two_machines_are_never_mixed() -> None:
    """The committed runs come from an AMD EPYC VM and an Intel Xeon VM: by default the
    advice reads the machine with the most runs, --machine chooses the other, and a name
    that is no machine's is one line naming those there are."""
    catalogue = Catalogue.committed()
    wanted = Requirement(400000, 20000, 5, 1, 50)
    amd = advise(catalogue, wanted, bind="9.18")
    intel = advise(catalogue, wanted, bind="9.18", machine="xeon")
    assert amd.machine == "AMD EPYC, 2 CPUs" and "Intel" in (intel.machine or "")
    assert "quick-2026-11-27" in intel.runs and "quick-2026-11-27" not in amd.runs
    assert not set(amd.runs) & set(intel.runs)
    with pytest.raises(UserError, match=r"^--machine 'sparc': names 0 of the machines"):
        advise(catalogue, wanted, bind="9.18", machine="sparc")
