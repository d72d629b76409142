"""The cost rows of `run`'s tables and how two runs' cells are judged (bench/measure/cost.py
has the figures).

In the table: the cost per query (server + database, us) with its start-clustered interval
first, then its ratio to the reference measured next to it (the memory driver for a DLZ
driver's row, native BIND for the others), then QPS. The QPS ratios stay, below QPS: the stop
rule still waits for them, the committed runs and the documentation cite them, and a reader of
seed 003's table looks for them; but they divide two throughputs of a VM whose speed moves
from second to second, so they are no longer the row the table leads with.

In `compare`: each cell's cost per query, cost ratio, QPS and QPS ratios are judged with
stats.verdict: "changed", "the same" (within +-5%) or "undecided", with the shift B/A and its
95% interval. The verdict's independent unit is the fresh start (each side's runs averaged per
start, stats.start_means), as in the interval: runs after one start share its state, and a
test that took each run as independent would call a start's offset a change. A file without
per-run figures (before rounds) gets the plain change, not a verdict. Two runs on different
CPUs are not judged at all: their costs and rates belong to their machines.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.measure import accounting, stats
from bench.measure.cells import Cell
from bench.measure.cost import (
    AdjacentCost,
    MachineByStart,
    cost_per_query,
    machine_by_start,
    per_core,
    run_costs,
    run_starts,
)
from bench.measure.results import Results
from bench.measure.stats import Interval
from bench.report.comparing import DIFFERENT_BOOT, row
from bench.report.format import NONE, Notes, column_label, fmt_number, interval_text

COST_LABEL = "Cost us/query (server + db)"
DIFFERENT_CPU = "different CPU: not compared"


# ---------------------------------------------------------------- the table

def cost_text(cell: Cell) -> str:
    """The cost per query with its interval; the one figure over all runs where the file
    has no cost per run (the table's note says so)."""
    cost = cost_per_query(cell)
    if cost is None:
        return NONE
    if not cost.per_run:
        return fmt_number(cost.interval.estimate, 1)
    return interval_text(cost.interval, decimals=1, of="starts")


def cost_ratio_text(adjacent: AdjacentCost, cell: Cell, reference: str) -> str:
    """The cell's cost as a % of `reference`'s measured next to it, where `reference` is the
    row its cost is divided by ("100.0%" in the reference's own column); "–" otherwise."""
    if cell.server == reference and adjacent.reference(cell) is not None:
        return "100.0%"
    found = adjacent.ratio(cell)
    if found is None or found[0] != reference:
        return NONE
    return interval_text(found[1], 100, 1, "%", of="starts")


def per_core_of(cell: Cell) -> Interval | None:
    """The QPS one server core would answer at the cell's cost per query, from its runs (None
    where they have no cost each: loadgen.capacity_per_core is then the one figure)."""
    cost = cost_per_query(cell)
    return None if cost is None or not cost.per_run else per_core(cost.interval)


def cost_notes(cells: Sequence[Cell], notes: Notes) -> None:
    """Under a thread table: why a cost has no interval and no ratio (files before per-run
    CPU), and every run in which the machine, not the server, moved."""
    if any((c.status == "ok" and run_costs(c) is None
            and (cost := cost_per_query(c)) is not None and not cost.per_run) for c in cells):
        notes.add("Cost us/query without an interval: this file has one CPU figure over all of "
                  "a cell's runs, none per run (its runs were one block, not rounds), so no "
                  "interval and no cost ratio (no reference run next to each run)")
    machine = machine_by_start([c for c in cells if c.status == "ok"])
    if machine is not None:
        notes.add(machine_text(machine))
    fastest = accounting.fastest_clocks(where.cpus for c in cells for where in c.qps_rounds)
    for cell in cells:
        moved = [f"round {where.round + 1} ({', '.join(moves)})" for where in cell.qps_rounds
                 if (moves := accounting.machine_moves(where.cpus, fastest))]
        if moved:
            notes.add(f"{column_label(cell)}, {cell.threads} thread(s): the machine, not the "
                      f"server, moved in {len(moved)} of {len(cell.qps_rounds)} runs: "
                      + "; ".join(moved))


def machine_text(machine: MachineByStart) -> str:
    """The note on how the servers' costs moved together from start to start."""
    factors = ", ".join(f"{100 * (f - 1):+.1f}%" for f in machine.factors)
    return (f"Between fresh starts the {machine.servers} servers' per-start mean costs "
            f"correlated at {machine.correlation:.2f} (median of every pair): by start, "
            f"the servers' mean cost against their own average (+: the machine slower) was "
            f"{factors}. A cost's interval carries this; its share of the reference measured "
            f"beside it does not")


def cost_method(meta: dict) -> str:
    """The method paragraph's sentences on cost, and on what the figures belong to."""
    cpu = meta.get("cpu_model", "an unrecorded CPU")
    return ("The first rows are the cost per query: the CPU time of the server (named, or "
            "the server's process tree) and of its database server over each QPS run, in "
            "microseconds per answered query; the figure is the geometric mean of the runs "
            "with its 95% interval from a t interval over the fresh starts (the runs after one "
            "start share its state). Cost % of native and % of memory divide each run's cost "
            "by the geometric mean of the reference's runs just before and after it (the "
            "memory driver for a DLZ driver's row, native BIND for the others), with the same "
            "interval. QPS, cost and their ratios belong to the machine that measured them "
            f"({cpu}); instructions per query (`bench instructions`) are the figure that "
            "carries between machines.")


# ---------------------------------------------------------------- compare

def _units(values: Sequence[float], starts: Sequence[int]) -> list[float]:
    """The independent units of a side: one geometric mean per fresh start."""
    return stats.start_means(values, starts)


def verdict_cells(verdict: stats.Verdict) -> tuple[str, str]:
    """(the verdict, the shift B/A with its interval) for compare's change columns."""
    shift = verdict.shift
    text = f"shift {100 * (shift.ratio - 1):+.1f}%"
    if shift.low is None or shift.high is None:
        return verdict.outcome, f"{text} (no interval)"
    return verdict.outcome, (f"{text} [{100 * (shift.low - 1):+.1f}%, "
                             f"{100 * (shift.high - 1):+.1f}%]")


def judged_row(server: str, where: str, figure: str, a: float | None, b: float | None,
               judged: stats.Verdict | None, decimals: int | None = None,
               instead: str | None = None) -> str:
    """A row of compare's table whose change is a verdict (or `instead`, or the plain
    change where neither side has per-run values)."""
    if instead is not None or judged is None:
        return row(server, where, figure, a, b, decimals, instead)
    outcome, shift = verdict_cells(judged)
    return (f"| {server} | {where} | {figure} | {fmt_number(a, decimals)} "
            f"| {fmt_number(b, decimals)} | {outcome} | {shift} |")


def judge(a: Sequence[float] | None, a_starts: Sequence[int], b: Sequence[float] | None,
          b_starts: Sequence[int]) -> stats.Verdict | None:
    """The verdict on two sides' per-run values (None where either has none)."""
    if not a or not b:
        return None
    return stats.verdict(_units(a, a_starts), _units(b, b_starts))


def cost_verdict(old: Cell, new: Cell) -> stats.Verdict | None:
    return judge(run_costs(old), run_starts(old), run_costs(new), run_starts(new))


def _qps_runs(cell: Cell) -> list[float] | None:
    """The QPS of each run measured in rounds (None: not in rounds)."""
    if not cell.qps_rounds or len(cell.qps_rounds) != len(cell.qps_runs):
        return None
    values = [run.qps for run in cell.qps_runs]
    return values if all(v > 0 for v in values) else None


def qps_ratios(cell: Cell, ref: Cell | None) -> tuple[list[float], list[int]]:
    """The cell's round-paired QPS ratios to `ref` with the start of each (stats.paired_ratios,
    kept with their starts)."""
    if ref is None or ref is cell or _qps_runs(cell) is None or _qps_runs(ref) is None:
        return [], []
    theirs = ref.qps_by_round()
    pairs = [(run.qps / theirs[where.round], where.start)
             for where, run in zip(cell.qps_rounds, cell.qps_runs, strict=True)
             if theirs.get(where.round, 0) > 0 and run.qps > 0]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def other_cpu(a: Results, b: Results) -> str | None:
    """DIFFERENT_CPU where the two runs' CPU models differ, else None."""
    return None if a.meta.get("cpu_model") == b.meta.get("cpu_model") else DIFFERENT_CPU


def compare_cell(a: Results, b: Results, old: Cell, new: Cell, where: str,
                 boot: bool) -> list[str]:
    """The judged rows of a matched pair of "ok" cells: cost per query, its ratio and QPS."""
    apart = other_cpu(a, b)
    server = old.server
    old_cost, new_cost = cost_per_query(old), cost_per_query(new)
    rows = [judged_row(server, where, "cost us/query (server + db)",
                       None if old_cost is None else old_cost.interval.estimate,
                       None if new_cost is None else new_cost.interval.estimate,
                       cost_verdict(old, new), 1, apart)]
    ratio = cost_ratio_verdict(a, b, old, new)
    if ratio is not None:
        reference, mine, theirs, judged = ratio
        rows.append(judged_row(server, where, f"cost % of {reference}", 100 * mine,
                               100 * theirs, judged, 1, apart))
    qps_old, qps_new = old.qps_interval, new.qps_interval
    if qps_old is not None or qps_new is not None:
        judged = judge(_qps_runs(old), run_starts(old), _qps_runs(new), run_starts(new))
        rows.append(judged_row(server, where, "QPS median",
                               None if qps_old is None else qps_old.estimate,
                               None if qps_new is None else qps_new.estimate, judged, None,
                               apart or (None if boot else DIFFERENT_BOOT)))
    return rows


def cost_ratio_verdict(a: Results, b: Results, old: Cell, new: Cell
                       ) -> tuple[str, float, float, stats.Verdict | None] | None:
    """The cell's cost as a share of its adjacent reference's in each run (the same reference
    in both), with the verdict on the two runs' per-run shares: (reference, share in a,
    share in b, verdict); None where either run has no such share."""
    old_adjacent, new_adjacent = AdjacentCost(a.cells), AdjacentCost(b.cells)
    mine, theirs = old_adjacent.ratio(old), new_adjacent.ratio(new)
    if mine is None or theirs is None or mine[0] != theirs[0] or mine[1].low is None:
        return None
    ref_a, ref_b = old_adjacent.reference(old), new_adjacent.reference(new)
    judged = judge(old_adjacent.per_run(old, ref_a) if ref_a else None, run_starts(old),
                   new_adjacent.per_run(new, ref_b) if ref_b else None, run_starts(new))
    return mine[0], mine[1].estimate, theirs[1].estimate, judged


def cost_summary(a: Results, b: Results) -> list[str]:
    """compare's line on the cells: how many servers' cost per query is the same within
    +-5%, changed or undecided; empty without cells in both runs."""
    if not a.cells or not b.cells:
        return []
    if a.meta.get("cpu_model") != b.meta.get("cpu_model"):
        return [f"cost per query: not compared ({DIFFERENT_CPU.split(':')[0]}: "
                f"{a.meta.get('cpu_model')} and {b.meta.get('cpu_model')})", ""]
    theirs = {c.key: c for c in b.cells}
    pairs = [(old, theirs[old.key]) for old in a.cells
             if old.key in theirs and old.status == theirs[old.key].status == "ok"]
    outcomes = [judged.outcome for old, new in pairs
                if (judged := cost_verdict(old, new)) is not None]
    if not outcomes:
        return ["cost per query: no server has a cost per run in both runs (files before "
                "rounds): no verdict", ""]
    unit = "servers" if len({c.threads for c in a.cells}) == 1 else "cells (server, threads)"
    lines = [f"cost per query: {_outcome_counts(outcomes, unit)}"]
    ratios = [ratio[3].outcome for old, new in pairs
              if (ratio := cost_ratio_verdict(a, b, old, new)) is not None
              and ratio[3] is not None]
    if ratios:
        # The share of the reference measured beside it cancels what moved the whole
        # machine between the runs (the VM's speed), which the cost itself carries.
        lines.append(f"cost % of the adjacent reference: {_outcome_counts(ratios, unit)}")
    return [*lines, ""]


def _outcome_counts(outcomes: Sequence[str], unit: str) -> str:
    margin = f"+-{100 * stats.DEFAULT_MARGIN:g}%"
    return (f"{outcomes.count(stats.SAME)} of {len(outcomes)} {unit} the same within "
            f"{margin}, {outcomes.count(stats.CHANGED)} changed, "
            f"{outcomes.count(stats.UNDECIDED)} undecided")
