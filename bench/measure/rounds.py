"""`run` in rounds: every store loaded and every cell's server started once, then rounds, each
running every cell's QPS measurement once, then the rest of each cell's phases.

The phases of a cell (runner.PHASES) are split at the QPS phase: the ones before it (startup,
the answers check, the warm-up, unloaded latency) run for each cell in turn, which stays
running; then the rounds; then the phases after it (loaded latency, the capacity sweep where
the profile has one, update visibility), again cell by cell. A round runs the cells in the
order stats.round_order gives (reversed every other round); before round `restart_every`
each store's server and every server over it start afresh, so each cell is measured over two
starts at least, and again after as many rounds as starts.StartSchedule chooses at each start
from where the variance of the cost per query lies (between starts or within one). After every
start, warm-up runs of `steady_s` continue until two in a row are within STEADY of each other
(runs in later rounds need none: nothing evicts the small data set from memory between
rounds). After each round the cells' QPS intervals and ratios and their costs per query are
recomputed and saved, and stats.StopRule says whether another round runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from base.errors import UserError
from bench.load import prober
from bench.load.dnsperf import DnsperfRun
from bench.measure import accounting, stats
from bench.measure.cells import Cell, FreshStart, QpsSummary, RoundRun
from bench.measure.cost import cost_per_query
from bench.measure.loadgen import generator_limit
from bench.measure.progress import StepProgress
from bench.measure.results import Results, save_results
from bench.measure.runner import (
    Measuring,
    Phase,
    Profile,
    Rounds,
    Runner,
    Setup,
    pin_processes,
)
from bench.measure.serial import to_json
from bench.measure.serving import LoadedStore, loaded_store
from bench.measure.starts import StartSchedule
from servers import DLZ_CEILING, REFERENCE, ServerKind, base_name

# Two warm-up runs in a row within 10% of each other: the warm-up is over. In the committed
# quick runs (3 runs of 4 s each per cell) the median spread between runs of one cell was 3-11%
# on this VM, and the first run was the lowest in 47% of cells (33% by chance).
STEADY = 0.10

# The plan's figures (seconds) for what the profile does not time itself; the progress line
# scales them by how long the finished steps really took. Measured orders of magnitude:
# loading 1,000 zones takes 0.3-0.8 s (docs/results/startup-2026-11-21), a server answers for
# every zone 0.04-0.2 s after exec; a private PostgreSQL, MariaDB or slapd is initialised and
# started in seconds.
STORE_SETUP_S = 3.0        # a store's files written and loaded
DATABASE_START_S = 10.0    # a private database server initialised and started, besides
RUN_OVERHEAD_S = 0.5       # dnsperf's start and exit, the CPU meters, around each run
RESTART_S = 2.0            # the server stopped and started again, every zone answering
DATABASE_RESTART_S = 3.0   # a database server stopped and started again
STEADY_RUNS_EXPECTED = 3   # warm-up runs after a fresh start (2 at least)
# dnsperf prints the responses of every second of a round's run (DnsperfRun.interval_qps): a
# dip inside a run shows there, where the run's one QPS hides it.
PER_SECOND = ("-S", "1")


def steady_warmup_s(rounds: Rounds) -> float:
    return STEADY_RUNS_EXPECTED * (rounds.steady_s + RUN_OVERHEAD_S)


def is_steady(qps: Sequence[float]) -> bool:
    """Are the last two warm-up runs within STEADY of each other?"""
    return len(qps) >= 2 and abs(qps[-1] - qps[-2]) <= STEADY * qps[-2]


# Whether every server starts afresh before a round (its index): Rounds.restarts_before, the
# profile's spacing, or StartSchedule.starts_before, the spacing a run chose.
StartsBefore = Callable[[int], bool]


def start_seconds(rounds: Rounds, cells: int, db_stores: int) -> float:
    """Expected seconds of a fresh start of every server of `cells` cells, `db_stores` of
    whose stores have a database server: each server started afresh and warmed up, each
    database server restarted."""
    return cells * (RESTART_S + steady_warmup_s(rounds)) + db_stores * DATABASE_RESTART_S


def plain_round_seconds(rounds: Rounds, cells: int) -> float:
    """Expected seconds of a round without a fresh start: a run per cell."""
    return cells * (rounds.run_s + RUN_OVERHEAD_S)


def round_seconds(rounds: Rounds, index: int, cells: int, db_stores: int,
                  starts_before: StartsBefore | None = None) -> float:
    """Expected seconds of round `index` over `cells` cells, `db_stores` of whose stores have
    a database server: a run per cell, after a fresh start where `starts_before` (the
    profile's spacing unless given) has one."""
    seconds = plain_round_seconds(rounds, cells)
    if (starts_before or rounds.restarts_before)(index):
        seconds += start_seconds(rounds, cells, db_stores)
    return seconds


def round_pace(rounds: Rounds, done: int, elapsed_s: float, cells: int, db_stores: int,
               starts_before: StartsBefore | None = None) -> float:
    """How long the `done` rounds run took (`elapsed_s`) over their expected seconds: what the
    expected seconds of a round ahead are scaled by (1 before any round)."""
    if not done:
        return 1.0
    expected = sum(round_seconds(rounds, index, cells, db_stores, starts_before)
                   for index in range(done))
    return elapsed_s / expected


def next_round_seconds(rounds: Rounds, done: int, elapsed_s: float, cells: int, db_stores: int,
                       starts_before: StartsBefore) -> float:
    """Expected seconds of the round after the `done` ones, which took `elapsed_s`: its plan,
    a fresh start included where `starts_before` has one, at their pace (whether it fits in
    the budget: stats.StopRule)."""
    return (round_pace(rounds, done, elapsed_s, cells, db_stores, starts_before)
            * round_seconds(rounds, done, cells, db_stores, starts_before))


def rounds_ahead(rounds: Rounds, done: int, elapsed_s: float, cells: int, db_stores: int,
                 starts_before: StartsBefore | None = None) -> list[float]:
    """Expected seconds of the rounds still to run after `done` rounds took `elapsed_s`, for a
    run the stop rule let go on: as many as fit in the budget, each round's expected seconds
    at the pace of the rounds run (round_pace; a round after a fresh start takes longer), one
    at least and up to the minimum, at most the profile's most."""
    pace = round_pace(rounds, done, elapsed_s, cells, db_stores, starts_before)
    ahead: list[float] = []
    ends_s = elapsed_s
    for index in range(done, rounds.max_rounds):
        seconds = round_seconds(rounds, index, cells, db_stores, starts_before)
        if len(ahead) >= max(rounds.min_rounds - done, 1) and \
                ends_s + pace * seconds > rounds.budget_s:
            break
        ahead.append(seconds)
        ends_s += pace * seconds
    return ahead


def planned_rounds(rounds: Rounds, cells: int, db_stores: int,
                   starts_before: StartsBefore | None = None) -> list[float]:
    """Expected seconds of each round the profile's budget allows, with fresh starts where
    `starts_before` has them (the profile's spacing unless given): the minimum always, then as
    many as fit."""
    plan: list[float] = []
    for index in range(rounds.max_rounds):
        seconds = round_seconds(rounds, index, cells, db_stores, starts_before)
        if index >= rounds.min_rounds and sum(plan) + seconds > rounds.budget_s:
            break
        plan.append(seconds)
    return plan


@dataclass(frozen=True)
class Plan:
    """The expected seconds of a run in rounds, step by step, and what they add up to."""

    stores: list[float]
    opening: list[float]    # the phases before QPS, cell after cell
    rounds: list[float]
    closing: list[float]    # the phases after QPS, cell after cell

    opening_kinds: list[str]  # each opening step's phase
    closing_kinds: list[str]

    @property
    def steps(self) -> list[float]:
        return [*self.stores, *self.opening, *self.rounds, *self.closing]

    @property
    def kinds(self) -> list[str]:
        """Each step's kind, whose pace scales only its own kind's estimate (StepProgress)."""
        return (["store"] * len(self.stores) + self.opening_kinds
                + ["round"] * len(self.rounds) + self.closing_kinds)

    @property
    def seconds(self) -> float:
        return sum(self.steps)


def plan_of(profile: Profile, opening: Sequence[Phase], closing: Sequence[Phase],
            servers: Sequence[ServerKind], threads: Sequence[int],
            starts_before: StartsBefore | None = None) -> Plan:
    """The plan of measuring `servers` at `threads` in rounds with these phases, with fresh
    starts where `starts_before` has them (the profile's spacing unless given: the schedule
    before the run chooses its own, which only the budget bounds)."""
    stores = distinct_stores(servers)
    db_stores = sum(1 for server in stores if server.loader().database.has_server)
    cells = len(servers) * len(threads)
    return Plan(
        stores=[STORE_SETUP_S + (DATABASE_START_S if s.loader().database.has_server else 0.0)
                for s in stores],
        opening=[phase.expected_s(profile) for phase in opening] * cells,
        rounds=planned_rounds(profile.rounds, cells, db_stores, starts_before),
        closing=[phase.expected_s(profile) for phase in closing] * cells,
        opening_kinds=[phase.label for phase in opening] * cells,
        closing_kinds=[phase.label for phase in closing] * cells)


def distinct_stores(servers: Sequence[ServerKind]) -> list[ServerKind]:
    """The first server over each store: servers over one store (bdb-btree and bdb-hash, ...)
    share its loaded data."""
    first: dict[str, ServerKind] = {}
    for server in servers:
        first.setdefault(server.loader().name, server)
    return list(first.values())


class RoundsRunner(Runner):
    """`run`: QPS in interleaved rounds (module docstring); a --target server, measured alone,
    one cell at a time as Runner does."""

    def __init__(self, profile: Profile, setup: Setup, results: Results,
                 phases: Sequence[Phase] | None = None) -> None:
        super().__init__(profile, setup, results, phases)
        if setup.target is not None:
            return  # measured alone, one cell as Runner does: no rounds to plan
        self.opening, self.closing = split_at_qps(self.phases)
        self.servers = [setup.reference, *setup.servers]
        self.plan = plan_of(profile, self.opening, self.closing, self.servers, setup.threads)
        self.progress = StepProgress(self.plan.steps, kinds=self.plan.kinds)

    def run(self) -> Results:
        if self.setup.target is not None:
            return super().run()
        rounds = self.profile.rounds
        print(f"expected duration: at most about {self.plan.seconds / 60:.0f} min (rounds: "
              f"{rounds.min_rounds} at least, then until every ratio and cost is within "
              f"+-{100 * rounds.target:g}% or {rounds.budget_s / 60:g} min of rounds have "
              "passed)", file=sys.stderr, flush=True)
        self.results.meta["server_cpus"] = (None if self.server_cpus is None
                                            else len(self.server_cpus.split(",")))
        self.results.prober_floor = prober.measure_floor(self.profile.probes,
                                                          cpu_list=self.load_cpus)
        with contextlib.ExitStack() as stack:
            opened: list[Measuring] = []
            try:
                opened = self.open_cells(self.load_stores(stack))
                running = list(opened)
                self.measure_rounds(running)
                for m in opened:
                    if any(m is r for r in running):
                        self.close_cell(m)
                    else:  # failed in a round
                        self.progress.skip(len(self.closing))
            finally:
                for m in opened:
                    m.server.stop()
                save_results(self.results, self.setup.out_dir)
        return self.results

    # --- before the rounds ------------------------------------------------------------------

    def load_stores(self, stack: contextlib.ExitStack) -> dict[str, LoadedStore | str]:
        """Each store loaded once, kept until the run ends: loader name -> the loaded store,
        or why it would not start or load."""
        loaded: dict[str, LoadedStore | str] = {}
        for server in distinct_stores(self.servers):
            name = server.loader().name
            self.progress.step(f"loading the {name} store")
            try:
                loaded[name] = stack.enter_context(loaded_store(
                    server, self.setup.stream, self.setup.run_dir,
                    store_urls=self.setup.store_urls))
            except UserError as exc:
                loaded[name] = str(exc)
        return loaded

    def open_cells(self, stores: dict[str, LoadedStore | str]) -> list[Measuring]:
        """Every cell started and taken through the phases before QPS; the ones still "ok"
        keep running for the rounds. Every cell is recorded here, its figures filled in
        later."""
        running = []
        for kind in self.servers:
            store = stores[kind.loader().name]
            for threads in self.setup.threads:
                cell = Cell(kind.name, threads, self._connections(threads))
                self._record(cell)
                if isinstance(store, str):
                    cell.status, cell.error = "failed", store
                    self.progress.skip(len(self.opening))
                    continue
                if self.not_applicable(kind, cell):
                    self.progress.skip(len(self.opening))
                    continue
                loaded = dataclasses.replace(store, server=kind)
                server = self.build(loaded, threads, cell.connections)
                m = Measuring(loaded, server, cell)
                if self.run_phases(m, self.opening, _label(m)):
                    running.append(m)
                else:
                    server.stop()
        save_results(self.results, self.setup.out_dir)
        return running

    def warm_up_until_steady(self, m: Measuring) -> None:
        """The first start's warm-up (the phase in place of Runner.warm_up)."""
        m.cell.starts.append(self.warm_start(m, 0, m.cell.startup_ms))

    def warm_start(self, m: Measuring, round_index: int, startup_ms: float | None) -> FreshStart:
        """Warm-up runs after a fresh start until steady (is_steady), at most steady_max_runs."""
        rounds = self.profile.rounds
        runs: list[DnsperfRun] = []
        while len(runs) < rounds.steady_max_runs and not is_steady([r.qps for r in runs]):
            runs.append(self.dnsperf(m.server, rounds.steady_s))
        return FreshStart(round_index, startup_ms, runs, is_steady([r.qps for r in runs]))

    # --- the rounds ---------------------------------------------------------------------------

    def measure_rounds(self, running: list[Measuring]) -> None:
        rounds = self.profile.rounds
        rule = rounds.stop_rule()
        db_stores = sum(1 for s in distinct_stores([m.loaded.server for m in running])
                        if s.loader().database.has_server)
        schedule = StartSchedule(rounds.restart_every,
                                 start_seconds(rounds, len(running), db_stores),
                                 plain_round_seconds(rounds, len(running)))
        planned = len(self.plan.rounds)
        began = time.monotonic()
        done, reason = 0, "no cell to measure"
        checks: list[list[stats.Watched]] = []
        while running:
            self.progress.step(f"round {done + 1} (at most {done + planned}): "
                               f"{len(running)} cells")
            planned -= 1
            fresh = schedule.starts_before(done)
            if fresh:
                schedule.start(done, [m.cell for m in running],
                               start_seconds(rounds, len(running), db_stores),
                               plain_round_seconds(rounds, len(running)))
            self.run_round(running, done, fresh)
            done += 1
            checks.append(self.update_figures(running))
            save_results(self.results, self.setup.out_dir)
            elapsed = time.monotonic() - began
            print(f"round {done}: {widest_text(checks[-1], rounds.target)}", file=sys.stderr,
                  flush=True)
            stop = rule.reason_to_stop(done, checks, elapsed, next_round_seconds(
                rounds, done, elapsed, len(running), db_stores, schedule.starts_before))
            if stop is not None:
                reason = stop
                break
            # The rounds still ahead at the pace of the ones run: the progress line's "left".
            ahead = rounds_ahead(rounds, done, elapsed, len(running), db_stores,
                                 schedule.starts_before)
            self.progress.replace_next(planned, ahead)
            planned = len(ahead)
        self.progress.skip(planned)
        self.results.meta["rounds"] = rounds_meta(rounds, done, reason, checks, schedule)
        self.results.meta["calibration"] = calibration(self.results.cells)

    def run_round(self, running: list[Measuring], index: int, fresh: bool) -> None:
        """Every running cell's QPS run of round `index`, after a fresh start of every store
        when `fresh` (each store at its first cell's turn)."""
        restarted: set[str] = set()
        for m in stats.round_order(list(running), index):
            if not any(m is r for r in running):  # failed at its store's fresh start
                continue
            store = m.loaded.loader.name
            if fresh and store not in restarted:
                restarted.add(store)
                group = [c for c in running if c.loaded.loader.name == store]
                try:
                    self.fresh_start(group, index)
                except UserError as exc:
                    for c in group:
                        self.drop(running, c, exc)
                    continue
            try:
                self.round_run(m, index)
            except UserError as exc:
                self.drop(running, m, exc)

    def fresh_start(self, group: list[Measuring], index: int) -> None:
        """The store's server and every server over it started afresh, each warmed up."""
        for m in group:
            m.server.stop()
        group[0].loaded.restart_database()
        pin_processes(group[0].loaded.database_pids(), self.server_cpus)
        for m in group:
            m.server.start()
            startup_ms = m.server.wait_answers(m.loaded.last_zone, "SOA",
                                               timeout=self.profile.startup_timeout_s) * 1000
            pin_processes(m.server.pids(), self.server_cpus)
            self.wait_all_zones(m.server)
            m.cell.starts.append(self.warm_start(m, index, startup_ms))

    def round_run(self, m: Measuring, index: int) -> None:
        """One QPS run of the cell, with the CPU its server used during it (user and system
        apart), its span and every CPU's time over it, and dnsperf's responses per second."""
        has_db = m.loaded.accounts_database
        with accounting.MemorySampler(m.loaded.database_pids()) as db_mem:
            metered_run(self, m, self.profile.rounds.run_s, index, len(m.cell.starts) - 1,
                        extra=PER_SECOND)
        m.cell.peak_rss_kb = {
            "server": max(accounting.peak_rss_kb(m.server.pids()),
                          m.cell.peak_rss_kb.get("server") or 0),
            "db": max(db_mem.peak_pss_kb, m.cell.peak_rss_kb.get("db") or 0) if has_db else None}

    def drop(self, running: list[Measuring], m: Measuring, exc: UserError) -> None:
        """A cell that failed in a round: stopped, kept with the runs it has, out of the rest."""
        m.cell.status, m.cell.error = "failed", str(exc)
        m.server.stop()
        running[:] = [r for r in running if r is not m]

    def update_figures(self, running: list[Measuring]) -> list[stats.Watched]:
        """Every cell's QPS interval, CPU per query and ratios from the rounds so far: the
        ratios and the costs per query the stop rule watches."""
        for m in running:
            set_qps_figures(m.cell)
        cells = [m.cell for m in running]
        return [*update_ratios(cells, self.profile.rounds.target,
                               self.results.meta.get("server_cpus")), *watched_costs(cells)]

    # --- after the rounds ---------------------------------------------------------------------

    def close_cell(self, m: Measuring) -> None:
        try:
            self.run_phases(m, self.closing, _label(m))
        finally:
            m.server.stop()
            save_results(self.results, self.setup.out_dir)


def metered_run(runner: Runner, m: Measuring, seconds: float, round_index: int, start: int,
                extra: Sequence[str] = ()) -> None:
    """One QPS run of the cell appended with where it stood (its round, the fresh start it
    followed) and the CPU its server and database used during it (user and system apart),
    its span and every CPU's time over it: the run's cost per query."""
    has_db = m.loaded.accounts_database
    server_cpu = accounting.CpuMeter(m.server.pids())
    db_cpu = accounting.CpuMeter(m.loaded.database_pids())
    machine = accounting.MachineMeter()
    with machine, server_cpu, db_cpu:
        run = runner.dnsperf(m.server, seconds, extra=extra)
    m.cell.qps_runs.append(run)
    m.cell.qps_rounds.append(RoundRun(
        round_index, start, server_cpu.seconds, db_cpu.seconds if has_db else None,
        began_s=machine.began_s, ended_s=machine.ended_s, server_user_s=server_cpu.user,
        server_system_s=server_cpu.system, db_user_s=db_cpu.user if has_db else None,
        db_system_s=db_cpu.system if has_db else None, cpus=machine.cpus))


def set_qps_figures(cell: Cell) -> None:
    """The cell's QPS median and interval, and CPU per answered query, over its runs."""
    cell.qps = QpsSummary.from_runs(cell.qps_runs)
    answered = sum(r.queries_completed for r in cell.qps_runs)
    db = [r.db_cpu_s for r in cell.qps_rounds]
    cell.cpu_us_per_query = {
        "server": accounting.us_per_query(sum(r.server_cpu_s or 0.0 for r in cell.qps_rounds),
                                         answered),
        "db": None if None in db else accounting.us_per_query(sum(db), answered),
        "dnsperf": Runner.dnsperf_cpu(cell)}


def update_ratios(cells: list[Cell], target: float,
                  cpus: int | None) -> list[stats.Watched]:
    """Each cell's ratio to native BIND's and to the memory driver's QPS at its thread count,
    and a row on another BIND's (NAME@VERSION) to its own row on the run's BIND, from the
    rounds both ran in, with whether it met `target`; every ratio for the stop rule, those
    between cells the load generator limited (`cpus`: the server's pinned CPUs) marked not
    waited for, with why: their figures cannot be ranked anyway."""
    watched: list[stats.Watched] = []
    for cell in cells:
        for reference in dict.fromkeys((REFERENCE, DLZ_CEILING, base_name(cell.server))):
            ref = next((c for c in cells if c.server == reference
                        and c.threads == cell.threads), None)
            if ref is None or ref is cell:
                continue
            ratio = stats.ratio_interval(cell.qps_by_round(), ref.qps_by_round())
            if ratio is None:
                continue
            cell.ratios[reference] = ratio
            cell.ratio_target_met[reference] = ratio.meets(target)
            limited = [c.server for c in (cell, ref) if generator_limit(c, cpus).bound]
            watched.append(stats.Watched(
                f"{cell.server}/{reference} at {cell.threads} thread(s)", ratio,
                f"the load generator limits {' and '.join(limited)} at {cell.threads} "
                "thread(s)" if limited else None))
    return watched


def watched_costs(cells: list[Cell]) -> list[stats.Watched]:
    """Each cell's cost per query with its interval over fresh starts, for the stop rule: the
    run's first figure, whose interval a QPS ratio's does not bound (a ratio can meet the
    target after two starts, where the cost's t interval over two starts is still too wide to
    place it). Its figure holds where the load generator limits the QPS: waited for there
    too; not for a cell whose runs have no cost each (a run that answered nothing)."""
    watched = []
    for cell in cells:
        name = f"{cell.server} cost per query at {cell.threads} thread(s)"
        cost = cost_per_query(cell)
        if cost is None or not cost.per_run:
            watched.append(stats.Watched(name, None, "a run without a cost of its own",
                                         stats.COST))
        else:
            watched.append(stats.Watched(name, cost.interval, figure=stats.COST))
    return watched


def rounds_meta(rounds: Rounds, done: int, reason: str, checks: list[list[stats.Watched]],
                schedule: StartSchedule) -> dict:
    """results.json's meta.rounds: how the rounds ran and why they ended, and every fresh
    start with the rounds it chose to the next (starts.StartDecision; files before the
    schedule have none, and started afresh every restart_every rounds)."""
    return {
        "done": done, "stopped": reason, "order": "ABBA (reversed every other round)",
        "min_rounds": rounds.min_rounds, "max_rounds": rounds.max_rounds,
        "budget_s": rounds.budget_s, "target": rounds.target,
        "restart_every": rounds.restart_every, "run_s": rounds.run_s,
        "steady_s": rounds.steady_s, "steady_within": STEADY,
        "checks_in_a_row": stats.CHECKS_IN_A_ROW,
        "not_waited_for": [f"{w.name}: {w.not_waited_because}"
                           for w in (checks[-1] if checks else [])
                           if w.not_waited_because is not None],
        "starts": to_json(schedule.decisions)}


def calibration(cells: list[Cell]) -> dict | None:
    """Native BIND's QPS in the first and the last round (at its first thread count): how far
    the machine drifted over the run."""
    native = next((c for c in sorted(cells, key=lambda c: c.threads)
                   if c.server == REFERENCE and c.qps_rounds), None)
    if native is None:
        return None
    by_round = native.qps_by_round()
    first, last = by_round[min(by_round)], by_round[max(by_round)]
    return {"threads": native.threads, "first_round_qps": first, "last_round_qps": last,
            "drift": last / first - 1 if first else None}


def widest_text(watched: Sequence[stats.Watched], target: float) -> str:
    """The progress line's word on the figures the stop rule waits for: for the ratios, the
    widest interval's half-width against the target, how many have no interval yet (too few
    rounds), and how many it does not wait for; then the same of the costs per query, where
    the rule watches them."""
    ratios = [w for w in watched if w.figure == stats.RATIO]
    costs = [w for w in watched if w.figure == stats.COST]
    waited = [r.interval for r in ratios if r.not_waited_because is None]
    skipped = len(ratios) - len(waited)
    if not waited:
        text = "no ratio to wait for"
    else:
        text = _widest(waited, "widest ratio interval", "no interval yet")
        text += f" (target +-{100 * target:g}%)"
    if skipped:
        text += f", {skipped} of {len(ratios)} not waited for (load generator)"
    if costs:
        text += "; cost per query: " + _widest(
            [c.interval for c in costs if c.not_waited_because is None], "widest interval",
            "no interval yet")
    return text


def _widest(intervals: Sequence[stats.Interval | None], widest: str, none_yet: str) -> str:
    """'<widest> +-10.0%, 2 of 4 without one yet' of the intervals, `none_yet` in place of the
    first part while none has one."""
    widths = [width for i in intervals if i is not None and (width := i.half_width) is not None]
    text = f"{widest} +-{100 * max(widths):.1f}%" if widths else none_yet
    missing = len(intervals) - len(widths)
    if missing:
        text += f", {missing} of {len(intervals)} without one yet"
    return text


def split_at_qps(phases: Sequence[Phase]) -> tuple[list[Phase], list[Phase]]:
    """The phases before Runner.measure_qps (the first warm-up made a steady one) and after."""
    runs: list[Callable] = [p.run for p in phases]
    if Runner.measure_qps not in runs:
        raise ValueError("a run in rounds needs the QPS phase")
    at = runs.index(Runner.measure_qps)
    opening = [dataclasses.replace(p, run=RoundsRunner.warm_up_until_steady,
                                   expected_s=lambda pr: steady_warmup_s(pr.rounds))
               if p.run is Runner.warm_up else p for p in phases[:at]]
    return opening, list(phases[at + 1:])


def _label(m: Measuring) -> str:
    """How the progress line names a cell."""
    return f"{m.cell.server} threads={m.cell.threads}"
