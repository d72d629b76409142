"""A series of `run`s over the same servers under different traffic (docs/method/mixes.md).

One column per run, labelled by what its traffic was (transport, NXDOMAIN share, names under
no zone, flood); one row per server. The figures that may be set side by side between runs:
each server's QPS as a percentage of native BIND's *in its own run* (the median of the
round-paired ratios, with its 95% interval), and the server's CPU per answered query (its own
and its database's, median of the runs with its interval), which a noisy machine moves far less
than QPS. A QPS is never divided by another run's (docs/method/run.md, the same-run rule):
how much a server loses under a mix is read from its share of native's in each run, and from
its cost per query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bench.measure.cells import Cell
from bench.measure.loadgen import server_cpus, server_us_interval
from bench.measure.results import Results
from bench.report.format import NONE, Notes, markdown_table, status_text
from bench.report.run import interval_text, ratio_text
from servers import REFERENCE, report_order


def run_label(results: Results) -> str:
    """What a run's traffic was: "udp, NXDOMAIN 0%", "tcp, NXDOMAIN 10%, flood 2,000 q/s"."""
    meta = results.meta
    mix = meta.get("traffic_mix") or {}
    parts = [str(meta.get("transport", "udp")),
             f"NXDOMAIN {mix.get('nxdomain_share_percent', 10):g}%"]
    unknown = mix.get("unknown_zone_share_percent") or 0
    if unknown:
        parts.append(f"no zone {unknown:g}%")
    flood = (meta.get("flood") or {}).get("rate_qps")
    if flood:
        parts.append(f"flood {flood:,.0f} q/s")
    return ", ".join(parts)


def _cell(results: Results, server: str) -> Cell | None:
    """The server's cell at the run's first thread count (a mix run measures one)."""
    threads = min((c.threads for c in results.cells), default=1)
    return next((c for c in results.cells_for(threads) if c.server == server), None)


def server_cost(cell: Cell) -> str:
    """The server's and its database's CPU per answered query, with its interval: it holds
    whatever limited the run's QPS."""
    interval = server_us_interval(cell)
    return NONE if interval is None else interval_text(interval, decimals=1)


def _table(runs: Sequence[Results], servers: list[str], notes: Notes,
           figure: Callable[[Cell, Results], str]) -> list[str]:
    rows = []
    for server in servers:
        row = [server]
        for results in runs:
            cell = _cell(results, server)
            row.append(NONE if cell is None else status_text(cell, notes) or figure(cell, results))
        rows.append(row)
    return markdown_table(["server", *(f"{i + 1}: {run_label(r)}" for i, r in enumerate(runs))],
                          rows)


def render_series(runs: Sequence[tuple[str, Results]]) -> list[str]:
    """The series' Markdown: its runs, then the two tables."""
    results = [r for _, r in runs]
    servers = sorted({c.server for r in results for c in r.cells}, key=report_order)
    notes = Notes()
    lines = ["# Runs side by side", "",
             "Each column is one run; a figure is never divided by another run's. % of native: "
             "the server's QPS over native BIND's in the same run, the median of the "
             "round-paired ratios with its 95% interval; '>= N (load generator)' where dnsperf, "
             "not the server, set the pace. Cost: the server's and its database's CPU per answered "
             "query (microseconds), the median of the runs with its interval: it holds whatever "
             "limited QPS.", ""]
    lines += markdown_table(
        ["run", "directory", "command", "boot", "commit"],
        [[str(i + 1), directory, f"`{r.meta.get('command', '')}` ({run_label(r)})",
          str(r.meta.get("boot_id", ""))[:8], str(r.meta.get("git_commit", ""))[:7]]
         for i, (directory, r) in enumerate(runs)])
    lines += ["", f"## QPS as % of {REFERENCE}'s in the same run", ""]
    lines += _table(results, servers, notes,
                    lambda c, r: ratio_text(c, _cell(r, REFERENCE), notes,
                                            server_cpus(r.meta), None))
    lines += ["", "## Server CPU per answered query (us)", ""]
    lines += _table(results, servers, notes, lambda c, r: server_cost(c))
    if notes.lines:
        lines += ["", *notes.render()]
    return lines
