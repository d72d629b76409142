"""When a run in rounds starts every server afresh: the rounds' time split between more fresh
starts and more rounds after each, by where the variance of the cost per query lies
(docs/method/run.md, "Fresh starts or more rounds").

The cost per query, the run's first figure, has an interval whose independent unit is the
fresh start (stats.start_interval): the runs after one start share its state. With n starts
of m runs each, the variance of its log mean is sigma_b^2 / n + sigma_w^2 / (n m) (sigma_b^2
between starts, sigma_w^2 within one), and the rounds cost n (c_s + m c_r): c_s every
server's fresh start and warm-up, c_r a round. For a given budget the variance is least at
m* = sqrt((c_s / c_r) (sigma_w^2 / sigma_b^2)) runs per start (stats.runs_per_start): where
the starts differ, another start buys more than another round after the same one.

The schedule: the first start before the rounds, the second `restart_every` rounds later (the
profile's spacing: between-start variance needs two starts to be estimated). At every later
start, sigma_b^2 and sigma_w^2 of the log cost per query are estimated from every run so far,
pooled over the cells (stats.variance_components), m is chosen within [1, restart_every], and
the next start comes m rounds later. Every choice is a StartDecision, kept in results.json's
meta.rounds.starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from bench.measure import stats
from bench.measure.cells import Cell
from bench.measure.cost import run_costs, run_starts
from bench.measure.serial import Derived

# Starts chosen at the profile's spacing before m is chosen from the data.
FIXED_STARTS = 2


@dataclass(frozen=True)
class StartDecision:
    """A fresh start of every server before round `round` (0: the first, before the rounds)
    and the rounds until the next (`runs_per_start`), with what chose them: a start's and a
    round's expected seconds (c_s, c_r), the variance of the log cost per query between and
    within starts (sigma_b^2, sigma_w^2) from `runs` runs so far, and m* before it was clamped
    and made whole (None: no variance between starts). `why`: what set m where the data did
    not (None: the data did)."""

    round: int
    runs_per_start: int
    start_s: float
    round_s: float
    between: float | None = None
    within: float | None = None
    runs: int | None = None
    best: float | None = None
    why: str | None = None

    # The intraclass correlation, written beside the two variances for readers of the file.
    json_derived: ClassVar[Derived] = {"between_share": lambda d: d.between_share}

    @property
    def between_share(self) -> float | None:
        """sigma_b^2 / (sigma_b^2 + sigma_w^2); None where they were not estimated."""
        if self.between is None or self.within is None or self.between + self.within <= 0:
            return None
        return self.between / (self.between + self.within)


def log_costs_by_start(cell: Cell) -> list[list[float]]:
    """The log cost per query of the cell's runs, grouped by the fresh start each followed
    (in start order); none where its runs have no cost each."""
    costs = run_costs(cell)
    if costs is None:
        return []
    groups: dict[int, list[float]] = {}
    for cost, start in zip(costs, run_starts(cell), strict=True):
        groups.setdefault(start, []).append(math.log(cost))
    return [groups[start] for start in sorted(groups)]


def decide(round_index: int, earlier: int, cells: list[Cell], most: int, start_s: float,
           round_s: float) -> StartDecision:
    """The runs per start chosen at a fresh start before round `round_index`, after
    `earlier` starts, from the cells' runs so far (module docstring)."""
    if earlier < FIXED_STARTS:
        return StartDecision(round_index, most, start_s, round_s,
                             why=f"the profile's spacing for the first {FIXED_STARTS} starts")
    components = stats.variance_components([log_costs_by_start(c) for c in cells])
    if components is None:
        return StartDecision(round_index, most, start_s, round_s,
                             why="no cell has a cost per run after two starts: the "
                                 "profile's spacing")
    best, m = stats.runs_per_start(start_s, round_s, components, most)
    return StartDecision(round_index, m, start_s, round_s, components.between,
                         components.within, components.runs, best)


class StartSchedule:
    """The fresh starts of a run in rounds: those made, each with its choice of the rounds to
    the next, and those expected (later starts keeping the last choice)."""

    def __init__(self, most: int, start_s: float, round_s: float) -> None:
        self.most = most
        self.decisions = [decide(0, 0, [], most, start_s, round_s)]

    def starts_before(self, round_index: int) -> bool:
        """Does every server start afresh before round `round_index` (past rounds: did it;
        rounds ahead: will it, if later starts keep the last choice)? Round 0's start is the
        one before the rounds (in the cells' opening), not a round's."""
        last = self.decisions[-1]
        if round_index <= last.round:
            return round_index > 0 and any(d.round == round_index for d in self.decisions)
        return (round_index - last.round) % last.runs_per_start == 0

    def start(self, round_index: int, cells: list[Cell], start_s: float,
              round_s: float) -> StartDecision:
        """A fresh start before round `round_index`: the rounds to the next chosen from the
        cells' runs so far, and recorded."""
        decision = decide(round_index, len(self.decisions), cells, self.most, start_s, round_s)
        self.decisions.append(decision)
        return decision
