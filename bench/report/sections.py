"""Every section of results.json with what the report does with it: its part of results.md,
its plots and its comparison (`compare A B`), keyed by the section's key in results.json
(bench/measure/results.py's SECTIONS, declared by each measurement's module). results.md and
`compare` go through this list, in its order, so a section cannot be left out of either;
tests/test_report.py holds it to SECTIONS.

Each section's functions live in its report module (bench/report/<section>.py); the
comparison sits beside the rendering because both read the same figures
(bench/report/comparing.py says more).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.measure.results import Results
from bench.report import (
    capacity,
    cells,
    faults,
    instructions,
    scale,
    signed,
    startup,
    tune,
    updates,
    writes,
)
from bench.report.comparing import Comparison
from bench.report.run import render_startup_scaling


@dataclass(frozen=True)
class SectionReport:
    """What the report does with one section; each function gives nothing for a file without
    the section."""

    key: str
    render: Callable[[Results], list[str]]
    plots: Callable[[Results, Path], list[Path]]
    compare: Callable[[Results, Results], Comparison]


def _no_plots(results: Results, out_dir: Path) -> list[Path]:
    return []


# In results.md's order: a `tune` file's grid first, where a run's tables would be.
REPORTS: tuple[SectionReport, ...] = (
    SectionReport("tuning", tune.render_tuning, tune.render_tune_plots, tune.compare_tuning),
    SectionReport("cells", cells.render_cells, cells.render_cells_plots, cells.compare_cells),
    SectionReport("capacity", capacity.render_capacity, capacity.render_capacity_plots,
                  capacity.compare_capacity),
    SectionReport("startup_scaling", render_startup_scaling, startup.render_startup_plots,
                  startup.compare_startup),
    SectionReport("scale", scale.render_scale, scale.render_scale_plot, scale.compare_scale),
    SectionReport("signed", signed.render_signed, signed.render_signed_plot,
                  signed.compare_signed),
    SectionReport("instructions", instructions.render_instructions, _no_plots,
                  instructions.compare_instructions),
    SectionReport("faults", faults.render_faults, faults.render_faults_plots,
                  faults.compare_faults),
    SectionReport("writes", writes.render_writes, writes.render_writes_plots,
                  writes.compare_writes),
    SectionReport("updates", updates.render_updates, updates.render_updates_plots,
                  updates.compare_updates),
)
