"""`run`'s sections of results.md and its plots, the tables in the layout of seed 003 (the
BIND-DLZ "Performance Tests" page, ../shared/seeds/003_b0923ef81a1e32b7.txt).

Main table, one per thread count, as in 003_b0923ef81a1e32b7.txt: rows QPS, Loaded latency,
Unloaded latency, Startup; one column per server, native BIND and the in-memory reference
first. QPS is the median of the measured runs with their min–max spread; "% of native" and
"% of memory" compare medians of the same results file (same machine, same session).

A cell whose server gave wrong answers or failed shows WRONG or FAILED in every row, never a
number, with the reason listed under the table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.load.dnsperf import DnsperfRun
from bench.load.prober import LatencyStats
from bench.measure.cells import Cell
from bench.measure.cost import AdjacentCost, split_per_query
from bench.measure.loadgen import (
    GENERATOR_OFF,
    GENERATOR_ON,
    SERVER_BUSY_OFF,
    SERVER_IDLE_ON,
    capacity_per_core,
    core_use,
    generator_limit,
    server_cpus,
    startup_interval,
)
from bench.measure.metadata import METADATA_KEYS, NOT_INSTALLED, UNKNOWN
from bench.measure.results import SECTIONS, Results
from bench.measure.starts import FIXED_STARTS
from bench.measure.startup import StartupPoint
from bench.measure.stats import Interval, median_interval
from bench.report.cost import (
    COST_LABEL,
    cost_method,
    cost_notes,
    cost_ratio_text,
    cost_text,
    per_core_of,
)
from bench.report.format import (
    NONE,
    NOT_AVAILABLE,
    WARN,
    Notes,
    column_label,
    fmt_number,
    fmt_percent,
    interval_text,
    legend_or_note,
    markdown_table,
    save_figure,
    status_text,
)
from bench.report.style import server_style
from servers import (
    BIND_MARK,
    DLZ_CEILING,
    REFERENCE,
    base_name,
    group_of,
    report_order,
    software_keys,
)

# Each version string names its program, except Python's. These are in every results file's
# header, as the first ones recorded them ("KEY: unknown" when one is missing); the other
# servers' software (servers.software_keys) is shown when the file has it, since results from
# before those servers were rows have none.
_VERSION_KEYS = ("bind", "postgresql", "mariadb", "slapd", "berkeley_db", "dnsperf")


# ---------------------------------------------------------------- status and flags

class Unavailable:
    """"n/a [k]" for a figure a cell could not measure; each reason once in the notes."""

    def __init__(self, notes: Notes) -> None:
        self.notes = notes
        self.numbers: dict[tuple[str, int, str], int] = {}

    def text(self, cell: Cell, key: str) -> str | None:
        """The marker for cell's figure `key`, or None when the figure was measurable."""
        reason = cell.unavailable.get(key)
        if reason is None:
            return None
        return f"{NOT_AVAILABLE} [{self.number(cell, reason)}]"

    def number(self, cell: Cell, reason: str) -> int:
        key = (column_label(cell), cell.threads, reason)
        if key not in self.numbers:
            self.numbers[key] = self.notes.add(f"{column_label(cell)}, {cell.threads} "
                                               f"thread(s): {NOT_AVAILABLE}: {reason}")
        return self.numbers[key]


def lossy_runs(cell: Cell, threshold: float) -> list[tuple[int, DnsperfRun]]:
    """Measured QPS runs (1-based index) that lost more than `threshold` of their queries."""
    return [(i, run) for i, run in enumerate(cell.qps_runs, 1)
            if run.loss_fraction > threshold]


def latency_loss(stats: LatencyStats | None) -> float:
    if stats is None or stats.count + stats.lost == 0:
        return 0.0
    return stats.lost / (stats.count + stats.lost)


# ---------------------------------------------------------------- header

