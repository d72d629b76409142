"""The flood phase's table (`run`/`capacity --flood RATE`): each traffic class on its own.

The normal traffic (the query file, held at a fixed rate) without and with a random-subdomain
flood beside it: its loss and p99 from the prober, as `capacity` steps give them; the flood's
own answered share from its dnsperf, never mixed into the normal traffic's figures.
"""

from __future__ import annotations

from bench.measure.results import Results
from bench.report.format import NONE, column_label, fmt_number, markdown_table


def _loss(step: dict) -> str:
    sent = step["run"]["queries_sent"]
    return f"{100 * (1 - step['answered_fraction']):.2f}%" if sent else NONE


def _p99(step: dict) -> str:
    return fmt_number(step["latency_us"].get("p99"))


def render_flood(results: Results) -> list[str]:
    """The table, or nothing when no cell ran the flood phase."""
    cells = [c for c in results.cells if c.flood is not None]
    if not cells:
        return []
    header = ["server", "threads", "normal rate (q/s)", "flood rate (q/s)",
              "normal loss without", "with flood", "normal p99 without (us)", "with flood",
              "flood answered", "flood offered (q/s)"]
    rows = []
    for cell in cells:
        flood = cell.flood or {}
        without, flooded = flood["without_flood"], flood["with_flood"]
        answered = flood.get("flood_answered_share")
        rows.append([column_label(cell), str(cell.threads),
                     fmt_number(flood["normal_target_qps"], 0),
                     fmt_number(flood["flood_rate_qps"], 0), _loss(without), _loss(flooded),
                     _p99(without), _p99(flooded),
                     NONE if answered is None else f"{100 * answered:.1f}%",
                     fmt_number(flood.get("flood_offered_qps"), 0)])
    return (["## Random-subdomain flood", "",
             "The normal traffic (the run's query file) held at half of each server's "
             "closed-loop maximum for one step, alone and then with a second dnsperf sending "
             "a random-subdomain flood (a new random label under one zone per query) at the "
             "flood rate. Normal loss and p99 are the normal traffic's (dnsperf's loss, the "
             "prober's p99, as capacity steps measure them); the flood's answered share is "
             "its own dnsperf's, over its whole run (docs/method/mixes.md).", ""]
            + markdown_table(header, rows) + [""])
