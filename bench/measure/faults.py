"""What a DNS server does while its database fails under a steady load (docs/method/faults.md).

An open-loop prober (bench/load/prober, -O -R) offers a fixed rate of queries for the whole run
and records every query: when it was sent, the answer's RCODE and latency, or that none came
within the time-out. Meanwhile a script of faults runs against the store, each at its time from
the load's start:

    kill-backends  the database's connections to the DNS server ended abruptly: PostgreSQL's
                   client backends SIGKILLed (the postmaster then restarts every backend, as
                   after a crash), MariaDB's client connections KILLed
    sigstop        every database server process stopped (SIGSTOP) for `seconds`, then SIGCONT:
                   a database that hangs without closing anything
    restart        the database server stopped and started again, its data kept
    crash          every database server process SIGKILLed, down for `seconds`, then started
                   again (crash recovery at its start)
    writer-stall   (transactional Berkeley DB) a writer write-locks a zone's entry inside its
                   transaction, holds it for `seconds`, then aborts
    writer-kill    (transactional Berkeley DB) a writer write-locks a zone's entry, holds it
                   `seconds`, and is SIGKILLed holding it: its lock stays in the region
    server-restart the DNS server under test stopped and started again (a cold start: its
                   caches, its connections and, for a DLZ driver, its memo are new); any server
    db-cold        the store's database server stopped, the machine's page cache dropped, the
                   server started again: the database meets its data on disk, as after a
                   reboot (a store without a server: the page cache dropped only)
    channel-cut    (a server answering from a cache its store keeps coherent) the connection
                   of the cache's change channel alone ended on the database server, kept
                   from reconnecting for `seconds` when given; the server's log is watched
                   for the cache's bypass and its return

Every query is put in the second it was sent in (from the load's start). Per second: sent,
answered (NOERROR or NXDOMAIN: the data set's own answers), SERVFAIL, other RCODEs, lost, and
the p99 latency of the answers. Per fault, from the moment it began until the next fault began
(or the run ended): the time to the first SERVFAIL answer, the time to recovery (the end of
the first whole second, from the one in which the fault's action ended, whose queries were
answered at RECOVERED_SHARE or better), the SERVFAILs and lost queries until then, and the
worst second's p99 until then; and the time until it settled: the end of the first whole second
from the one its action ended in whose queries were answered at SETTLED_SHARE or better within
the steady p99 (the p99 of every answer before the first fault), issue 29's "time until 99% of
queries are answered within the steady p99". About half of the steady seconds themselves meet
that bar (the p99 is their own), so the run also reports that share for the steady state: a
settling time is the first second as good as a typical steady one. A channel cut also has
the times from the cut until the server's log said its cache was flushed and bypassed, and
until it said the cache answers again.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import drop_page_cache
from base.watchdog import stat_fields
from bench.load.prober import LOST, Recorder, Recording, nearest_rank
from bench.measure.serial import Section
from bench.measure.serving import LoadedStore
from servers import DnsServer, ServerKind

METHOD = ("open-loop prober (one query every 1/QPS s on a fixed schedule, each from its own "
          "socket), every query recorded with its send time, RCODE and latency; queries "
          "counted in the second they were sent")

# RCODEs that are the data set's own answers: the query set asks names that exist (NOERROR,
# NODATA included) and names that do not (NXDOMAIN).
NOERROR, SERVFAIL, NXDOMAIN = 0, 2, 3
ANSWERED = (NOERROR, NXDOMAIN)
# A second at or above this share of answered queries is back to normal (issue 27: "time to
# recovery (first second back at >= 99% NOERROR/NXDOMAIN answers)").
RECOVERED_SHARE = 0.99
# A second at or above this share of queries answered within the steady p99 has settled
# (issue 29: "the time until 99% of queries are answered within the steady p99").
SETTLED_SHARE = 0.99

SIGSTOP, RESTART, KILL_BACKENDS, CRASH = "sigstop", "restart", "kill-backends", "crash"
WRITER_STALL, WRITER_KILL = "writer-stall", "writer-kill"
SERVER_RESTART, DB_COLD = "server-restart", "db-cold"
CHANNEL_CUT = "channel-cut"
# Each kind of fault, and what it does (the report and docs/method/faults.md say it so).
KINDS: dict[str, str] = {
    KILL_BACKENDS: "the database's client connections ended abruptly (PostgreSQL: client "
                   "backends SIGKILLed; MariaDB: KILL of each connection)",
    SIGSTOP: "every database server process stopped (SIGSTOP), then continued (SIGCONT)",
    RESTART: "the database server stopped and started again, its data kept",
    CRASH: "every database server process SIGKILLed, then the server started again",
    WRITER_STALL: "a Berkeley DB writer holds a zone's write lock in its transaction, then "
                  "aborts",
    WRITER_KILL: "a Berkeley DB writer holding a zone's write lock is SIGKILLed",
    SERVER_RESTART: "the DNS server under test stopped and started again (a cold start)",
    DB_COLD: "the store's database server stopped, the machine's page cache dropped, the "
             "server started again (no server: the page cache dropped only)",
    CHANNEL_CUT: "the connection of the server's cache's change channel alone ended "
                 "(PostgreSQL: its listener's backend terminated; MariaDB: KILL of its "
                 "poller's connection), kept from reconnecting for the seconds given",
}
# The kinds that take a length (`seconds`): how long the fault lasts.
TIMED = (SIGSTOP, CRASH, WRITER_STALL, WRITER_KILL)
# The kinds that may take one: a channel cut without it lets the channel reconnect at once.
MAY_LAST = (CHANNEL_CUT,)
WRITER_KINDS = (WRITER_STALL, WRITER_KILL)


@dataclass(frozen=True)
class Fault:
    """One line of a script: at `at_s` seconds from the load's start, `kind`, lasting
    `seconds` (the kinds in TIMED)."""

    at_s: float
    kind: str
    seconds: float = 0.0

    @property
    def text(self) -> str:
        return f"{self.at_s:g}:{self.kind}" + (f":{self.seconds:g}" if lasts(self) else "")


def lasts(fault: Fault | FaultResult) -> bool:
    """Whether the fault has a length of its own (its text and description say it)."""
    return fault.kind in TIMED or (fault.kind in MAY_LAST and fault.seconds > 0)


@dataclass(frozen=True)
class Profile:
    """The offered load, the run's length and the scripts: one for a store on a database
    server, one for the transactional Berkeley DB store (which has no server to stop)."""

    qps: float
    duration_s: float
    server_script: tuple[Fault, ...]
    writer_script: tuple[Fault, ...]


PROFILES: dict[str, Profile] = {
    # Each fault once, 10 s or more apart: the 10 s before the first are the steady state, and
    # each fault has room to recover before the next (a restart of PostgreSQL or MariaDB takes
    # 1-3 s here, a crash's recovery as long again). The channel cut is only for a server with
    # a change channel (script_for leaves it out of the others').
    "default": Profile(
        qps=2000, duration_s=75,
        server_script=(Fault(10, KILL_BACKENDS), Fault(20, SIGSTOP, 5),
                       Fault(30, CHANNEL_CUT, 5), Fault(40, RESTART), Fault(55, CRASH, 3)),
        writer_script=(Fault(10, WRITER_STALL, 5), Fault(30, WRITER_KILL, 2))),
    # The tests': a few seconds, one fault.
    "tiny": Profile(
        qps=200, duration_s=7,
        server_script=(Fault(2, SIGSTOP, 1.5),),
        writer_script=(Fault(2, WRITER_KILL, 1),)),
    # Issue 29's cold starts: 10 s of steady state, then the server under test restarted and
    # 60 s of it, then its database restarted over a dropped page cache and 60 s of that.
    "cold-start": Profile(
        qps=2000, duration_s=130,
        server_script=(Fault(10, SERVER_RESTART), Fault(70, DB_COLD)),
        writer_script=(Fault(10, SERVER_RESTART), Fault(70, DB_COLD))),
    # The tests' cold starts: a few seconds each; the page cache's drop and PostgreSQL's
    # restart took 6.4 s beside other test suites, hence the 10 s after it.
    "cold-start-tiny": Profile(
        qps=200, duration_s=16,
        server_script=(Fault(2, SERVER_RESTART), Fault(6, DB_COLD)),
        writer_script=(Fault(2, SERVER_RESTART), Fault(6, DB_COLD))),
}


def parse_script(text: str) -> tuple[Fault, ...]:
    """--script "AT:KIND[:SECONDS],...": faults at increasing times, each a known kind."""
    faults = []
    for part in (p.strip() for p in text.split(",")):
        fields = part.split(":")
        if len(fields) not in (2, 3):
            raise UserError(f"--script: {part!r} is not AT:KIND[:SECONDS]")
        try:
            at_s, seconds = float(fields[0]), float(fields[2]) if len(fields) == 3 else 0.0
        except ValueError:
            raise UserError(f"--script: {part!r}: AT and SECONDS are numbers") from None
        kind = fields[1]
        if kind not in KINDS:
            raise UserError(f"--script: unknown fault {kind!r} (known: {', '.join(KINDS)})")
        if at_s < 0 or seconds < 0 or (kind in TIMED and seconds <= 0):
            raise UserError(f"--script: {part!r}: times are positive, and {kind} needs its "
                            "length in seconds")
        faults.append(Fault(at_s, kind, seconds))
    if any(b.at_s <= a.at_s for a, b in zip(faults, faults[1:], strict=False)):
        raise UserError("--script: the faults' times must increase")
    return tuple(faults)


def script_for(server: ServerKind, profile: Profile) -> tuple[Fault, ...]:
    """The profile's script for the server's store: the writer faults for the transactional
    Berkeley DB store, the server faults for a store on a database server, less those its
    store cannot have (slapd has no connection to kill); refused if none is left."""
    script = profile.writer_script if server.writers_hold_locks() else profile.server_script
    possible = tuple(f for f in script if not_applicable(server, f.kind) is None)
    if script and not possible:
        raise UserError(f"{server.name} cannot have the profile's faults: "
                        f"{not_applicable(server, script[0].kind)}")
    return possible


def check_script(server: ServerKind, script: Sequence[Fault], duration_s: float) -> None:
    """Refuse (one line) a fault the server's store cannot have, or one outside the run."""
    for fault in script:
        reason = not_applicable(server, fault.kind)
        if reason is not None:
            raise UserError(f"{fault.kind} cannot be done to {server.name}: {reason}")
        if fault.at_s + fault.seconds >= duration_s:
            raise UserError(f"the fault {fault.text} does not end within the run's "
                            f"{duration_s:g} s (--duration)")