def render_header(results: Results) -> list[str]:
    meta = results.meta
    lines = ["# dlzbench results", ""]
    commit = str(meta.get("git_commit", "unknown"))
    dirty = " (uncommitted changes)" if meta.get("git_dirty") else ""
    lines.append(f"Measured {meta.get('date', 'at an unknown date')}, "
                 f"repository commit `{commit[:12]}`{dirty}.")
    lines.append("")
    memory = meta.get("memory_kb")
    memory_text = f"{int(memory) / 1048576:.1f} GiB RAM" if memory else "unknown RAM"
    lines.append(f"**Machine:** {meta.get('cpu_model', 'unknown CPU')}, "
                 f"{meta.get('cpu_count', '?')} logical CPUs ({meta.get('cpu_usable', '?')} "
                 f"usable), {memory_text}; {meta.get('os', 'unknown OS')}, kernel "
                 f"{meta.get('kernel', '?')} ({meta.get('machine', '?')}).")
    lines.append("")
    keys = [*_VERSION_KEYS,
            *(key for key in software_keys() if key not in _VERSION_KEYS and key in meta)]
    versions = [f"{key}: {meta[key]}" if meta.get(key) in (NOT_INSTALLED, UNKNOWN)
                else str(meta.get(key, f"{key}: unknown")) for key in keys]
    versions.append(f"Python {meta.get('python', 'unknown')}")
    # Version strings may hold "<id:...>", which markdown would take for an HTML tag.
    lines.append("**Versions:** " + "; ".join(versions).replace("<", "&lt;") + ".")
    lines.append("")
    parameters = {k: v for k, v in meta.items() if k not in (*METADATA_KEYS, "added_runs")}
    if parameters:
        lines.append("**Parameters:**")
        lines.append("")
        lines += [f"- {key}: {_param_text(value)}" for key, value in parameters.items()]
        lines.append("")
    lines += _added_runs(meta.get("added_runs", []))
    lines += _same_run(meta)
    if has_run_tables(results):
        lines += render_method(results)
    return lines


def _same_run(meta: dict) -> list[str]:
    """The boot the run measured on and native BIND's drift over it (runs in rounds)."""
    calibration = meta.get("calibration")
    if not calibration:
        return []
    drift = calibration.get("drift")
    drift_text = "" if drift is None else f" ({100 * drift:+.1f}%)"
    first = fmt_number(calibration["first_round_qps"], 0)
    last = fmt_number(calibration["last_round_qps"], 0)
    boot = str(meta.get("boot_id", UNKNOWN))[:8]
    return [f"**Same run:** every ratio below divides figures of this run only (boot "
            f"`{boot}`). Calibration: native BIND at {calibration['threads']} thread(s) "
            f"answered {first} QPS in the first round and {last} in the last{drift_text}.", ""]


def _added_runs(runs: list[dict]) -> list[str]:
    """Points measured later into the same results (`startup --add-to`), one line each."""
    if not runs:
        return []
    lines = ["**Points added by later runs**:", ""]
    for run in runs:
        dirty = " (uncommitted changes)" if run.get("git_dirty") else ""
        mixes = f", {_param_text(run['mixes'])} mixes" if run.get("mixes") else ""
        # "drivers": what runs added before the suite called them servers (to 2026-11-25) wrote
        servers = run.get("servers", run.get("drivers", []))
        lines.append(f"- {run.get('date')}, commit `{str(run.get('git_commit'))[:12]}`{dirty}: "
                     f"{run.get('command', 'startup')} of {_param_text(servers)} "
                     f"at {_param_text(run.get('zone_counts', []))} zones of "
                     f"{_param_text(run.get('records_per_zone'))} records (seed "
                     f"{run.get('seed')}){mixes}; {_differences_text(run)}")
    return [*lines, ""]


def _differences_text(run: dict) -> str:
    """What the added run's versions and machine were, against the first run's."""
    if "differs" not in run:  # recorded before added runs kept their metadata
        return "its versions and machine were not recorded"
    if not run["differs"]:
        return "same versions and machine"
    boot = "different boot: not divided; " if "boot_id" in run["differs"] else ""
    return boot + "differs: " + ", ".join(f"{key} {_param_text(value)}"
                                   for key, value in run["differs"].items())


def _param_text(value: object) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _qps_method(meta: dict) -> str:
    rounds = meta.get("rounds")
    if rounds is None:  # one block of runs per cell, before rounds
        return (f"QPS is the median of {meta.get('runs', 'R')} dnsperf runs of "
                f"{meta.get('duration', 'D')} s each, after a discarded warm-up run; min–max of "
                "those runs in parentheses.")
    return (f"QPS was measured in {rounds['done']} rounds ({rounds['stopped']}): each round ran "
            f"every cell once for {rounds['run_s']:g} s, in an order reversed every other round, "
            f"{_restarts_text(rounds)} and "
            f"warmed up until two {rounds['steady_s']:g}-s runs in a row were within "
            f"{100 * rounds['steady_within']:g}%. QPS is the median of a cell's runs with its 95% "
            "interval in brackets (distribution-free, from the runs' order statistics, taking "
            "the runs as independent; none with fewer than 6 runs); QPS % of native and QPS % "
            "of memory are the median of the per-round ratios with their interval, and a ratio "
            "whose interval is wider than "
            f"+-{100 * rounds['target']:g}% says so. '>= N (load generator)': in most of the "
            f"cell's runs dnsperf used {GENERATOR_ON:g} of its core or more, or the pinned "
            f"server less than {SERVER_IDLE_ON:g} of its own (a run in between keeps the "
            f"previous run's mark: it clears only under {GENERATOR_OFF:g} and at "
            f"{SERVER_BUSY_OFF:g} or more), so N is the client's limit, not the server's: not "
            "ranked; its cost per query still holds.")


