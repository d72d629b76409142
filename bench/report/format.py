"""What every report shares: how a number, a percentage, a missing figure and a table are
written, the footnotes under a table, and how a plot is finished and saved. One place, so
that results.md reads the same in every section."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.measure.cells import Cell
from bench.measure.stats import Interval

NONE = "–"
WARN = "⚠"
# A figure that cannot be measured for that server (Cell.unavailable says why): never a
# zero, never a bare dash.
NOT_AVAILABLE = "n/a"


def fmt_number(value: float | None, decimals: int | None = None) -> str:
    """Thousands separators; without `decimals`, small values keep a decimal or two so they
    are not all '0'."""
    if value is None:
        return NONE
    if decimals is None:
        decimals = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:,.{decimals}f}"


def interval_text(interval: Interval, scale: float = 1.0, decimals: int | None = 0,
                  unit: str = "", of: str = "runs") -> str:
    """"median [low–high]", or "median (n runs: no 95% interval)" (`of`: what was counted)."""
    text = fmt_number(scale * interval.estimate, decimals) + unit
    if interval.low is None or interval.high is None:
        return f"{text} ({interval.n} {of}: no 95% interval)"
    return (f"{text} [{fmt_number(scale * interval.low, decimals)}–"
            f"{fmt_number(scale * interval.high, decimals)}{unit}]")


def fmt_percent(value: float | None, reference: float | None) -> str:
    if value is None or not reference:
        return NONE
    return f"{100 * value / reference:,.1f}%"


def fmt_change(old: float | None, new: float | None) -> tuple[str, str]:
    """(absolute change, relative change) between two figures."""
    if old is None or new is None:
        return NONE, NONE
    delta = new - old
    relative = f"{100 * delta / old:+.1f}%" if old else NONE
    return f"{delta:+,.2f}", relative


def markdown_table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    """A Markdown table: the first column left-aligned, the figures right-aligned."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


class Notes:
    """Footnotes under a table: reasons for WRONG/FAILED cells and loss flags."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, text: str) -> int:
        self.lines.append(text)
        return len(self.lines)

    def render(self) -> list[str]:
        return [f"{i}. {text}" for i, text in enumerate(self.lines, 1)]


def column_label(cell: Cell) -> str:
    """The server, with its connection count when that differs from the thread count."""
    if cell.connections in (0, cell.threads):
        return cell.server
    return f"{cell.server} ({cell.connections} conn.)"


def status_text(cell: Cell, notes: Notes) -> str | None:
    """WRONG/FAILED with a footnote for a cell that has no valid figures, else None."""
    if cell.status == "ok":
        return None
    label = {"wrong": "WRONG", "n/a": "N/A"}.get(cell.status, "FAILED")
    reason = cell.error or "no reason recorded"
    if cell.status == "wrong":
        reason = f"{cell.mismatches} answers differ from native BIND's; {reason}"
    number = notes.add(f"{column_label(cell)}, {cell.threads} thread(s): {label}: {reason}")
    return f"{label} [{number}]"


def legend_or_note(ax: Any, fontsize: float | None = None) -> None:
    """A legend, or "no data" across an empty plot (a run whose every cell failed)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=fontsize)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)


def save_figure(fig: Any, path: Path) -> Path:
    """Lay the figure out, write it to path and free it (a report draws many)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
