"""Which server to run for a requirement, and how, from the results catalogue
(`python3 -m bench advise`; the method: docs/method/advise.md).

A requirement is a data size (zones), a peak rate, a p99 limit at that peak, the round trip to
the database, a write rate and whether the zones are signed. Every server the results measure
is checked against it, criterion by criterion, each check resting on figures of the catalogue:

- **headroom**: the breaking point (`capacity`: the bracket of offered rates between the last
  load that held 95% and the first that did not) over the peak, from the sweep measured
  nearest the requirement (round trip first, for a server with a database server; then data
  size); a load-generator lower bound is one;
- **p99 at the peak**: the sweep's p99 at each load that held, interpolated in offered QPS;
- **writes**: the write rate the store was seen to take (`writes`, straight into the store),
  and the reads' p99 beside it;
- **signed zones**: what the server kind says it serves of them;

and beside them the settings (`tune`'s threads and connections at the nearest round trip),
the store's cache (`scale`), startup time and memory at the zone count (`startup`), the
closed loop at the zone count (`scale`), the write visibility and the CPU per read at the write
rate (`writes`) and what signing costs (`run --signed`). A figure lies at a measured point,
between two (interpolated linearly, within one run), or, outside the measured range, at the
nearest one, labelled so; every figure measured elsewhere than the requirement (another zone
count, round trip, read load, rate) names the measurement that would be at it, as the command
that takes it. Nothing is extrapolated and no figure is made up.

A check judged on the nearest measurement counts as labelled. A server with a failed check fell
out; one with an undecided check (the figures cannot say: an interval across the limit, the
peak inside a bracket, a lower bound under it, nothing measured) and none failed waits for the
measurement that decides it; the rest meet the requirement and are ranked by their headroom.
This module decides; bench/report/advise.py writes it down.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from base.errors import UserError
from bench.measure.catalogue import (
    BEFORE_ROUNDS,
    SUPERSEDED,
    Catalogue,
    Figure,
    Provenance,
)
from servers import base_name, get_server, report_order, server_names

MEETS, FAILS, UNDECIDED = "meets", "fails", "undecided"
# Flags of an estimate beside the catalogue's own.
LOWER_BOUND = "lower bound"      # a breaking point the load generator did not reach
EARLY = "before the rule"        # measured before rounds and intervals (RULE_SINCE)
# The commands whose runs the advice reads.
_COMMANDS = ("capacity", "startup", "scale", "tune", "writes", "run")
_BIND_VERSION = re.compile(r"BIND (\d+\.\d+)")
# The figures of `writes` read at the write rate.
_AT_WRITE_RATE = ("visible_p99_ms", "read_p99_ms", "cpu_per_read_us")


@dataclass(frozen=True)
class Requirement:
    """What the servers are checked against; impossible numbers are refused."""

    zones: int
    peak_qps: float
    p99_ms: float
    db_rtt_ms: float = 0.0
    writes_per_s: float = 0.0
    signed: bool = False

    def __post_init__(self) -> None:
        numbers = {"--zones": self.zones, "--peak-qps": self.peak_qps, "--p99-ms": self.p99_ms,
                   "--db-rtt": self.db_rtt_ms, "--writes": self.writes_per_s}
        for option, value in numbers.items():
            if not math.isfinite(value):
                raise UserError(f"{option} {value}: not a number")
            if option in ("--zones", "--peak-qps", "--p99-ms") and value <= 0:
                raise UserError(f"{option} {value:g}: must be more than 0")
            if value < 0:
                raise UserError(f"{option} {value:g}: cannot be negative")


@dataclass(frozen=True)
class Command:
    """A measurement not in the results, as the command that takes it."""

    name: str
    servers: tuple[str, ...]
    options: tuple[tuple[str, str], ...] = ()

    @property
    def one_server(self) -> bool:
        """The command measures one server at a time (`tune --server`)."""
        return self.name == "tune"

    def text(self) -> str:
        words = ["python3 -m bench", self.name,
                 "--server" if self.one_server else "--servers", ",".join(self.servers)]
        for option, value in self.options:
            words += [option, value] if value else [option]
        return " ".join(words)


# The measurements the advice may lack (Missing.kind; bench/report/advise.py words them).
NO_SWEEP = "breaking point"                 # no capacity sweep of the server at all
SWEEP_ZONES = "breaking point at the zone count"
SWEEP_RTT = "breaking point at the round trip"
SWEEP_BEYOND = "breaking point beyond one load generator"
SWEEP_BRACKET = "loads inside the bracket"
P99_AT_PEAK = "p99 at the peak"
TUNE_RTT = "threads and connections at the round trip"
STARTUP_ZONES = "startup at the zone count"
WRITES_HERE = "reads beside writes at the requirement"
SIGNED_COST = "signed against unsigned"
# The measurements that could overturn a failed check of each kind (measured elsewhere than
# the requirement): what a server that fell out still lacks.
_OVERTURN = {"headroom": {NO_SWEEP, SWEEP_ZONES, SWEEP_RTT, SWEEP_BEYOND, SWEEP_BRACKET},
             "p99": {P99_AT_PEAK, SWEEP_ZONES, SWEEP_RTT},
             "writes": {WRITES_HERE}, "read_p99": {WRITES_HERE}}
# Why no command takes a measurement (Missing.no_command).
TUNE_WHOLE_MS = "tune adds whole milliseconds 1-5"
# capacity adds no round trip, and records none over a lent database (--store-url): a sweep
# at a round trip is one whose metadata says db_rtt_ms, which no command writes yet.
CAPACITY_NO_RTT = "capacity adds no round trip"


@dataclass(frozen=True)
class Missing:
    """A measurement the advice lacks (`kind`: one of the names above) and the command that
    takes it, or why no command does (`no_command`)."""

    server: str
    kind: str
    command: Command | None
    no_command: str = ""


@dataclass(frozen=True)
class Basis:
    """Where an estimate stands on its axis: at a measured point, between two, or (outside
    the measured range) at the nearest one."""

    axis: str
    wanted: float
    measured: tuple[float, ...]

    @property
    def inside(self) -> bool:
        return len(self.measured) == 2 or self.measured[0] == self.wanted


@dataclass(frozen=True)
class Estimate:
    """A figure for the requirement: its value with its interval (a 95% interval, a capacity
    step's repeats, a breaking point's held-failed bracket), the runs it comes from, where on
    its axis it stands, the conditions it was measured in and the flags a reader must not
    miss."""

    value: float | None
    low: float | None = None
    high: float | None = None
    runs: tuple[str, ...] = ()
    basis: Basis | None = None
    conditions: tuple[tuple[str, float], ...] = ()
    flags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Check:
    """One criterion of the requirement for one server: its verdict, the estimate it rests
    on and, for a verdict other than MEETS, why (a word bench/report/advise.py explains)."""

    kind: str
    verdict: str
    estimate: Estimate | None = None
    why: str = ""
    note: str = ""


@dataclass
class ServerAdvice:
    server: str
    checks: list[Check] = field(default_factory=list)
    # What the operator should set and may expect, by kind ("threads", "startup_s", ...).
    figures: dict[str, Estimate] = field(default_factory=dict)
    missing: list[Missing] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        verdicts = {c.verdict for c in self.checks}
        return FAILS if FAILS in verdicts else UNDECIDED if UNDECIDED in verdicts else MEETS

    def check(self, kind: str) -> Check | None:
        return next((c for c in self.checks if c.kind == kind), None)

    def deciding(self) -> list[Missing]:
        """The missing measurements that could change the verdict: all of them; for a server
        that fell out, those of its failed checks, none when one of them is what its kind
        cannot do (serve signatures, be written live)."""
        if self.verdict != FAILS:
            return self.missing
        failed = [c for c in self.checks if c.verdict == FAILS]
        if any(c.kind not in _OVERTURN or c.why == "not written" for c in failed):
            return []  # what the server kind cannot do, no measurement changes
        kinds = set().union(*(_OVERTURN[c.kind] for c in failed))
        return [m for m in self.missing if m.kind in kinds]

    def rank_key(self) -> tuple[float, float]:
        """Most headroom first (its low end), then the lowest p99 at the peak."""
        headroom = self.check("headroom")
        p99 = self.check("p99")
        low = headroom.estimate.value if headroom and headroom.estimate else None
        at_peak = p99.estimate.value if p99 and p99.estimate else None
        return (-(low or 0.0), at_peak if at_peak is not None else math.inf)


@dataclass
class Advice:
    requirement: Requirement
    runs: list[str]
    bind: str
    machine: str | None
    servers: list[ServerAdvice]

    def by_verdict(self, verdict: str) -> list[ServerAdvice]:
        found = [s for s in self.servers if s.verdict == verdict]
        return sorted(found, key=ServerAdvice.rank_key) if verdict == MEETS else found

    def commands(self) -> list[tuple[Command, list[Missing]]]:
        """Every missing measurement's command, those that differ only in their servers
        merged into one, with the measurements each takes."""
        merged: dict[tuple, tuple[Command, list[Missing]]] = {}
        for server in self.servers:
            for missing in server.deciding():
                command = missing.command
                if command is None:
                    continue
                key = (command.name, command.options,
                       command.servers if command.one_server else ())
                if key in merged:
                    old, taken = merged[key]
                    servers = old.servers + tuple(s for s in command.servers
                                                  if s not in old.servers)
                    merged[key] = (Command(old.name, servers, old.options), [*taken, missing])
                else:
                    merged[key] = (command, [missing])
        return list(merged.values())


# ---------------------------------------------------------------- the runs read

def advise(catalogue: Catalogue, requirement: Requirement, *, bind: str,
           given: bool = False, servers: Sequence[str] | None = None,
           machine: str | None = None) -> Advice:
    """The advice over the catalogue's runs: every run of them (`given`: the user's own
    directories, which must agree in BIND and machine), or the committed runs of `bind` on
    one machine (`machine`: the one whose description contains it; default: the machine with
    the most of them). QPS and cost belong to the machine that measured them, so the figures
    of two machines never meet in one piece of advice."""
    runs = _usable_runs(catalogue, bind, given)
    if not given:
        runs = _runs_of_one_machine(catalogue, runs, machine)
    elif machine is not None:
        raise UserError("--machine chooses among the committed results; --results gives "
                        "runs of one machine already")
    evidence = Evidence(catalogue, runs)
    names = _servers(evidence, servers)
    return Advice(requirement, runs, _bind_of(catalogue, runs) or bind,
                  catalogue.provenance(runs[0]).machine if runs else None,
                  [ServerReview(evidence, requirement, name).advice() for name in names])


def _usable_runs(catalogue: Catalogue, bind: str, given: bool) -> list[str]:
    runs = []
    for run in catalogue.runs():
        try:
            made = catalogue.provenance(run)
        except UserError as exc:
            if given:
                raise UserError(f"{catalogue.paths[run]}: not a results directory "
                                f"this suite can read ({exc})") from None
            continue  # a committed directory of another format (fuzz's)
        if (made.command or "").split(" ")[0] not in _COMMANDS:
            continue
        if made.superseded_by is None and (given or _bind_version(made) in (bind, None)):
            runs.append(run)
    if not runs:
        raise UserError("no results directory holds a measurement advise reads (of "
                        f"{', '.join(_COMMANDS)}) on BIND {bind}")
    if given:
        _same_versions(catalogue, runs)
    return runs


def _runs_of_one_machine(catalogue: Catalogue, runs: Sequence[str],
                         wanted: str | None) -> list[str]:
    """The runs of one machine: the one `wanted` names (a part of its description, any
    case), else the one with the most runs; runs that recorded no machine are kept."""
    by_machine: dict[str, list[str]] = {}
    for run in runs:
        machine = catalogue.provenance(run).machine
        if machine is not None:
            by_machine.setdefault(machine, []).append(run)
    if not by_machine:
        return list(runs)
    if wanted is None:
        chosen = max(by_machine, key=lambda m: (len(by_machine[m]), m))
    else:
        matching = [m for m in by_machine if wanted.lower() in m.lower()]
        if len(matching) != 1:
            raise UserError(f"--machine {wanted!r}: names {len(matching)} of the machines of "
                            f"the committed results ({'; '.join(sorted(by_machine))}); name "
                            f"one")
        chosen = matching[0]
    return [run for run in runs if catalogue.provenance(run).machine in (chosen, None)]


def _bind_version(made: Provenance) -> str | None:
    found = _BIND_VERSION.search(made.bind or "")
    return None if found is None else found[1]


def _same_versions(catalogue: Catalogue, runs: Sequence[str]) -> None:
    """The user's runs agree in BIND and machine: figures of two of either are not one
    server's."""
    for what, of in (("BIND", _bind_version), ("machine", lambda m: m.machine)):
        seen: dict[str, str] = {}
        for run in runs:
            value = of(catalogue.provenance(run))
            if value is not None:
                seen.setdefault(value, run)
        if len(seen) > 1:
            (a, run_a), (b, run_b) = list(seen.items())[:2]
            raise UserError(f"results of different {what}s mixed: {run_a} ({a}) and {run_b} "
                            f"({b}); advise from one {what}'s results at a time")