def _restarts_text(rounds: dict) -> str:
    """Where every server started afresh: every restart_every rounds (files before the run
    chose its starts), or where the run's schedule put them, with what chose each spacing
    (meta.rounds.starts: bench/measure/starts.py)."""
    starts = rounds.get("starts")
    every = rounds["restart_every"]
    if starts is None:
        return f"every server started afresh before every {every}th round"
    at = _and_list([str(d["round"] + 1) for d in starts])
    chosen = starts[FIXED_STARTS:]
    if not chosen:
        return (f"every server started afresh before round{'s' if len(starts) > 1 else ''} "
                f"{at} (the profile's spacing, {every} rounds: the rounds ended before a start "
                "chose its own)")
    last = chosen[-1]
    return (f"every server started afresh before rounds {at} (the first {FIXED_STARTS} starts "
            f"{every} rounds apart; at each later start, the rounds to the next m = "
            f"√((c_s / c_r) × (σ_w² / σ_b²)) within 1–{every}: σ_b² and σ_w² the variance of "
            "the log cost per query between starts and within one over the runs so far, c_s a "
            f"fresh start's and c_r a round's expected seconds ({last['start_s']:g} and "
            f"{last['round_s']:g} s); chosen: {_and_list([_choice_text(d) for d in chosen])})")


def _choice_text(decision: dict) -> str:
    """'2 (between-start share 0.31)': one start's choice of the rounds to the next, and what
    set it."""
    if decision.get("why"):
        why = decision["why"]
    elif not decision.get("between"):
        why = "no variance between starts"
    else:
        why = f"between-start share {decision['between_share']:.2f}"
    return f"{decision['runs_per_start']} ({why})"