def not_applicable(server: ServerKind, kind: str) -> str | None:
    """Why the server's store cannot have this kind of fault; None: it can."""
    loader = server.loader()
    database = loader.database
    if kind == SERVER_RESTART:
        return None
    if kind == CHANNEL_CUT:
        if server.change_channel() is None:
            return f"{server.name} answers from no cache its store tells of changes"
        return database.no_connection_end
    if kind == DB_COLD:
        return f"{server.name} reads its data only as it starts" if loader.read_at_start \
            else None
    if kind in WRITER_KINDS:
        return None if server.writers_hold_locks() else \
            "only the transactional Berkeley DB store (bdbhpt-t) has writers holding locks"
    if not database.has_server:
        return f"the {server.store} store has no database server"
    if kind == KILL_BACKENDS and not database.kills_clients:
        return f"the {server.store} store's server has no client connections to end"
    return None


# --- results ---------------------------------------------------------------------------------


@dataclass
class Second:
    """The queries sent in one second of the run (from the load's start)."""

    second: int
    sent: int = 0
    answered: int = 0  # NOERROR or NXDOMAIN
    servfail: int = 0
    other: int = 0  # any other RCODE
    lost: int = 0  # no answer within the time-out
    p99_us: float | None = None  # of every answer (any RCODE)
    within_steady: int = 0  # answered (NOERROR, NXDOMAIN) within the steady p99

    @property
    def recovered(self) -> bool:
        """At least RECOVERED_SHARE of the second's queries answered."""
        return self.sent > 0 and self.answered / self.sent >= RECOVERED_SHARE

    @property
    def settled(self) -> bool:
        """At least SETTLED_SHARE of the second's queries answered within the steady p99."""
        return self.sent > 0 and self.within_steady / self.sent >= SETTLED_SHARE