def _bind_of(catalogue: Catalogue, runs: Sequence[str]) -> str | None:
    versions = {_bind_version(catalogue.provenance(run)) for run in runs} - {None}
    return next(iter(versions)) if len(versions) == 1 else None


def _servers(evidence: Evidence, wanted: Sequence[str] | None) -> list[str]:
    known = server_names()
    if wanted is not None:
        for name in wanted:
            if name not in known:
                raise UserError(f"unknown server {name!r} (known: {', '.join(known)})")
        return list(dict.fromkeys(wanted))
    measured = {f.server for run in evidence.runs for f in evidence.catalogue.figures(run)
                if f.server is not None and base_name(f.server) == f.server}
    return sorted((s for s in measured if s in known), key=report_order)


class Evidence:
    """The catalogue's figures of the runs the advice reads, by server and metric."""

    def __init__(self, catalogue: Catalogue, runs: Sequence[str]) -> None:
        self.catalogue = catalogue
        self.runs = list(runs)

    def provenance(self, run: str) -> Provenance:
        return self.catalogue.provenance(run)

    def find(self, metric: str, server: str, **where: str) -> list[Figure]:
        """The figures of every run read, newest run first."""
        found = []
        for run in sorted(self.runs, key=lambda r: self.provenance(r).date or "",
                          reverse=True):
            found += [f for f in self.catalogue.find(run, metric, server=server, **where)
                      if SUPERSEDED not in f.flags]
        return found

    def one(self, run: str, metric: str, **where: str) -> Figure | None:
        found = self.catalogue.find(run, metric, **where)
        return found[0] if len(found) == 1 else None

    def early(self, figure: Figure) -> frozenset[str]:
        """EARLY when the figure was measured before the rule: flagged so by the catalogue,
        or without an interval in a run that started before it."""
        before = BEFORE_ROUNDS in figure.flags or (
            figure.low is None and self.provenance(figure.run).before_the_rule())
        return frozenset({EARLY}) if before else frozenset()

    def flags(self, *figures: Figure | None) -> frozenset[str]:
        found: set[str] = set()
        for f in figures:
            if f is not None:
                found |= (f.flags - {BEFORE_ROUNDS, SUPERSEDED}) | self.early(f)
        return frozenset(found)