def _and_list(items: list[str]) -> str:
    """'1, 6 and 11'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def render_method(results: Results) -> list[str]:
    meta = results.meta
    lines = [cost_method(meta), "", _qps_method(meta) + " Latency is the "
             "mean of single queries sent one at a time by the prober, with the server idle "
             "(Unloaded) or held at its maximum by dnsperf (Closed-loop loaded, a secondary row: "
             "with dnsperf keeping its queries outstanding it is about their number over the "
             "QPS, so it restates QPS; latency at fixed offered rates is `capacity`'s), in "
             "microseconds. "
             "Percentiles are nearest-rank."]
    floor = results.prober_floor
    if floor is not None and floor.count:
        lines.append("")
        lines.append(f"Prober floor (its own round trip to an echo responder on loopback, "
                     f"{floor.count} queries): mean {fmt_number(floor.mean_us)} us, p50 "
                     f"{fmt_number(floor.p50_us)} us, p99 {fmt_number(floor.p99_us)} us, max "
                     f"{fmt_number(floor.max_us)} us. "
                     + ("Measured here; the latencies below were measured from the load "
                        f"host {results.meta['load_from'][0]['url']}."
                        if results.meta.get("load_from") else
                        "Every latency below includes it."))
    lines.append("")
    return lines


# ---------------------------------------------------------------- main table

def _figure(interval: Interval | None, single: float | None, decimals: int | None = None,
            of: str = "runs") -> str:
    """A figure with its interval when it has repeats, else the one figure (files written
    before the repeats, cells not measured in rounds)."""
    if interval is None:
        return fmt_number(single, decimals)
    return interval_text(interval, decimals=1 if decimals is None else decimals, of=of)


def _qps_text(cell: Cell, threshold: float, notes: Notes, cpus: int | None) -> str:
    q = cell.qps
    if cell.qps_rounds and cell.qps_interval is not None:
        text = interval_text(cell.qps_interval)
    else:
        text = fmt_number(q.median, 0)
        if q.min is not None and q.max is not None and len(cell.qps_runs) > 1:
            text += f" ({fmt_number(q.min, 0)}–{fmt_number(q.max, 0)})"
    if q.median is not None and generator_limit(cell, cpus).bound:
        text = f">= {text} ({generator_text(cell, cpus)})"
    lossy = lossy_runs(cell, threshold)
    if lossy:
        detail = ", ".join(f"run {i} lost {100 * run.loss_fraction:.1f}%" for i, run in lossy)
        number = notes.add(f"{column_label(cell)}, {cell.threads} thread(s): {detail} of its "
                           f"queries (threshold {100 * threshold:g}%)")
        text += f" {WARN}[{number}]"
    return text


def generator_text(cell: Cell, cpus: int | None) -> str:
    """'load generator', or 'load generator in 4 of 6 runs' when not all of the cell's runs
    were its."""
    limit = generator_limit(cell, cpus)
    if limit.limited == limit.runs:
        return "load generator"
    return f"load generator in {limit.limited} of {limit.runs} runs"


def _latency_text(stats: LatencyStats | None, cell: Cell, kind: str, threshold: float,
                  notes: Notes) -> str:
    if stats is None:
        return NONE
    text = fmt_number(stats.mean_us)
    loss = latency_loss(stats)
    if loss > threshold:
        number = notes.add(f"{column_label(cell)}, {cell.threads} thread(s): {kind} probe "
                           f"lost {stats.lost} of {stats.count + stats.lost} queries")
        text += f" {WARN}[{number}]"
    return text


def _reference(results: Results, server: str, threads: int) -> Cell | None:
    ref = results.cell(server, threads)
    return ref if ref is not None and ref.status == "ok" else None


def ratio_text(cell: Cell, ref: Cell | None, notes: Notes, cpus: int | None,
                target: float | None) -> str:
    """The cell's QPS over the reference's: the round-paired ratio with its interval, or
    (files before rounds) the ratio of the medians; bounded where the load generator limited
    either side."""
    if ref is None:
        return NONE
    if ref is cell:
        return "100.0%"
    ratio = cell.ratios.get(ref.server)
    text = (interval_text(ratio, 100, 1, "%") if ratio is not None
            else fmt_percent(cell.qps.median, ref.qps.median))
    if text == NONE:
        return text
    mine, theirs = (generator_limit(c, cpus).bound for c in (cell, ref))
    if mine and theirs:
        return f"{NOT_AVAILABLE} (load generator on both)"
    if mine or theirs:
        text = f"{'>=' if mine else '<='} {text} ({generator_text(cell if mine else ref, cpus)})"
    if cell.ratio_target_met.get(ref.server) is False and target is not None:
        number = notes.add(f"{column_label(cell)}, {cell.threads} thread(s): its ratio to "
                           f"{ref.server}'s interval is wider than the +-{100 * target:g}% "
                           "target: the rounds ended first")
        text += f" [{number}]"
    return text


def _run_bind(results: Results) -> str:
    """The run's own BIND, as its metadata names it ("BIND 9.18.41-1~deb12u1-Debian")."""
    line = str(results.meta.get("bind", ""))
    return " ".join(line.split()[:2]) if line.startswith("BIND ") else "the run's BIND"


def _own_row(results: Results, cell: Cell) -> Cell | None:
    """For a row on another BIND (NAME@VERSION), NAME's cell at its thread count; for NAME
    itself, itself when such a row was measured beside it; otherwise none."""
    base = base_name(cell.server)
    if base != cell.server:
        return _reference(results, base, cell.threads)
    paired = any(base_name(c.server) == base and c.server != base
                 for c in results.cells_for(cell.threads))
    return cell if paired else None


def _cost_of_own_row(adjacent: AdjacentCost, cell: Cell, own: Cell | None) -> str:
    """A row on another BIND: its cost as a % of its own row's on the run's BIND, run by run
    against that row's adjacent runs ("100.0%" for the row itself)."""
    if own is None:
        return NONE
    if own is cell:
        return "100.0%"
    interval = adjacent.ratio_to(cell, own)
    return NONE if interval is None else interval_text(interval, 100, 1, "%", of="starts")


