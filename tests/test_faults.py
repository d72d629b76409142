"""`faults`: a steady load through database faults (bench/measure/faults.py).

The command runs for real, one run a store: pg and mysql through every kind of fault a
database server can have (a SIGSTOP among them) in one script, ldap through the kinds it can
have, bdbhpt-t through the tiny profile's writer killed holding a lock; pg+cache and
mysql+cache through their change channel cut (kept out 2 s, then let reconnect at once); and
the cold starts (profile cold-start-tiny) of native BIND (the server restarted; its zone files
are read only as it starts, so no db-cold) and of pg (the server restarted, then PostgreSQL
over a dropped page cache). The analysis (per second, per fault, settling) is checked on a
recording made up here, and the report section rendered from it.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from base.errors import UserError
from base.paths import REPO_ROOT
from bench.load.prober import LOST, Recording
from bench.measure.faults import (
    CHANNEL_CUT,
    DB_COLD,
    PROFILES,
    SERVER_RESTART,
    SIGSTOP,
    WRITER_KILL,
    FaultResult,
    Faults,
    ServerFaults,
    judge,
    parse_script,
    script_for,
)
from bench.measure.results import Results, load_results
from bench.report.render import render_markdown
from servers import get_server
from tests.benchcli import bench_env, processes_under, run_bench

TINY = PROFILES["tiny"]


def _built(names: list[str]) -> list[str]:
    return [name for name in names if get_server(name).is_built()]


# Every kind a database server can have, each once, in one run a store (a run of its own a
# kind started the database server and named again: 6 runs were 4): done without error, and
# answered again after each (the fault's recovery, or answers in its window's last second).
# bdbhpt-t runs the tiny profile's own script, its writer killed.
# The cached rows (a change channel) have their channel cut: kept from reconnecting for 2 s,
# then let reconnect at once.
KINDS_SCRIPT = {"pg": "2:kill-backends,4:sigstop:1.5,8:restart,14:crash:0.5",
                "mysql": "2:kill-backends,4:sigstop:1.5,8:restart,14:crash:0.5",
                "ldap": "2:restart,8:crash:0.5",
                "pg+cache": "2:channel-cut:2,6:channel-cut",
                "mysql+cache": "2:channel-cut:2,6:channel-cut"}
KINDS_DURATION = {"pg": "19", "mysql": "19", "ldap": "16", "pg+cache": "10",
                  "mysql+cache": "10"}
CACHED = ["pg+cache", "mysql+cache"]
# The cold-start runs: a name of their own (the run's directory), the server.
COLD = {"native-cold": "native", "pg-cold": "pg"}
COLD_TINY = PROFILES["cold-start-tiny"]


def _started(root: Path, run: str) -> subprocess.Popen[bytes]:
    """The run's `bench faults` started, its output in files under root (a pipe left unread
    while the other runs go on could fill)."""
    root.mkdir(parents=True)
    server = COLD.get(run, run)
    script = (["--script", KINDS_SCRIPT[server], "--duration", KINDS_DURATION[server]]
              if server in KINDS_SCRIPT and run not in COLD else [])
    profile = "cold-start-tiny" if run in COLD else "tiny"
    with open(root / "stdout", "wb") as out, open(root / "stderr", "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "bench", "faults", "--server", server,
                                 "--profile", profile, *script, "--generate", "5",
                                 "--records", "10", "--queries", "200",
                                 "--out", str(root / "out")],
                                cwd=REPO_ROOT, env=bench_env(root), stdout=out, stderr=err)


@pytest.fixture(scope="module")
def faulted(run_root: Path) -> Iterator[dict[str, tuple[Results, Path]]]:
    """Each server's run: its results and its results directory (under run_root: a pytest
    tmp_path is too deep for PostgreSQL's socket). The runs go on at once, each with servers
    of its own: a run mostly waits through its faults at 200 queries a second (the six runs
    of before, one after another, took 87 s of the module's 93; these four at once 25 s)."""
    procs = {run: _started(run_root / run, run)
             for run in ["pg", "mysql", "ldap", "bdbhpt-t", *CACHED, *COLD]
             if get_server(COLD.get(run, run)).is_built()}
    try:
        runs = {}
        for server, proc in procs.items():
            root = run_root / server
            assert proc.wait(timeout=600) == 0, (root / "stderr").read_text()[-3000:]
            assert not processes_under(root), f"{server}: a process outlived the command"
            runs[server] = (load_results(root / "out"), root / "out")
        yield runs
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _entry(faulted: dict[str, tuple[Results, Path]], run: str) -> ServerFaults:
    if run not in faulted:
        pytest.skip(f"{COLD.get(run, run)} is not built")
    section = faulted[run][0].faults
    assert section is not None
    entry = section.server(COLD.get(run, run))
    assert entry is not None and entry.status == "ok", entry
    return entry


@pytest.mark.parametrize("server", ["pg", "mysql", "ldap", "bdbhpt-t", *CACHED])
def test_every_second_of_the_run_has_queries(faulted: dict, server: str) -> None:
    entry = _entry(faulted, server)
    duration = float(KINDS_DURATION.get(server, TINY.duration_s))
    assert [s.second for s in entry.seconds] == list(range(math.ceil(duration)))
    assert all(s.sent > 0 for s in entry.seconds), entry.seconds
    for s in entry.seconds:
        assert s.answered + s.servfail + s.other + s.lost == s.sent
    assert entry.baseline_share is not None and entry.baseline_share > 0


@pytest.mark.parametrize("server", ["pg", "mysql"])
def test_a_stopped_database_is_servfail_or_loss_and_answers_resume(faulted: dict,
                                                                   server: str) -> None:
    entry = _entry(faulted, server)
    [fault] = [f for f in entry.faults if f.kind == SIGSTOP]
    assert fault.error is None, fault
    assert fault.started_s is not None and fault.ended_s is not None
    assert fault.ended_s > fault.started_s
    # While the server was stopped, queries were answered SERVFAIL or not at all.
    assert fault.servfail + fault.lost > 0, fault
    # After SIGCONT the same named answers again, before the next fault.
    assert fault.window_end_s is not None
    after = [s for s in entry.seconds if math.ceil(fault.ended_s) <= s.second
             and s.second + 1 <= fault.window_end_s]
    assert after and sum(s.answered for s in after) > 0, entry.seconds


def test_a_killed_writer_leaves_readers_answered(faulted: dict) -> None:
    entry = _entry(faulted, "bdbhpt-t")
    [fault] = entry.faults
    assert fault.kind == WRITER_KILL and fault.error is None, fault
    assert "SIGKILLed" in fault.note
    assert fault.ended_s is not None
    # Readers are not hung: answers (data or SERVFAIL) keep coming after the writer died.
    after = [s for s in entry.seconds if s.second >= math.ceil(fault.ended_s)]
    assert after and sum(s.answered + s.servfail for s in after) > 0, entry.seconds
    # And the store recovers (a whole second answered): the driver's failchk aborted the dead
    # writer's transaction. Before it, each read of the locked page took the store down again.
    assert fault.recovered, entry.seconds


@pytest.mark.parametrize("server", ["pg", "mysql", "ldap", "bdbhpt-t", *CACHED])
def test_results_md_has_the_section_and_the_plot(faulted: dict, server: str) -> None:
    entry = _entry(faulted, server)
    results, out = faulted[server]
    text = (out / "results.md").read_text()
    assert "## Database faults under load" in text and f"### {server}" in text
    assert f"| {entry.faults[0].kind}" in text
    assert (out / f"faults-{server}.png").stat().st_size > 0
    assert render_markdown(results) == text
    assert "## Cost per query" not in text  # not a `run` file: none of run's tables
    assert not (out / "qps.png").exists()


@pytest.mark.parametrize("server", list(KINDS_SCRIPT))
def test_every_server_fault_is_done_and_answers_resume(faulted: dict, server: str) -> None:
    entry = _entry(faulted, server)
    assert [f.kind for f in entry.faults] == [line.split(":")[1] for line in
                                             KINDS_SCRIPT[server].split(",")]
    for fault in entry.faults:
        assert fault.error is None, fault
        assert fault.window_end_s is not None
        assert fault.ended_s is not None
        after = [s for s in entry.seconds if math.floor(fault.ended_s) <= s.second
                 and s.second + 1 <= fault.window_end_s]
        assert fault.recovered or sum(s.answered for s in after) > 0, (fault, entry.seconds)


@pytest.mark.parametrize("server", CACHED)
def test_a_cut_channel_bypasses_the_cache_and_answers_go_on(faulted: dict, server: str
                                                            ) -> None:
    """The change channel's connection alone ended: named's log says the cache was flushed
    and bypassed, and answering from the cache again, after the channel was let back (kept
    out 2 s: not before); meanwhile the store answers: answers every second (no worker
    hangs), and SERVFAIL and lost queries together within 1% of those sent."""
    entry = _entry(faulted, server)
    kept, free = entry.faults
    assert (kept.kind, kept.seconds, free.kind, free.seconds) == (CHANNEL_CUT, 2, CHANNEL_CUT,
                                                                  0)
    assert kept.note.endswith("kept from reconnecting for 2 s"), kept
    for fault in (kept, free):
        assert fault.error is None and fault.note.startswith("connection "), fault
        assert fault.bypassed_s is not None and fault.cache_back_s is not None, fault
        assert fault.bypassed_s < fault.cache_back_s
        assert fault.started_s is not None and fault.window_end_s is not None
        window = [s for s in entry.seconds
                  if math.floor(fault.started_s) <= s.second < fault.window_end_s]
        assert all(s.answered > 0 for s in window), entry.seconds
        sent = sum(s.sent for s in window)
        assert sum(s.servfail + s.lost for s in window) <= sent // 100, entry.seconds
        assert fault.recovered, (fault, entry.seconds)
    # Kept out 2 s: back only once let back.
    assert kept.cache_back_s is not None and kept.cache_back_s >= 2, kept
    text = (faulted[server][1] / "results.md").read_text()
    assert text.count("cache flushed and bypassed") == 2, text


@pytest.mark.parametrize("run", list(COLD))
def test_a_restarted_server_loses_queries_and_answers_again(faulted: dict, run: str) -> None:
    entry = _entry(faulted, run)
    fault = entry.faults[0]
    assert fault.kind == SERVER_RESTART and fault.error is None, fault
    assert fault.note.startswith("ready "), fault
    # While it was down its port refused: those queries were lost (or, starting, SERVFAIL).
    assert fault.lost + fault.servfail > 0, entry.seconds
    assert fault.window_end_s is not None and fault.ended_s is not None
    after = [s for s in entry.seconds if math.floor(fault.ended_s) <= s.second
             and s.second + 1 <= fault.window_end_s]
    assert fault.recovered or sum(s.answered for s in after) > 0, (fault, entry.seconds)
    assert entry.steady_p99_us is not None and entry.steady_p99_us > 0
    for second in entry.seconds:
        assert second.within_steady <= second.answered


def test_the_cold_start_script_fits_the_store(faulted: dict) -> None:
    # native reads its zone files only as it starts: the profile's db-cold is left out.
    assert [f.kind for f in _entry(faulted, "native-cold").faults] == [SERVER_RESTART]
    pg = _entry(faulted, "pg-cold")
    assert [f.kind for f in pg.faults] == [SERVER_RESTART, DB_COLD]
    cold = pg.faults[1]
    assert cold.error is None and "page cache dropped" in cold.note, cold
    assert cold.window_end_s is not None and cold.ended_s is not None
    after = [s for s in pg.seconds if math.floor(cold.ended_s) <= s.second
             and s.second + 1 <= cold.window_end_s]
    assert cold.recovered or sum(s.answered for s in after) > 0, (cold, pg.seconds)
    assert [s.second for s in pg.seconds] == list(range(math.ceil(COLD_TINY.duration_s)))


# --- refusals, before anything starts ---------------------------------------------------------


@pytest.mark.parametrize("args, says", [
    (["--server", "pg", "--script", "3:sigstop"], "sigstop needs its length"),
    (["--server", "pg", "--script", "3:melt:1"], "unknown fault 'melt'"),
    (["--server", "pg", "--script", "5:restart,3:restart"], "must increase"),
    (["--server", "pg", "--script", "3:writer-kill:1"], "only the transactional Berkeley DB"),
    (["--server", "ldap", "--script", "3:kill-backends"], "no client connections to end"),
    (["--server", "memory"], "has no database server"),
    (["--server", "memory", "--script", "3:restart"], "has no database server"),
    (["--server", "native", "--script", "3:db-cold"], "reads its data only as it starts"),
    (["--server", "pg", "--script", "3:channel-cut"], "no cache its store tells of changes"),
    (["--server", "ldap+cache", "--script", "3:channel-cut:1"],
     "slapd has no operation that ends one client's connection"),
    (["--server", "pg", "--duration", "4", "--script", "3:sigstop:2"], "does not end within"),
    (["--server", "pg", "--qps", "0"], "--qps 0"),
])
def test_a_script_it_cannot_run_is_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    server = args[1]
    if not get_server(server).is_built():
        pytest.skip(f"{server} is not built")
    done = run_bench(tmp_path, "faults", *args, "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and says in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.check
def test_parse_script_reads_every_field() -> None:
    script = parse_script("10:kill-backends, 20:sigstop:5,40:restart,55:crash:3,"
                          "60:channel-cut,65:channel-cut:5")
    assert [f.text for f in script] == ["10:kill-backends", "20:sigstop:5", "40:restart",
                                        "55:crash:3", "60:channel-cut", "65:channel-cut:5"]
    with pytest.raises(UserError):
        parse_script("10")


@pytest.mark.check
def test_the_default_script_cuts_the_channel_of_a_row_that_has_one() -> None:
    """Asked of the row (ServerKind.change_channel) and its store's server (one connection
    ended alone): pg+cache and mysql+cache have the plain row's script and the cut, ldap+cache
    the plain row's alone (slapd ends no one connection)."""
    default = PROFILES["default"]
    for plain, cut in (("pg", True), ("mysql", True), ("ldap", False)):
        kinds = [f.kind for f in script_for(get_server(plain), default)]
        cached = [f.kind for f in script_for(get_server(f"{plain}+cache"), default)]
        assert CHANNEL_CUT not in kinds
        assert (CHANNEL_CUT in cached) == cut, (plain, cached)
        assert [kind for kind in cached if kind != CHANNEL_CUT] == kinds


# --- the analysis, on a recording made up here ------------------------------------------------

S = 1_000_000_000  # ns
ORIGIN = 5 * S


def _recording() -> Recording:
    """100 queries a second for 10 s: answered (NOERROR, every 10th NXDOMAIN) in 1 ms, but
    the queries sent in [3, 4) s are SERVFAIL after 500 ms, those in [4, 4.5) s lost, and in
    [4.5, 5) s half are SERVFAIL at once."""
    recording = Recording()
    for i in range(1000):
        sent = ORIGIN + i * S // 100
        offset = sent - ORIGIN
        if 3 * S <= offset < 4 * S:
            rcode, latency = 2, S // 2
        elif 4 * S <= offset < 4 * S + S // 2:
            rcode, latency = LOST, LOST
        elif 4 * S + S // 2 <= offset < 5 * S and i % 2:
            rcode, latency = 2, S // 1000
        else:
            rcode, latency = (3 if i % 10 == 0 else 0), S // 1000
        recording.sent_ns.append(sent)
        recording.rcodes.append(rcode)
        recording.latencies_ns.append(latency)
    return recording


def _judged(ended_s: float = 4.5) -> ServerFaults:
    result = ServerFaults("pg", faults=[FaultResult(3.0, SIGSTOP, 1.5, started_s=3.0,
                                                    ended_s=ended_s)])
    judge(result, _recording(), ORIGIN, 10)
    return result


@pytest.mark.check
def test_per_second_counts() -> None:
    result = _judged()
    assert len(result.seconds) == 10
    first, stopped, lost = result.seconds[0], result.seconds[3], result.seconds[4]
    assert (first.sent, first.answered, first.servfail, first.lost) == (100, 100, 0, 0)
    assert (stopped.answered, stopped.servfail, stopped.lost) == (0, 100, 0)
    assert (lost.answered, lost.servfail, lost.lost) == (25, 25, 50)
    assert first.p99_us == pytest.approx(1000)
    assert stopped.p99_us == pytest.approx(500_000)
    assert result.baseline_share == 1.0


@pytest.mark.check
def test_per_fault_figures() -> None:
    [fault] = _judged().faults
    # The first SERVFAIL: the query sent at 3.00 s, answered 500 ms later.
    assert fault.first_servfail_s == pytest.approx(0.5)
    # Second 4 (the one the fault ended in) is not back; second 5 is: recovered at 6 s.
    assert fault.recovered_s == pytest.approx(3.0)
    assert (fault.sent, fault.servfail, fault.lost) == (300, 125, 50)
    assert fault.worst_p99_us == pytest.approx(500_000)  # second 3's SERVFAILs, 500 ms late
    assert fault.window_end_s == 10


@pytest.mark.check
def test_a_fault_never_recovered_counts_to_its_window_end() -> None:
    recording = _recording()
    recording.rcodes[:] = [2 if sent - ORIGIN >= 3 * S else rcode
                           for sent, rcode in zip(recording.sent_ns, recording.rcodes,
                                                  strict=True)]
    result = ServerFaults("pg", faults=[FaultResult(3.0, SIGSTOP, 1.5, started_s=3.0,
                                                    ended_s=4.5)])
    judge(result, recording, ORIGIN, 10)
    [fault] = result.faults
    assert fault.recovered_s is None and not fault.recovered
    assert fault.sent == 700 and fault.servfail == 700


@pytest.mark.check
def test_the_report_reads_the_figures() -> None:
    result = _judged()
    section = Faults(method="m", qps=100, duration_s=10, timeout_s=2, profile="tiny",
                     dataset="made up", script=["3:sigstop:1.5"], servers=[result])
    text = render_markdown(Results(meta={"command": "faults"}, faults=section))
    assert "## Database faults under load" in text and "### pg" in text
    row = next(line for line in text.splitlines() if line.startswith("| sigstop 1.5 s"))
    assert [cell.strip() for cell in row.strip("|").split("|")] == [
        "sigstop 1.5 s", "3.00", "0.50", "3.0", "3.0", "300", "125", "50", "500"]
    assert "`sigstop`:" in text


@pytest.mark.check
def test_settling_waits_for_answers_as_fast_as_the_steady_p99() -> None:
    # Back to answering in second 5 (recovered at 6 s), but at 2 ms, twice the steady p99,
    # until 7 s: settled at the end of second 7 (8 s), 5 s after the fault began.
    recording = _recording()
    recording.latencies_ns[:] = [2 * S // 1000 if 5 * S <= sent - ORIGIN < 7 * S else latency
                                 for sent, latency in zip(recording.sent_ns,
                                                          recording.latencies_ns, strict=True)]
    result = ServerFaults("pg", faults=[FaultResult(3.0, SIGSTOP, 1.5, started_s=3.0,
                                                    ended_s=4.5)])
    judge(result, recording, ORIGIN, 10)
    [fault] = result.faults
    assert result.steady_p99_us == pytest.approx(1000)
    assert result.steady_settled_share == 1.0
    assert fault.recovered_s == pytest.approx(3.0)
    assert fault.settled_s == pytest.approx(5.0)
    assert [s.within_steady for s in result.seconds[4:8]] == [25, 0, 0, 100]