# ---------------------------------------------------------------- one server

@dataclass(frozen=True)
class Sweep:
    """One capacity sweep of the server: its bracket and the loads that held below it."""

    run: str
    threads: int
    zones: int | None
    rtt_ms: float
    held: Figure
    failed: Figure | None
    ended_by: str
    closed_loop: float | None
    held_loads: tuple[tuple[float, list[Figure], Figure], ...]  # offered, p99s, offered fig

    @property
    def lower_bound(self) -> bool:
        return self.ended_by in ("not offered", "held every step")


@dataclass(frozen=True)
class Point:
    """One measured point of a series: where on its axis, the figure there."""

    x: float
    value: float
    low: float | None
    high: float | None
    figures: tuple[Figure, ...]


class ServerReview:
    """Every check and figure of one server against the requirement."""

    def __init__(self, evidence: Evidence, requirement: Requirement, server: str) -> None:
        self.evidence = evidence
        self.req = requirement
        self.server = server
        self.kind = get_server(server)
        self.has_database = self.kind.loader().database.has_server
        self.result = ServerAdvice(server)
        # What the one capacity command this server needs must measure: its kinds (Missing)
        # and the options they add.
        self.sweep_kinds: list[str] = []
        self.sweep_options: dict[str, str] = {}

    def advice(self) -> ServerAdvice:
        sweep = self.nearest_sweep()
        self.settings(sweep)
        self.check_capacity(sweep)
        self.startup()
        self.closed_loop_at_size(sweep)
        if self.req.writes_per_s > 0:
            self.check_writes()
        if self.req.signed:
            self.check_signed()
        self.note_sweep(sweep)
        return self.result

    def note(self, kind: str, command: Command | None, no_command: str = "") -> None:
        self.result.missing.append(Missing(self.server, kind, command, no_command))

    def need_sweep(self, kind: str, **options: str) -> None:
        """A capacity sweep must measure `kind`, with these options (--name: value)."""
        self.sweep_kinds.append(kind)
        self.sweep_options.update({f"--{k.replace('_', '-')}": v for k, v in options.items()})

    def note_sweep(self, sweep: Sweep | None) -> None:
        """One capacity command for every sweep measurement the server lacks: at the
        requirement's zone count (with the threads and connections of the settings), and at
        the loads the checks need."""
        if not self.sweep_kinds:
            return
        threads = self.result.figures.get("threads")
        connections = self.result.figures.get("connections")
        if self.has_database and self.req.db_rtt_ms > 0:
            # capacity runs its database beside the server: the settings for there.
            threads = connections = None
        options = [("--threads", f"{threads.value:g}" if threads and threads.value
                    else str(sweep.threads if sweep else 1))]
        if connections is not None and connections.value:
            options.append(("--connections", f"{connections.value:g}"))
        if sweep is None or sweep.zones != self.req.zones:
            options.append(("--generate", str(self.req.zones)))
        options += sorted(self.sweep_options.items())
        command = Command("capacity", (self.server,), tuple(options))
        for kind in dict.fromkeys(self.sweep_kinds):
            self.note(kind, command)

    def conditions(self, zones: int | None, rtt: float | None = None,
                   threads: int | None = None) -> tuple[tuple[str, float], ...]:
        found: list[tuple[str, float]] = []
        if zones is not None:
            found.append(("zones", zones))
        if rtt is not None and self.has_database:
            found.append(("rtt_ms", rtt))
        if threads is not None:
            found.append(("threads", threads))
        return tuple(found)

    # --- capacity: headroom and p99 at the peak

    def sweeps(self) -> list[Sweep]:
        found = []
        for held in self.evidence.find("breaking.held_qps", self.server):
            found.append(self.sweep_of(held))
        return found

    def sweep_of(self, held: Figure) -> Sweep:
        run, threads = held.run, str(held.threads)
        made = self.evidence.provenance(run)
        failed = self.evidence.one(run, "breaking.failed_qps", server=self.server,
                                   threads=threads)
        ended = self.evidence.one(run, "breaking.ended_by", server=self.server,
                                  threads=threads)
        closed = self.evidence.one(run, "closed_loop_qps", server=self.server, threads=threads)
        loads = []
        for offered in self.evidence.catalogue.find(run, "step.offered_qps",
                                                    server=self.server, threads=threads):
            percent = offered.coordinate("percent") or ""
            outcome = self.evidence.one(run, "step.outcome", server=self.server,
                                        threads=threads, percent=percent)
            p99s = [f for f in self.evidence.catalogue.find(
                run, "step.p99_us", server=self.server, threads=threads, percent=percent)
                if f.number is not None]
            if outcome is not None and outcome.value == "held" and p99s and \
                    held.number is not None and offered.number is not None and \
                    offered.number <= held.number:
                loads.append((offered.number, p99s, offered))
        return Sweep(run, held.threads or 1, made.zones, made.db_rtt_ms or 0.0, held,
                     failed if failed is not None and failed.number is not None else None,
                     str(ended.value) if ended is not None else "",
                     closed.number if closed is not None else None,
                     tuple(sorted(loads, key=lambda load: load[0])))

    def nearest_sweep(self) -> Sweep | None:
        """The sweep nearest the requirement: in round trip (a server with a database
        server), then in data size; a decided bracket before a lower bound; the newest."""
        sweeps = self.sweeps()
        if not sweeps:
            return None

        def distance(s: Sweep) -> tuple[float, float, bool]:
            rtt = abs(s.rtt_ms - self.req.db_rtt_ms) if self.has_database else 0.0
            size = abs(math.log(s.zones / self.req.zones)) if s.zones else math.inf
            return (rtt, size, s.lower_bound)

        best = min(distance(s) for s in sweeps)
        return next(s for s in sweeps if distance(s) == best)  # newest first

    def check_capacity(self, sweep: Sweep | None) -> None:
        if sweep is None:
            self.result.checks.append(Check("headroom", UNDECIDED, why="unmeasured"))
            self.need_sweep(NO_SWEEP)
            return
        self.check_headroom(sweep)
        self.check_p99(sweep)
        if sweep.zones != self.req.zones:
            self.need_sweep(SWEEP_ZONES)
        if self.has_database and sweep.rtt_ms != self.req.db_rtt_ms:
            self.note(SWEEP_RTT, None, CAPACITY_NO_RTT)

    def check_headroom(self, sweep: Sweep) -> None:
        peak = self.req.peak_qps
        held = sweep.held.number
        failed = sweep.failed.number if sweep.failed is not None else None
        flags = self.evidence.flags(sweep.held, sweep.failed)
        if sweep.lower_bound:
            flags |= {LOWER_BOUND}
        estimate = Estimate(
            None if held is None else held / peak, None if held is None else held / peak,
            None if failed is None else failed / peak, (sweep.run,),
            conditions=self.conditions(sweep.zones, sweep.rtt_ms, sweep.threads), flags=flags)
        self.result.figures["breaking"] = Estimate(
            held, held, failed, (sweep.run,), conditions=estimate.conditions,
            flags=flags)
        if held is not None and peak <= held:
            self.result.checks.append(Check("headroom", MEETS, estimate))
        elif failed is not None and failed <= peak:
            self.result.checks.append(Check("headroom", FAILS, estimate, "past"))
        elif sweep.lower_bound:
            self.result.checks.append(Check("headroom", UNDECIDED, estimate, "lower bound"))
            self.need_sweep(SWEEP_BEYOND, listen="ADDRESS", load_from="ssh://HOST")
        else:
            self.result.checks.append(Check("headroom", UNDECIDED, estimate, "bracket"))
            self.need_sweep(SWEEP_BRACKET, steps=self.steps_around(sweep))

    def steps_around(self, sweep: Sweep) -> str:
        """--steps for the bracket's ends and the peak, in % of the sweep's closed loop."""
        closed = sweep.closed_loop or self.req.peak_qps
        rates = [sweep.held.number, self.req.peak_qps,
                 None if sweep.failed is None else sweep.failed.number]
        percents = {round(100 * q / closed) for q in rates if q}
        return ",".join(str(p) for p in sorted(percents) if p > 0)

    def check_p99(self, sweep: Sweep) -> None:
        """p99 at the peak: between the loads that held, in offered QPS; past the last one
        the headroom check has said what there is to say."""
        points = [Point(x, statistics.median(f.number for f in p99s) / 1000,
                        min(f.number for f in p99s) / 1000, max(f.number for f in p99s) / 1000,
                        (*p99s, offered))
                  for x, p99s, offered in sweep.held_loads]
        if not points or self.req.peak_qps > points[-1].x:
            return
        estimate = self.series_estimate(points, self.req.peak_qps, "QPS offered",
                                        self.conditions(sweep.zones, sweep.rtt_ms,
                                                        sweep.threads))
        check = self.limit_check("p99", estimate, self.req.p99_ms)
        if estimate.basis is None or not estimate.basis.inside or check.why == "straddles":
            # One load at exactly the peak, its p99 from the loaded-latency point's probes.
            self.need_sweep(P99_AT_PEAK, common_rate=f"{self.req.peak_qps:g}")
        self.result.checks.append(check)

    def limit_check(self, kind: str, estimate: Estimate, limit: float) -> Check:
        """Under the limit by the whole interval, over it by the whole interval, or
        undecided (the interval across it: more repeats decide)."""
        value = estimate.value
        low = estimate.low if estimate.low is not None else value
        high = estimate.high if estimate.high is not None else value
        if value is None or low is None or high is None:
            return Check(kind, UNDECIDED, estimate, "unmeasured")
        if high <= limit:
            return Check(kind, MEETS, estimate)
        if low > limit:
            return Check(kind, FAILS, estimate, "over")
        return Check(kind, UNDECIDED, estimate, "straddles")

    def series_estimate(self, points: Sequence[Point], x: float, axis: str,
                        conditions: tuple[tuple[str, float], ...] = ()) -> Estimate:
        """The series at x: the point there, a linear interpolation between the two around
        it, or the nearest point outside the measured range (its Basis says which)."""
        ordered = sorted(points, key=lambda p: p.x)
        exact = [p for p in ordered if p.x == x]
        if exact:
            return self.estimate_of(exact[0], Basis(axis, x, (x,)), conditions)
        below = [p for p in ordered if p.x < x]
        above = [p for p in ordered if p.x > x]
        if not below or not above:
            nearest = above[0] if not below else below[-1]
            return self.estimate_of(nearest, Basis(axis, x, (nearest.x,)), conditions)
        a, b = below[-1], above[0]
        share = (x - a.x) / (b.x - a.x)

        def between(u: float | None, v: float | None) -> float | None:
            return None if u is None or v is None else u + share * (v - u)

        return Estimate(between(a.value, b.value), between(a.low, b.low),
                        between(a.high, b.high),
                        tuple(dict.fromkeys(f.run for f in (*a.figures, *b.figures))),
                        Basis(axis, x, (a.x, b.x)), conditions,
                        self.evidence.flags(*a.figures, *b.figures))

    def estimate_of(self, point: Point, basis: Basis,
                    conditions: tuple[tuple[str, float], ...]) -> Estimate:
        return Estimate(point.value, point.low, point.high,
                        tuple(dict.fromkeys(f.run for f in point.figures)), basis, conditions,
                        self.evidence.flags(*point.figures))

    # --- settings: threads, connections, the store's cache

    def settings(self, sweep: Sweep | None) -> None:
        """Threads and connections: `tune`'s at the requirement's round trip; else the
        sweep's own, when it ran at that round trip (or the server has no database server);
        else tune's at the nearest round trip. At a round trip with no `tune` there, that
        measurement is missing."""
        tuned = self.tuned()
        on_point = tuned is not None and tuned[0].basis is not None and tuned[0].basis.inside
        sweep_here = sweep is not None and (not self.has_database
                                            or sweep.rtt_ms == self.req.db_rtt_ms)
        if tuned is not None and (on_point or not sweep_here):
            threads, connections, qps = tuned
            self.result.figures["threads"] = threads
            self.result.figures["connections"] = connections
            if qps is not None:
                self.result.figures["tuned_qps"] = qps
        elif sweep is not None:
            self.result.figures["threads"] = Estimate(
                sweep.threads, runs=(sweep.run,),
                conditions=self.conditions(sweep.zones, sweep.rtt_ms))
        if self.has_database and self.req.db_rtt_ms > 0 and not on_point:
            self.note(TUNE_RTT, *self.tune_command())
        self.cache()

    def tuned(self) -> tuple[Estimate, Estimate, Estimate | None] | None:
        """`tune`'s recommendation at the nearest round trip (the longer of two as near),
        from the run with the most cells there."""
        found = self.evidence.find("recommended.threads", self.server)
        if not found:
            return None
        rtts = {float(f.coordinate("rtt") or 0) for f in found}
        rtt = min(rtts, key=lambda r: (abs(r - self.req.db_rtt_ms), -r))
        runs = [f.run for f in found if float(f.coordinate("rtt") or 0) == rtt]
        run = max(runs, key=lambda r: len(self.evidence.catalogue.find(r, "qps")))
        threads = self.evidence.one(run, "recommended.threads", server=self.server)
        connections = self.evidence.one(run, "recommended.connections", server=self.server)
        if threads is None or connections is None:
            return None
        basis = Basis("round trip ms", self.req.db_rtt_ms, (rtt,))
        conditions = self.conditions(self.evidence.provenance(run).zones, rtt)

        def setting(f: Figure) -> Estimate:
            return Estimate(f.number, runs=(run,), basis=basis, conditions=conditions,
                            flags=self.evidence.flags(f))

        qps = self.evidence.one(run, "qps", server=self.server, threads=str(threads.value),
                                connections=str(connections.value))
        tuned_qps = None if qps is None else Estimate(
            qps.number, qps.low, qps.high, (run,),
            basis, conditions, self.evidence.flags(qps))
        return setting(threads), setting(connections), tuned_qps

    def tune_command(self) -> tuple[Command | None, str]:
        rtt = float(self.req.db_rtt_ms)
        if rtt.is_integer() and 1 <= rtt <= 5:
            return Command("tune", (self.server,), (("--db-host", "netns"),
                                                    ("--db-rtt", f"{rtt:g}"))), ""
        return None, TUNE_WHOLE_MS

    def cache(self) -> None:
        """The store's cache as `scale` configured it, and its hit ratio at the zone count
        (uniform mix: every zone asked for)."""
        sizes = self.zone_series("cache_mib", mix="uniform", shape="no")
        if sizes is None:
            return
        run, points = sizes
        self.result.figures["cache_mib"] = Estimate(points[0].value, runs=(run,),
                                                    flags=self.evidence.flags(*points[0].figures))
        hits = self.zone_series("cache_hit", run, mix="uniform", shape="no")
        if hits is not None:
            self.result.figures["cache_hit"] = self.series_estimate(hits[1], self.req.zones,
                                                                    "zones")

    # --- startup, memory and the closed loop at the zone count

    def startup(self) -> None:
        points = self.zone_series("startup_s")
        if not points:
            self.note(STARTUP_ZONES, self.startup_command())
            return
        run, series = points
        estimate = self.series_estimate(series, self.req.zones, "zones")
        self.result.figures["startup_s"] = estimate
        memory = self.zone_series("rss_mib", run)
        if memory:
            self.result.figures["rss_mib"] = self.series_estimate(memory[1], self.req.zones,
                                                                  "zones")
        if estimate.basis is not None and not estimate.basis.inside:
            self.note(STARTUP_ZONES, self.startup_command())

    def startup_command(self) -> Command:
        return Command("startup", (self.server,), (("--zones-counts", str(self.req.zones)),))

    def zone_series(self, metric: str, run: str | None = None,
                    **where: str) -> tuple[str, list[Point]] | None:
        """The metric against zones in one run (`run`, or the one whose zone counts bracket
        the requirement's, else the one nearest it; the newest among equals)."""
        by_run: dict[str, list[Point]] = {}
        for f in self.evidence.find(metric, self.server, **where):
            zones = f.coordinate("zones")
            if f.number is None or zones is None or (run is not None and f.run != run):
                continue
            by_run.setdefault(f.run, []).append(Point(int(zones), f.number, f.low, f.high,
                                                      (f,)))
        if not by_run:
            return None

        def distance(item: tuple[str, list[Point]]) -> float:
            xs = [p.x for p in item[1]]
            if min(xs) <= self.req.zones <= max(xs):
                return 0.0
            return min(abs(math.log(x / self.req.zones)) for x in xs)

        best = min(by_run.items(), key=distance)  # dicts keep the newest-first order
        return best

    def closed_loop_at_size(self, sweep: Sweep | None) -> None:
        """`scale`'s closed-loop QPS at the zone count (uniform mix), and its share of the
        QPS at the sweep's data size in the same run."""
        found = self.zone_series("qps", mix="uniform", shape="no")
        if not found:
            return
        run, points = found
        estimate = self.series_estimate(points, self.req.zones, "zones")
        self.result.figures["scale_qps"] = estimate
        if sweep is None or sweep.zones is None or estimate.value is None:
            return
        base = [p for p in points if p.x == sweep.zones]
        if base and base[0].value:
            self.result.figures["scale_share"] = Estimate(
                100 * estimate.value / base[0].value, runs=estimate.runs, basis=estimate.basis,
                conditions=self.conditions(sweep.zones), flags=estimate.flags)

    # --- writes

    def check_writes(self) -> None:
        found = self.writes_run()
        if found is None:
            self.result.checks.append(Check("writes", UNDECIDED, why="unmeasured"))
            self.note(WRITES_HERE, self.writes_command())
            return
        run, status = found
        if status is not None:
            reason = self.evidence.one(run, "status.reason", server=self.server)
            self.result.checks.append(Check(
                "writes", FAILS, Estimate(None, runs=(run,)), "not written",
                str(reason.value) if reason is not None and reason.value else str(status)))
            return
        self.writes_from(run)

    def writes_run(self) -> tuple[str, str | None] | None:
        """The `writes` run (straight into the store) whose writes reached the rate, then
        the one whose read load is nearest the peak; with the server's status when a run left
        it out (a store not written live)."""
        candidates = []
        for f in self.evidence.find("status", self.server, via="store"):
            candidates.append((2, 0.0, f.run, str(f.value)))
        for f in self.evidence.find("reads_offered", self.server, via="store"):
            reached = max((w.number for w in self.evidence.catalogue.find(
                f.run, "write_rate", server=self.server) if w.number is not None), default=0)
            load = abs(math.log((f.number or 1.0) / self.req.peak_qps))
            candidates.append((0 if reached >= self.req.writes_per_s else 1, load, f.run, None))
        if not candidates:
            return None
        _, _, run, status = min(candidates, key=lambda c: (c[0], c[1]))
        return run, status

    def writes_command(self) -> Command:
        """`writes` at the requirement: its write rate and the ceiling, reads at the peak, the
        zone count."""
        return Command("writes", (self.server,), (
            ("--rates", f"0,{self.req.writes_per_s:g},ceiling"),
            ("--read-qps", f"{self.req.peak_qps:g}"), ("--generate", str(self.req.zones))))

    def writes_from(self, run: str) -> None:
        """The writes the store took (a `ceiling` step: as fast as the writer went) against
        the rate, and at the rate the visibility, the reads' p99 and the CPU per read."""
        wanted = self.req.writes_per_s
        zones = self.evidence.provenance(run).zones
        offered = self.evidence.one(run, "reads_offered", server=self.server)
        reads = None if offered is None else offered.number
        conditions = (*self.conditions(zones),
                      *(() if reads is None else (("reads_per_s", reads),)))
        rates = {str(f.coordinate("rate")): f for f in self.evidence.catalogue.find(
            run, "write_rate", server=self.server) if f.number is not None}
        top = max(rates.values(), key=lambda f: f.number or 0.0)
        reached = Estimate(top.number, top.low, top.high, (run,),
                           conditions=conditions, flags=self.evidence.flags(top))
        self.result.figures["writes_reached"] = reached
        if (top.number or 0.0) < wanted:
            # Asked for the rate (or as fast as the writer goes) and short of it: fails; never
            # asked for as much: the run cannot say.
            asked = any(rate == "ceiling" or float(rate) >= wanted for rate in rates)
            self.result.checks.append(Check("writes", FAILS if asked else UNDECIDED,
                                            reached, "ceiling" if asked else "not asked"))
            off_point = not asked
        else:
            self.result.checks.append(Check("writes", MEETS, reached))
            self.at_write_rate(run, rates, conditions)
            off_point = any(e.basis is not None and not e.basis.inside
                            for k, e in self.result.figures.items() if k in _AT_WRITE_RATE)
        if off_point or zones != self.req.zones or reads != self.req.peak_qps:
            self.note(WRITES_HERE, self.writes_command())

    def at_write_rate(self, run: str, rates: dict[str, Figure],
                      conditions: tuple[tuple[str, float], ...]) -> None:
        series = {metric: self.rate_series(run, rates, metric) for metric in _AT_WRITE_RATE}
        for metric, points in series.items():
            if points:
                self.result.figures[metric] = self.series_estimate(
                    points, self.req.writes_per_s, "writes/s", conditions)
        idle = [p for p in series["cpu_per_read_us"] if p.x == 0]
        cost = self.result.figures.get("cpu_per_read_us")
        if idle and cost is not None and cost.value is not None and idle[0].value:
            self.result.figures["read_cost_share"] = Estimate(
                100 * cost.value / idle[0].value, runs=cost.runs, basis=cost.basis,
                conditions=conditions, flags=cost.flags)
        reads = self.result.figures.get("read_p99_ms")
        if reads is not None:
            self.result.checks.append(self.limit_check("read_p99", reads, self.req.p99_ms))

    def rate_series(self, run: str, rates: dict[str, Figure], metric: str) -> list[Point]:
        """The metric against the write rate each step achieved."""
        points = []
        for f in self.evidence.catalogue.find(run, metric, server=self.server):
            rate = rates.get(str(f.coordinate("rate")))
            if f.number is not None and rate is not None and rate.number is not None:
                points.append(Point(rate.number, f.number, f.low, f.high, (f, rate)))
        return points

    # --- signed zones

    def check_signed(self) -> None:
        refused = self.kind.cannot_serve_signed
        if refused is not None:
            self.result.checks.append(Check("signed", FAILS, why="refuses", note=refused))
            return
        if self.kind.serves_unsigned is not None:
            self.result.checks.append(Check("signed", FAILS, why="no signatures",
                                            note=self.kind.serves_unsigned))
            return
        self.result.checks.append(Check("signed", MEETS))
        signed = self.evidence.find("qps", self.server, variant="signed")
        if not signed:
            self.note(SIGNED_COST, Command("run", (self.server,), (("--signed", ""),)))
            return
        unsigned = self.evidence.one(signed[0].run, "qps", server=self.server,
                                     variant="unsigned", threads=str(signed[0].threads))
        if unsigned is not None and unsigned.number and signed[0].number is not None:
            flags = self.evidence.flags(signed[0], unsigned)
            self.result.figures["signed_share"] = Estimate(
                100 * signed[0].number / unsigned.number, runs=(signed[0].run,),
                conditions=self.conditions(self.evidence.provenance(signed[0].run).zones,
                                           threads=signed[0].threads), flags=flags)