def render_thread_table(results: Results, threads: int) -> list[str]:
    cells = results.cells_for(threads)
    threshold = results.loss_threshold
    notes = Notes()
    statuses = {id(c): status_text(c, notes) for c in cells}
    unavailable = Unavailable(notes)
    reference = _reference(results, REFERENCE, threads)
    ceiling = _reference(results, DLZ_CEILING, threads)
    cpus = server_cpus(results.meta)
    target = (results.meta.get("rounds") or {}).get("target")

    def row(label: str, figure: Callable[[Cell], str]) -> list[str]:
        return [label] + [statuses[id(c)] or figure(c) for c in cells]

    adjacent = AdjacentCost(results.cells)
    rows = [
        row(COST_LABEL, lambda c: unavailable.text(c, "cpu_us_per_query.server") or cost_text(c)),
        *(row(f"Cost % of {name}", lambda c, name=name: unavailable.text(
            c, "cpu_us_per_query.server") or cost_ratio_text(adjacent, c, name))
          for name in (REFERENCE, DLZ_CEILING)),
        row("QPS", lambda c: _qps_text(c, threshold, notes, cpus)),
        row(f"QPS % of {REFERENCE}", lambda c: ratio_text(c, reference, notes, cpus, target)),
        row(f"QPS % of {DLZ_CEILING}", lambda c: ratio_text(c, ceiling, notes, cpus, target)),
        *([row(f"QPS % of its row on {_run_bind(results)}",
               lambda c: ratio_text(c, _own_row(results, c), notes, cpus, target)),
           row(f"Cost % of its row on {_run_bind(results)}",
               lambda c: _cost_of_own_row(adjacent, c, _own_row(results, c)))]
          if any(BIND_MARK in c.server for c in cells) else []),
        row("QPS per server core", lambda c: unavailable.text(c, "cpu_us_per_query.server")
            or _figure(per_core_of(c), capacity_per_core(c), 0, of="starts")),
        row("Closed-loop loaded (us)", lambda c: unavailable.text(c, "latency_loaded")
            or _latency_text(c.latency_loaded, c, "loaded", threshold, notes)),
        row("Unloaded (us)", lambda c: unavailable.text(c, "latency_unloaded")
            or _latency_text(c.latency_unloaded, c, "unloaded", threshold, notes)),
        row("Startup (ms)", lambda c: unavailable.text(c, "startup_ms")
            or _figure(startup_interval(c), c.startup_ms, of="starts")),
        row("Update visible (ms)", lambda c: unavailable.text(c, "update_visibility_ms")
            or _figure(median_interval(c.update_visibility_runs_ms), c.update_visibility_ms,
                       of="updates")),
    ]
    for c in cells:  # answers are checked before anything is timed: no row of their own
        if "mismatches" in c.unavailable and statuses[id(c)] is None:
            unavailable.number(c, f"answers {c.unavailable['mismatches']}")
    cost_notes(cells, notes)
    # 0: a server whose connections to its data are not the suite's (a --target server).
    connections = sorted({c.connections for c in cells} - {0})
    title = f"## {threads} thread{'s' if threads != 1 else ''}"
    if connections:
        title += f" (database connections: {', '.join(map(str, connections))})"
    lines = [title, ""]
    lines += [render_groups(cells), ""]
    lines += markdown_table([f"threads {threads}"] + [column_label(c) for c in cells], rows)
    if notes.lines:
        lines += [""] + notes.render()
    return lines + [""]


def render_groups(cells: list[Cell]) -> str:
    """The columns' groups, left to right (docs/reference.md: the question each group answers); a
    server the suite did not start with the address it was measured at."""
    groups: dict[str, list[str]] = {}
    for cell in cells:
        if cell.target is not None:
            groups.setdefault("--target", []).append(f"{cell.server} at {cell.target}")
        else:
            groups.setdefault(group_of(cell.server) or "other", []).append(cell.server)
    return "Columns: " + " | ".join(f"{group}: {', '.join(names)}"
                                    for group, names in groups.items())


# ---------------------------------------------------------------- detail tables

def _percentiles(stats: LatencyStats | None, missing: str = NONE) -> list[str]:
    """p50, p90, p99, max and lost; `missing` in each when not measured (n/a: could not be)."""
    if stats is None:
        return [missing] * 5
    return [fmt_number(v) for v in (stats.p50_us, stats.p90_us, stats.p99_us, stats.max_us)] \
        + [str(stats.lost)]


def _na(cell: Cell, key: str) -> str:
    """n/a for a latency the cell could not measure (the thread table's notes say why)."""
    return NOT_AVAILABLE if key in cell.unavailable else NONE


def render_percentiles(results: Results) -> list[str]:
    header = ["server", "threads", "unloaded p50", "p90", "p99", "max", "lost",
              "loaded p50", "p90", "p99", "max", "lost"]
    rows = []
    for threads in results.thread_counts():
        for c in results.cells_for(threads):
            if c.status != "ok":
                rows.append([column_label(c), str(threads)] + [c.status.upper()] * 10)
            else:
                rows.append([column_label(c), str(threads)]
                            + _percentiles(c.latency_unloaded, _na(c, "latency_unloaded"))
                            + _percentiles(c.latency_loaded, _na(c, "latency_loaded")))
    return ["## Latency percentiles (us)", ""] + markdown_table(header, rows) + [""]


