"""The "startup_scaling" section (`startup`): its tables and startup.png are drawn by
bench/report/run.py; here its plot's place in the report and how two runs' points compare,
matched by (server, zones)."""

from __future__ import annotations

from pathlib import Path

from bench.measure.results import Results
from bench.measure.startup import StartupPoint
from bench.report.comparing import Comparison, Figure, figure_rows, pairs, same_boot, status_row
from bench.report.run import render_startup_plot

FIGURES: list[Figure[StartupPoint]] = [
    Figure("startup (ms)", lambda p: p.startup_ms),
    Figure("server RSS (kB)", lambda p: p.server_rss_kb),
    Figure("store size (bytes)", lambda p: p.store_bytes),
    Figure("load (s)", lambda p: p.load_seconds),
    Figure("load (records/s)", lambda p: p.records_per_second, rate=True),
    Figure("loader RSS (kB)", lambda p: p.loader_rss_kb),
]


def render_startup_plots(results: Results, out_dir: Path) -> list[Path]:
    return [render_startup_plot(results, out_dir)] if results.startup_scaling else []


def compare_startup(a: Results, b: Results) -> Comparison:
    matched, only = pairs(a.startup_scaling, b.startup_scaling, lambda p: (p.server, p.zones),
                          lambda k: f"startup of {k[0]} with {k[1]} zones")
    boot = same_boot(a, b)
    rows: list[str] = []
    for (server, zones), old, new in matched:
        if old.status != "ok" or new.status != "ok":
            rows.append(status_row(server, f"{zones} zones", old.status, new.status))
        else:
            rows += figure_rows(server, f"{zones} zones", FIGURES, old, new, boot)
    return Comparison(rows, only)