@dataclass
class FaultResult:
    """One fault as it happened, and what the DNS server's clients saw from it on."""

    at_s: float
    kind: str
    seconds: float
    started_s: float | None = None  # from the load's start: when the fault began
    ended_s: float | None = None  # when its action was over (SIGCONT sent, restart returned)
    note: str = ""  # what the action found ("3 connections ended")
    error: str | None = None  # the action failed
    window_end_s: float | None = None  # the next fault's start, or the run's end
    first_servfail_s: float | None = None  # from started_s to the first SERVFAIL's arrival
    recovered_s: float | None = None  # from started_s to the end of the first good second
    settled_s: float | None = None  # from started_s to the end of the first settled second
    sent: int = 0  # from started_s to recovery (to window_end_s if never)
    servfail: int = 0
    lost: int = 0
    worst_p99_us: float | None = None  # the highest p99 of a second until recovery
    # A channel cut: from started_s until the server's log said its cache was flushed and
    # bypassed, and until it said the cache answers again (None: not seen while watched).
    bypassed_s: float | None = None
    cache_back_s: float | None = None

    @property
    def recovered(self) -> bool:
        return self.recovered_s is not None


@dataclass
class ServerFaults:
    """One server's run through its script."""

    server: str
    status: str = "ok"  # "ok" or "failed"
    error: str | None = None
    threads: int = 1
    baseline_share: float | None = None  # answered share before the first fault
    steady_p99_us: float | None = None  # p99 of the answers before the first fault
    steady_settled_share: float | None = None  # of the seconds before it, the share settled
    seconds: list[Second] = field(default_factory=list)
    faults: list[FaultResult] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return sum(s.sent for s in self.seconds)