def render_costs(results: Results) -> list[str]:
    header = ["server", "threads", "CPU us/query server", "db", "dnsperf",
              "QPS per server core", "dnsperf cores", "server cores",
              "peak RSS server (kB)", "db (kB)"]
    cpus = server_cpus(results.meta)
    rows = []
    notes = Notes()
    unavailable = Unavailable(notes)
    for threads in results.thread_counts():
        for c in results.cells_for(threads):
            if c.status != "ok":
                rows.append([column_label(c), str(threads)] + [c.status.upper()] * 8)
                continue
            use = core_use(c, cpus)

            def figure(field: str, key: str, decimals: int | None = None,
                       c: Cell = c) -> str:
                values: dict = getattr(c, field)
                return (unavailable.text(c, f"{field}.{key}")
                        or fmt_number(values.get(key), decimals))

            rows.append([column_label(c), str(threads),
                         figure("cpu_us_per_query", "server"), figure("cpu_us_per_query", "db"),
                         figure("cpu_us_per_query", "dnsperf"),
                         unavailable.text(c, "cpu_us_per_query.server")
                         or fmt_number(capacity_per_core(c), 0),
                         fmt_number(use.dnsperf), fmt_number(use.server),
                         figure("peak_rss_kb", "server", 0), figure("peak_rss_kb", "db", 0)])
    header, rows = with_split(results, header, rows)
    lines = (["## Cost per query", "",
              "CPU time (user + system) per answered query over the QPS runs; db is the "
              "database server's whole process tree ('–': no database server). QPS per "
              "server core: 1,000,000 / (server + db us/query), what one core of the server "
              "would answer at that cost, which a slow load generator does not limit. dnsperf "
              "cores: of its one core, over the QPS runs (with several load hosts, each "
              f"dnsperf's, averaged; >= {GENERATOR_ON:g}: the load generator's limit); "
              "server cores: the server's and the database's, per pinned server core "
              f"(< {SERVER_IDLE_ON:g}: the server was not saturated); a cell is the load "
              "generator's when most of its runs are, each run judged on its own with "
              "hysteresis (bench/measure/loadgen.py). Peak RSS is "
              f"the high-water mark of resident memory. {NOT_AVAILABLE}: not measurable for "
              "that server (the note says why)." + (SPLIT_TEXT if SPLIT[0] in header else ""), ""]
             + markdown_table(header, rows))
    if notes.lines:
        lines += [""] + notes.render()
    return lines + [""]


SPLIT = ("server user", "server system", "db user", "db system")
SPLIT_TEXT = (" Server user, system, db user, system: the same CPU per query split into user "
              "and system time (the runs record it since the cost per query leads the table).")


def with_split(results: Results, header: list[str],
               rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """The cost table with the user/system split of the CPU per query appended, where any
    cell's runs recorded it (files before the split keep their columns)."""
    cells = [c for t in results.thread_counts() for c in results.cells_for(t)]
    splits = [split_per_query(c) for c in cells]
    if not any(value is not None for split in splits for value in split.values()):
        return header, rows
    extended = [row + ([c.status.upper()] * len(SPLIT) if c.status != "ok"
                       else [fmt_number(split[key]) for key in SPLIT])
                for row, c, split in zip(rows, cells, splits, strict=True)]
    return [*header, *SPLIT], extended


def _startup_seconds(p: StartupPoint) -> str:
    """The startup in seconds with its interval over the starts where it has one."""
    interval = p.interval()
    if interval is not None:
        return interval_text(interval, 1 / 1000, None)
    return fmt_number(p.startup_ms / 1000 if p.startup_ms is not None else None)


def _startup_cell(p: StartupPoint) -> str:
    if p.status != "ok":
        return p.status.upper()
    rss = p.server_rss_kb / 1024 if p.server_rss_kb is not None else None
    return f"{_startup_seconds(p)} s, {fmt_number(rss, 0)} MiB"


def _starts_text(results: Results) -> str:
    """How many fresh starts the points are, and what their figures are over them."""
    counts = sorted({len(p.starts_ms) for p in results.startup_scaling if p.status == "ok"})
    repeated = [n for n in counts if n > 1]
    if not repeated:  # files before repeated starts: their text as it was
        return ""
    many = str(repeated[0]) if len(repeated) == 1 else f"{repeated[0]} to {repeated[-1]}"
    single = " (points of one start have no interval)" if len(repeated) < len(counts) else ""
    return (f"A point is {many} fresh starts{single}: the geometric mean of their times with "
            "its 95% interval over the starts (each start is a fresh exec, the independent "
            "unit), and the largest of their peak resident memories. ")


def render_startup_summary(results: Results) -> list[str]:
    """Server x zone count: its startup time and memory (the operator's question)."""
    points = {(p.server, p.zones): p for p in results.startup_scaling}
    counts = sorted({n for _, n in points})
    servers = sorted({s for s, _ in points}, key=report_order)
    rows = [[s, *(_startup_cell(points[s, n]) if (s, n) in points else NONE for n in counts)]
            for s in servers]
    return ["## Startup time and server memory", "",
            "Time from the server's exec until it answers for the last zone, and its resident "
            "memory then. " + _starts_text(results) + "Details, failures and loader "
            "figures in the next table.", ""] + \
        markdown_table(["server", *(f"{n:,} zones" for n in counts)], rows) + [""]


def render_startup_scaling(results: Results) -> list[str]:
    if not results.startup_scaling:
        return []
    header = ["server", "zones", "startup (s)", "server RSS (MiB)", "store size (MB)",
              "load (s)", "records/s", "loader RSS (MiB)"]
    rows = []
    for p in sorted(results.startup_scaling, key=lambda p: (report_order(p.server), p.zones)):
        loader_rss = p.loader_rss_kb / 1024 if p.loader_rss_kb is not None else None
        load = [fmt_number(p.load_seconds), fmt_number(p.records_per_second, 0),
                fmt_number(loader_rss, 0)]
        if p.status != "ok":
            rows.append([p.server, f"{p.zones:,}", f"{p.status.upper()}: {p.error}", NONE,
                         NONE, *load])
            continue
        size = p.store_bytes / 1e6 if p.store_bytes is not None else None
        rss = p.server_rss_kb / 1024 if p.server_rss_kb is not None else None
        rows.append([p.server, f"{p.zones:,}", _startup_seconds(p), fmt_number(rss, 0),
                     fmt_number(size), *load])
    return render_startup_summary(results) + ["## Startup against zone count", "",
            "Startup: from the server's exec until it answers authoritatively for the last "
            "zone loaded. Server RSS: its peak resident memory at that moment. Store size: the "
            "store's files on disk. Load: the store's loader in its own process (its peak RSS "
            "shows whether loading memory stays flat as the zone count grows).", ""] + \
        markdown_table(header, rows) + [""]


# Sections measured over `run`'s cells, which a file of theirs renders as a run's tables; a
# file holding any other section (and no cells) is that command's alone.
WITH_CELLS = ("cells", "capacity", "tuning")


def has_run_tables(results: Results) -> bool:
    """Does the file get `run`'s tables: it has cells, or no section of a command whose own
    section is all its file holds (startup, scale, signed, instructions, faults, ...)?"""
    return bool(results.cells) or not any(getattr(results, key) for key in SECTIONS
                                          if key not in WITH_CELLS)


# ---------------------------------------------------------------- plots

def render_run_plots(results: Results, out_dir: Path) -> list[Path]:
    """qps.png, latency.png and cpu.png of the run's cells."""
    return [_plot_qps(results, out_dir / "qps.png"),
            _plot_latency(results, out_dir / "latency.png"),
            _plot_cpu(results, out_dir / "cpu.png")]


def render_startup_plot(results: Results, out_dir: Path) -> Path:
    """startup.png: startup time and memory against the zone count."""
    return _plot_startup(results, out_dir / "startup.png")


def _ok_cells(results: Results) -> list[Cell]:
    return [c for t in results.thread_counts() for c in results.cells_for(t)
            if c.status == "ok"]


def _plain_log_labels(axis: object) -> None:
    """Plain numbers ("9.8", "200") instead of powers of ten on a log axis; a narrow range
    is then labelled by its minor ticks, which the default would write as 9.8x10^0."""
    from matplotlib.ticker import LogFormatter

    axis.set_major_formatter(LogFormatter())
    axis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def _plot_qps(results: Results, path: Path) -> Path:
    import matplotlib.pyplot as plt

    servers = results.servers()
    thread_counts = results.thread_counts()
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(servers) + 2), 4.5))
    width = 0.8 / max(1, len(thread_counts))
    for i, threads in enumerate(thread_counts):
        xs, heights, low, high = [], [], [], []
        for x, server in enumerate(servers):
            c = results.cell(server, threads)
            offset = (i - (len(thread_counts) - 1) / 2) * width
            if c is not None and c.status != "ok":
                # No bar for a server without valid figures, but say why it is missing.
                ax.text(x + offset, 0.02, c.status.upper(), rotation=90, ha="center",
                        va="bottom", fontsize=8, color="firebrick",
                        transform=ax.get_xaxis_transform())
            if c is None or c.status != "ok" or c.qps.median is None:
                continue
            xs.append(x + offset)
            heights.append(c.qps.median)
            # The 95% interval where the cell has one, else the runs' min–max.
            bottom, top = ((c.qps.low, c.qps.high) if c.qps.low is not None
                           else (c.qps.min, c.qps.max))
            low.append(c.qps.median - (bottom or c.qps.median))
            high.append((top or c.qps.median) - c.qps.median)
        if heights:  # an empty bar set would still get a legend entry
            ax.bar(xs, heights, width, yerr=[low, high], capsize=3,
                   label=f"{threads} thread{'s' if threads != 1 else ''}")
    ax.set_xticks(range(len(servers)), servers, rotation=30, ha="right")
    ax.set_ylabel("queries per second (median, 95% interval or min–max)")
    _log_scale_if_data(ax)
    ax.set_title("Throughput per server")
    ax.grid(axis="y", which="both", alpha=0.3)
    legend_or_note(ax)
    return save_figure(fig, path)