@dataclass
class Faults:
    """results.json's "faults" section: the load, the script, every server's run."""

    method: str
    qps: float
    duration_s: float
    timeout_s: float
    profile: str
    dataset: str
    script: list[str] = field(default_factory=list)  # Fault.text of each line
    servers: list[ServerFaults] = field(default_factory=list)

    json_absent: ClassVar[dict[str, Any]] = {"profile": "", "dataset": ""}  # when left out

    def server(self, name: str) -> ServerFaults | None:
        return next((s for s in self.servers if s.server == name), None)


# results.json's "faults": written by `faults` only.
SECTION = Section("faults", Faults | None)


# --- the recording, second by second and fault by fault -------------------------------------


def per_second(recording: Recording, origin_ns: int, duration_s: float) -> list[Second]:
    """Every second of the run, from the load's start (origin_ns), with its queries."""
    count = max(1, math.ceil(duration_s))
    seconds = [Second(k) for k in range(count)]
    latencies: list[list[int]] = [[] for _ in range(count)]
    for sent_ns, rcode, latency_ns in zip(recording.sent_ns, recording.rcodes,
                                          recording.latencies_ns, strict=True):
        k = min(max(0, (sent_ns - origin_ns) // 1_000_000_000), count - 1)
        second = seconds[k]
        second.sent += 1
        if rcode == LOST:
            second.lost += 1
            continue
        latencies[k].append(latency_ns)
        if rcode in ANSWERED:
            second.answered += 1
        elif rcode == SERVFAIL:
            second.servfail += 1
        else:
            second.other += 1
    for second, found in zip(seconds, latencies, strict=True):
        if found:
            second.p99_us = nearest_rank(sorted(found), 99) / 1000
    return seconds


def steady_p99(recording: Recording, origin_ns: int, first_fault_s: float | None
               ) -> float | None:
    """The p99 latency (us) of the data set's answers to the queries sent before the first
    fault (the whole run without one)."""
    until_ns = None if first_fault_s is None else origin_ns + round(first_fault_s * 1e9)
    found = sorted(latency for sent, rcode, latency in
                   zip(recording.sent_ns, recording.rcodes, recording.latencies_ns, strict=True)
                   if rcode in ANSWERED and (until_ns is None or sent < until_ns))
    return nearest_rank(found, 99) / 1000 if found else None


def count_within(seconds: Sequence[Second], recording: Recording, origin_ns: int,
                 bound_us: float) -> None:
    """Each second's queries answered (NOERROR, NXDOMAIN) within bound_us."""
    bound_ns = bound_us * 1000
    last = len(seconds) - 1
    for sent_ns, rcode, latency_ns in zip(recording.sent_ns, recording.rcodes,
                                          recording.latencies_ns, strict=True):
        if rcode in ANSWERED and latency_ns <= bound_ns:
            k = min(max(0, (sent_ns - origin_ns) // 1_000_000_000), last)
            seconds[k].within_steady += 1


def steady_settled_share(seconds: Sequence[Second], first_fault_s: float | None
                         ) -> float | None:
    """The share of the whole seconds before the first fault that count as settled: how
    often a steady second meets the bar a fault's settling time waits for."""
    before = [s for s in seconds if s.sent and (first_fault_s is None
                                                or s.second + 1 <= first_fault_s)]
    return sum(s.settled for s in before) / len(before) if before else None


def baseline_share(seconds: Sequence[Second], first_fault_s: float | None) -> float | None:
    """The answered share of the whole seconds before the first fault (the steady state)."""
    before = [s for s in seconds if first_fault_s is None or s.second + 1 <= first_fault_s]
    sent = sum(s.sent for s in before)
    return sum(s.answered for s in before) / sent if sent else None


def judge_fault(fault: FaultResult, seconds: Sequence[Second], recording: Recording,
                origin_ns: int) -> None:
    """Fill in the fault's first SERVFAIL, its recovery and its counts from the recording."""
    if fault.started_s is None or fault.window_end_s is None:
        return
    start, end = fault.started_s, fault.window_end_s
    fault.first_servfail_s = _first_servfail(recording, origin_ns, start, end)
    done = fault.ended_s if fault.ended_s is not None else start
    recovered_at = next((s.second + 1 for s in seconds
                         if s.second >= math.floor(done) and s.second + 1 <= end
                         and s.recovered), None)
    fault.recovered_s = None if recovered_at is None else recovered_at - start
    settled_at = next((s.second + 1 for s in seconds
                       if s.second >= math.floor(done) and s.second + 1 <= end and s.settled),
                      None)
    fault.settled_s = None if settled_at is None else settled_at - start
    until = end if recovered_at is None else recovered_at
    fault.sent, fault.servfail, fault.lost = _counts(recording, origin_ns, start, until)
    p99s = [s.p99_us for s in seconds
            if math.floor(start) <= s.second < until and s.p99_us is not None]
    fault.worst_p99_us = max(p99s) if p99s else None


def _first_servfail(recording: Recording, origin_ns: int, start_s: float,
                    end_s: float) -> float | None:
    """Seconds from start_s to the first SERVFAIL that arrived from then until end_s (the
    next fault's start: a SERVFAIL after it may be that fault's)."""
    start_ns, end_ns = origin_ns + round(start_s * 1e9), origin_ns + round(end_s * 1e9)
    arrivals = [sent + latency for sent, rcode, latency in
                zip(recording.sent_ns, recording.rcodes, recording.latencies_ns, strict=True)
                if rcode == SERVFAIL and start_ns <= sent + latency < end_ns]
    return (min(arrivals) - start_ns) / 1e9 if arrivals else None


def _counts(recording: Recording, origin_ns: int, start_s: float,
            end_s: float) -> tuple[int, int, int]:
    """(sent, SERVFAIL, lost) of the queries sent from start_s to end_s."""
    start_ns, end_ns = origin_ns + round(start_s * 1e9), origin_ns + round(end_s * 1e9)
    sent = servfail = lost = 0
    for sent_ns, rcode in zip(recording.sent_ns, recording.rcodes, strict=True):
        if start_ns <= sent_ns < end_ns:
            sent += 1
            servfail += rcode == SERVFAIL
            lost += rcode == LOST
    return sent, servfail, lost


# --- doing the faults ------------------------------------------------------------------------


class Moments:
    """When a fault began and ended, on the monotonic clock, and when the server's log said
    what its cache did. An action marks its own beginning when it differs from its call (a
    writer holds its lock only once it has started), and its end when it differs from its
    return (a channel cut watches the server's log on after it let the channel back)."""

    def __init__(self) -> None:
        self.began_ns: int | None = None
        self.ended_ns: int | None = None
        self.bypassed_ns: int | None = None  # the log said the cache was flushed, bypassed
        self.cache_back_ns: int | None = None  # the log said the cache answers again

    def begin(self) -> None:
        self.began_ns = time.monotonic_ns()

    def end(self) -> None:
        self.ended_ns = time.monotonic_ns()

    def since_began(self, moment_ns: int | None) -> float | None:
        """Seconds from the fault's beginning to moment_ns (None: no such moment)."""
        if moment_ns is None or self.began_ns is None:
            return None
        return (moment_ns - self.began_ns) / 1e9


# An action: does the fault to the loaded store, lasting `seconds`, marking in Moments its
# beginning if it is not its call, its end if it is not its return, and what the server's
# cache did; says what it found.
Action = Callable[[LoadedStore, float, Moments], str]


@contextmanager
def stopped(pids: Sequence[int]) -> Iterator[None]:
    """pids stopped (SIGSTOP) for the block; continued whatever happens (a stopped server
    would ignore the SIGTERM that stops it at the end)."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        _wait_stopped(pids)
        yield
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def _wait_stopped(pids: Sequence[int], timeout_s: float = 2.0) -> None:
    """Until every thread of pids is in state T: SIGSTOP is delivered asynchronously, and in
    a CI run a slapd thread still running on the other CPU answered the first query sent
    after kill() returned (tests/test_db_failures.py, 2026-11-28)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not all(_all_threads_stopped(p) for p in pids):
        time.sleep(0.001)


def _all_threads_stopped(pid: int) -> bool:
    """Every thread of pid stopped (or the process gone: nothing left to answer)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    states = (stat_fields(pid, int(task)) for task in tasks)
    return all(fields is None or fields[0] in ("T", "t") for fields in states)


def _processes(count: int) -> str:
    return f"{count} process{'es' if count != 1 else ''}"


def _database_pids(loaded: LoadedStore) -> list[int]:
    pids = loaded.database_pids()
    if not pids:
        raise UserError(f"the {loaded.loader.name} store's database server has no processes")
    return pids


def _sigstop(loaded: LoadedStore, seconds: float, moments: Moments) -> str:
    pids = _database_pids(loaded)
    with stopped(pids):
        time.sleep(seconds)
    return f"{_processes(len(pids))} stopped"


def _restart(loaded: LoadedStore, seconds: float, moments: Moments) -> str:
    loaded.restart_database()
    return ""


def _crash(loaded: LoadedStore, seconds: float, moments: Moments) -> str:
    pids = _database_pids(loaded)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(seconds)
    loaded.restart_database()  # stops what is left (nothing), starts it: crash recovery
    return f"{_processes(len(pids))} killed"


def _kill_backends(loaded: LoadedStore, seconds: float, moments: Moments) -> str:
    count = loaded.loader.database.kill_clients(loaded.target)
    if not count:
        raise UserError("the database had no client connection to end")
    return f"{count} connection{'s' if count != 1 else ''} ended"


@contextmanager
def _lock_holder(loaded: LoadedStore, zone: str) -> Iterator[subprocess.Popen[str]]:
    """A writer process holding zone's write lock where the server reads (the store's own,
    ServerKind.zone_lock_holder; a process of its own: its death must not be ours), until the
    block ends (killed then if it is still there)."""
    argv = loaded.server.zone_lock_holder(loaded.target, zone)
    writer = subprocess.Popen(argv, cwd=REPO_ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None
        if writer.stdout.readline().strip() != "holding":
            raise UserError("the Berkeley DB writer did not take its lock")
        yield writer
    finally:
        writer.kill()
        writer.wait()


def _writer_fault(zone: str, *, kill: bool) -> Action:
    """A writer holding zone's lock for `seconds`, then SIGKILLed (kill) or aborting."""
    def act(loaded: LoadedStore, seconds: float, moments: Moments) -> str:
        with _lock_holder(loaded, zone) as writer:
            moments.begin()
            time.sleep(seconds)
            if kill:
                writer.kill()
                writer.wait()
                return f"writer SIGKILLed holding the lock of {zone}"
            assert writer.stdin is not None
            writer.stdin.write("abort\n")
            writer.stdin.flush()
            writer.wait(timeout=30)
            return f"writer aborted, the lock of {zone} released"
    return act


def _db_cold(loaded: LoadedStore, seconds: float, moments: Moments) -> str:
    if not loaded.loader.database.has_server:
        drop_page_cache()
        return "page cache dropped (the store has no server to restart)"
    if not loaded.accounts_database:
        raise UserError("the suite restarts no database server it did not start (--store-url)")
    loaded.restart_database(cold=True)
    return "page cache dropped while the database server was down"


# How long a channel cut watches the server's log, from the end of its hold, for the cache's
# bypass and return: the channel reconnects within half the cache's bound (1 s by default)
# and is caught up a heartbeat or a poll later.
CHANNEL_WATCH_S = 10.0
# How often the log is read meanwhile: the resolution of the times it gives.
LOG_POLL_S = 0.02


def _channel_cut(server: DnsServer) -> Action:
    """The connection of the server's change channel alone ended on the database server
    and, for `seconds`, kept from coming back; the server's log watched for its cache's
    bypass and return (ServerKind.change_channel's words)."""
    def act(loaded: LoadedStore, seconds: float, moments: Moments) -> str:
        channel = loaded.server.change_channel()
        if channel is None:
            raise UserError(f"{loaded.server.name} has no change channel")
        offset = server.log_path.stat().st_size
        with loaded.server.channel_cut(loaded.target, server,
                                       kept_out=seconds > 0) as connection:
            moments.begin()
            assert moments.began_ns is not None
            held_until = moments.began_ns + round(seconds * 1e9)
            moments.bypassed_ns, offset = _watch_log(server.log_path, channel.bypassed, offset,
                                                     held_until)
            _sleep_until(held_until)
        moments.end()
        watched_until = held_until + round(CHANNEL_WATCH_S * 1e9)
        if moments.bypassed_ns is None:
            moments.bypassed_ns, offset = _watch_log(server.log_path, channel.bypassed,
                                                     offset, watched_until)
        if moments.bypassed_ns is not None:
            moments.cache_back_ns, _ = _watch_log(server.log_path, channel.answering, offset,
                                                  watched_until)
        return f"connection {connection} ended" + (
            f", kept from reconnecting for {seconds:g} s" if seconds > 0 else "")
    return act


def _watch_log(path: Path, words: str, offset: int, until_ns: int) -> tuple[int | None, int]:
    """Read the log past offset until it says words: when that was seen (monotonic ns) and
    the offset just past them; (None, offset) if not by until_ns (read once at least)."""
    wanted = words.encode()
    while True:
        with open(path, "rb") as log:
            log.seek(offset)
            at = log.read().find(wanted)
        if at >= 0:
            return time.monotonic_ns(), offset + at + len(wanted)
        if time.monotonic_ns() >= until_ns:
            return None, offset
        time.sleep(LOG_POLL_S)


def _server_restart(server: DnsServer) -> Action:
    """The DNS server under test stopped and started again on its port, until it says it
    runs with every zone loaded."""
    def act(loaded: LoadedStore, seconds: float, moments: Moments) -> str:
        server.stop()
        server.start()
        server.wait_running()
        return f"ready {time.monotonic() - server.exec_time:.2f} s after its exec"
    return act


def action_for(kind: str, locked_zone: str, server: DnsServer) -> Action:
    """What doing a fault of this kind is; locked_zone: the zone a writer locks; server: the
    DNS server under test."""
    actions: dict[str, Action] = {
        KILL_BACKENDS: _kill_backends, SIGSTOP: _sigstop, RESTART: _restart, CRASH: _crash,
        WRITER_STALL: _writer_fault(locked_zone, kill=False),
        WRITER_KILL: _writer_fault(locked_zone, kill=True),
        SERVER_RESTART: _server_restart(server), DB_COLD: _db_cold,
        CHANNEL_CUT: _channel_cut(server)}
    return actions[kind]


def run_script(loaded: LoadedStore, server: DnsServer, script: Sequence[Fault], origin_ns: int,
               locked_zone: str, progress: Callable[[str], None]) -> list[FaultResult]:
    """Each fault at its time from origin_ns (the load's start), one after the other; a
    fault whose action fails is recorded with its error and the script goes on."""
    done = []
    for fault in script:
        _sleep_until(origin_ns + round(fault.at_s * 1e9))
        result = FaultResult(fault.at_s, fault.kind, fault.seconds)
        moments = Moments()
        moments.begin()
        try:
            result.note = action_for(fault.kind, locked_zone, server)(loaded, fault.seconds,
                                                                      moments)
        except UserError as exc:
            result.error = str(exc)
        except Exception as exc:  # a database client's error, a writer that would not end
            result.error = f"{type(exc).__name__}: {exc}"
        assert moments.began_ns is not None
        result.started_s = (moments.began_ns - origin_ns) / 1e9
        result.ended_s = ((moments.ended_ns or time.monotonic_ns()) - origin_ns) / 1e9
        result.bypassed_s = moments.since_began(moments.bypassed_ns)
        result.cache_back_s = moments.since_began(moments.cache_back_ns)
        progress(f"{loaded.server.name}: {fault.text} from {result.started_s:.2f} s to "
                 f"{result.ended_s:.2f} s" + (f" ({result.note})" if result.note else "")
                 + (f": failed: {result.error}" if result.error else ""))
        done.append(result)
    return done


def _sleep_until(when_ns: int) -> None:
    left = (when_ns - time.monotonic_ns()) / 1e9
    if left > 0:
        time.sleep(left)


def measure_server(loaded: LoadedStore, query_file: Path, run_dir: Path, *, qps: float,
                   duration_s: float, timeout_s: float, threads: int,
                   script: Sequence[Fault],
                   progress: Callable[[str], None] = print) -> ServerFaults:
    """The server over the loaded store under a steady load through the script; a failure
    is recorded, not raised."""
    name = loaded.server.name
    result = ServerFaults(name, threads=threads)
    try:
        with loaded.dns_server(run_dir, threads=threads) as server:
            recorder = Recorder(server.host, server.port, query_file,
                                run_dir / f"recording-{name}.txt", qps=qps,
                                seconds=duration_s, timeout=timeout_s)
            origin_ns = time.monotonic_ns()
            with recorder:
                result.faults = run_script(loaded, server, script, origin_ns,
                                           loaded.last_zone, progress)
                recording = recorder.wait()
    except UserError as exc:
        result.status, result.error = "failed", str(exc)
        progress(f"{name} failed: {exc}")
        return result
    judge(result, recording, origin_ns, duration_s)
    return result


def judge(result: ServerFaults, recording: Recording, origin_ns: int,
          duration_s: float) -> None:
    """The per-second series and every fault's figures, from the recording."""
    result.seconds = per_second(recording, origin_ns, duration_s)
    starts = [f.started_s for f in result.faults]
    first = starts[0] if starts else None
    result.baseline_share = baseline_share(result.seconds, first)
    result.steady_p99_us = steady_p99(recording, origin_ns, first)
    if result.steady_p99_us is not None:
        count_within(result.seconds, recording, origin_ns, result.steady_p99_us)
        result.steady_settled_share = steady_settled_share(result.seconds, first)
    for fault, following in zip(result.faults, [*starts[1:], None], strict=True):
        fault.window_end_s = following if following is not None else float(duration_s)
        judge_fault(fault, result.seconds, recording, origin_ns)


def describe_fault(fault: FaultResult | Fault) -> str:
    """"sigstop 5 s", "restart": a fault in a few words."""
    return fault.kind + (f" {fault.seconds:g} s" if lasts(fault) else "")