def _log_scale_if_data(ax: Any) -> None:
    """A log y axis with plain labels; an axis without data (every cell WRONG or FAILED)
    stays linear, which matplotlib cannot log-scale."""
    if ax.has_data():
        ax.set_yscale("log")
        _plain_log_labels(ax.yaxis)


def _plot_latency(results: Results, path: Path) -> Path:
    import matplotlib.pyplot as plt

    cells = _ok_cells(results)
    fig, axes = plt.subplots(2, 1, figsize=(min(16, max(7, 0.5 * len(cells) + 3)), 8),
                             sharey=True)
    for ax, kind in zip(axes, ("unloaded", "loaded"), strict=True):
        data, labels = [], []
        for c in cells:
            stats = c.latency_unloaded if kind == "unloaded" else c.latency_loaded
            if stats is not None and stats.samples_ns:
                data.append([s / 1000 for s in stats.samples_ns])
                labels.append(f"{c.server}/{c.threads}")
        if data:
            # Whiskers at the 1st and 99th percentile; the tail beyond is in the table.
            ax.boxplot(data, whis=(1, 99), showfliers=False)
            ax.set_xticks(range(1, len(labels) + 1), labels, rotation=40, ha="right")
        else:
            ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(f"{kind.capitalize()} latency (server/threads)")
        _log_scale_if_data(ax)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.set_ylabel("microseconds")
    fig.suptitle("Box: p25–p75 with median; whiskers: p1 and p99")
    return save_figure(fig, path)


def _plot_cpu(results: Results, path: Path) -> Path:
    import matplotlib.pyplot as plt

    # A server whose CPU the suite cannot account has no bar (not a zero one).
    cells = [c for c in _ok_cells(results) if "cpu_us_per_query.server" not in c.unavailable]
    labels = [f"{c.server}/{c.threads}" for c in cells]
    server = [c.cpu_us_per_query.get("server") or 0.0 for c in cells]
    db = [c.cpu_us_per_query.get("db") or 0.0 for c in cells]
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(cells) + 2), 4.5))
    xs = range(len(cells))
    ax.bar(xs, server, label="server")
    ax.bar(xs, db, bottom=server, label="database server")
    ax.set_xticks(xs, labels, rotation=40, ha="right")
    ax.set_ylabel("CPU microseconds per answered query")
    ax.set_title("Server CPU per query (server/threads)")
    ax.grid(axis="y", alpha=0.3)
    if cells:
        ax.legend()
    else:
        ax.text(0.5, 0.5, f"{NOT_AVAILABLE}: no server whose CPU the suite accounts",
                ha="center", va="center", transform=ax.transAxes)
    return save_figure(fig, path)


def _plot_startup(results: Results, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_rss) = plt.subplots(1, 2, figsize=(10, 4.5))
    points = [p for p in results.startup_scaling if p.status == "ok"]
    for server in sorted({p.server for p in points}, key=report_order):
        mine = sorted((p for p in points if p.server == server), key=lambda p: p.zones)
        timed = [p for p in mine if p.startup_ms is not None]
        sized = [p for p in mine if p.server_rss_kb is not None]
        ax_time.plot([p.zones for p in timed], [p.startup_ms for p in timed],
                     **server_style(server))
        ax_rss.plot([p.zones for p in sized], [p.server_rss_kb / 1024 for p in sized],
                    **server_style(server))
    for ax, ylabel in ((ax_time, "startup (ms)"), (ax_rss, "server peak RSS (MiB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log_labels(ax.yaxis)
        ax.set_xlabel("zones")
        ax.set_ylabel(ylabel)
        ax.grid(which="both", alpha=0.3)
        legend_or_note(ax)
    ax_time.set_title("Startup time against zone count")
    ax_rss.set_title("server memory against zone count")
    return save_figure(fig, path)
