"""The tables of measured figures in README.md and docs/, made from the results catalogue.

Each table in a document is a cog block (cogapp: the Python in the block's opening comment
writes the lines up to its closing comment): `make docs` (python3 -m bench.report.doctables)
writes every block again from the committed results, and tests/test_docs.py fails on a block
that differs from what its code writes now. A table is never typed by hand, so it cannot
drift from the results it shows. In a document:

    <!-- [[[cog out(run_ratios("quick-2026-11-26", "quick-2026-11-26-rerun")) ]]] -->
    | server | ... |
    <!-- [[[end]]] -->

Every function below takes the runs it shows by their directory names under docs/results/
and returns the table's lines; `out` writes them into the block.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

from base.paths import REPO_ROOT
from bench.measure.catalogue import LOAD_GENERATOR, Catalogue, Figure
from bench.report.format import NONE, fmt_number, markdown_table

# What `cog` prepends to every block's code: the functions below and `out`.
PROLOGUE = "import cog; from bench.report.doctables import *"
# The documents whose blocks `make docs` writes: README.md and every page under docs/.
DOCUMENTS = ("README.md", "docs")


@cache
def catalogue() -> Catalogue:
    """The committed results, loaded once per process (cog runs every block in one)."""
    return Catalogue.committed()


def out(lines: Sequence[str]) -> None:
    """Write a table's lines into the cog block being generated."""
    import cog  # only inside cog's run

    cog.out("\n".join(lines) + "\n")


def fig(run: str, metric: str, **where: object) -> Figure | None:
    """The one figure, or None when the run holds none there (a cell not measured)."""
    found = catalogue().find(run, metric, **{k: str(v) for k, v in where.items()})
    if len(found) > 1:
        return catalogue().one(run, metric, **{k: str(v) for k, v in where.items()})
    return found[0] if found else None


def value(run: str, metric: str, **where: object) -> float | None:
    found = fig(run, metric, **where)
    return None if found is None else found.number


def num(x: float | None, decimals: int | None = None, unit: str = "") -> str:
    return NONE if x is None else fmt_number(x, decimals) + unit


def with_interval(f: Figure | None, decimals: int | None = None, unit: str = "") -> str:
    """"median [low–high]" (the unit after both), the median alone without an interval."""
    if f is None or f.number is None:
        return NONE
    text = num(f.number, decimals, unit)
    if f.low is None or f.high is None:
        return text
    return f"{text} [{num(f.low, decimals)}–{num(f.high, decimals)}{unit}]"


def arrow(before: str, after: str) -> str:
    return f"{before} -> {after}"


def results_link(run: str, label: str, up: str = "../results") -> str:
    """A link to a run's results.md from a page in docs/method/ (up: the way to results/)."""
    return f"[{label}]({up}/{run}/results.md)"


# ---------------------------------------------------------------- README

def readme_sample(run: str, servers: Sequence[str], threads: int = 1) -> list[str]:
    """The README's sample of `make bench`'s table: the first rows, a few columns."""
    rows = [("Cost us/query (server + db)",
             lambda s: with_interval(fig(run, "cost_us", server=s, threads=threads), 1)),
            ("Cost % of native", lambda s: _cost_percent(run, "native", s, threads)),
            ("Cost % of memory", lambda s: _cost_percent(run, "memory", s, threads)),
            ("QPS", lambda s: _bounded(run, "qps", s, threads, 0)),
            ("QPS % of native", lambda s: _percent(run, "ratio.native", s, threads)),
            ("QPS % of memory", lambda s: _percent(run, "ratio.memory", s, threads))]
    return markdown_table([f"threads {threads}", *servers],
                          [[label, *(figure(s) for s in servers)] for label, figure in rows])


def _cost_percent(run: str, reference: str, server: str, threads: int) -> str:
    """The cost as a % of the reference's, as the table shows it: 100.0% in the reference's
    own column, "–" where the server's cost is divided by the other reference."""
    if server == reference:
        return "100.0%"
    return _percent(run, f"cost.{reference}", server, threads)


def _bounded(run: str, metric: str, server: str, threads: int, decimals: int) -> str:
    f = fig(run, metric, server=server, threads=threads)
    text = with_interval(f, decimals)
    return f">= {text} (load generator)" if f is not None and LOAD_GENERATOR in f.flags \
        else text


def bound(f: Figure | None, decimals: int | None = None) -> str:
    """The figure, as a lower bound (">= N") where the load generator set the pace."""
    text = num(None if f is None else f.number, decimals)
    return f">= {text}" if f is not None and LOAD_GENERATOR in f.flags else text


def _percent(run: str, metric: str, server: str, threads: int) -> str:
    f = fig(run, metric, server=server, threads=threads)
    if f is not None and f.number == 100.0 and f.low is None:
        return "100.0%"
    return with_interval(f, 1, "%")


# ---------------------------------------------------------------- run.md

def run_ratios(first: str, second: str, servers: Sequence[str] | None = None) -> list[str]:
    """% of native and of memory in two runs side by side, each with its interval."""
    names = servers or _servers(first)

    def ratio(run: str, metric: str, server: str) -> str:
        f = fig(run, metric, server=server, threads=1)
        if f is not None and f.low is None and f.number == 100.0:
            return "100.0%"
        return with_interval(f, 1).replace(" [", "% [") if f is not None else NONE

    return markdown_table(
        ["server", "% of native, run 1", "run 2", "% of memory, run 1", "run 2"],
        [[s, ratio(first, "ratio.native", s), ratio(second, "ratio.native", s),
          ratio(first, "ratio.memory", s), ratio(second, "ratio.memory", s)] for s in names])


def run_costs(first: str, second: str, servers: Sequence[str] | None = None) -> list[str]:
    """The cost per query and its ratio to the reference measured next to it, in two runs
    side by side, each with its interval."""
    names = servers or _servers(first)

    def cost(run: str, server: str) -> str:
        return with_interval(fig(run, "cost_us", server=server, threads=1), 1)

    return markdown_table(
        ["server", "cost us/query, run 1", "run 2", "cost % of reference, run 1", "run 2"],
        [[s, cost(first, s), cost(second, s), _cost_share(first, s), _cost_share(second, s)]
         for s in names])


def _cost_share(run: str, server: str) -> str:
    """A 1-thread cost as a % of the reference measured next to it (memory for a DLZ driver,
    native BIND otherwise), naming the reference."""
    for reference in ("memory", "native"):
        if fig(run, f"cost.{reference}", server=server, threads=1) is not None:
            return _percent(run, f"cost.{reference}", server, 1) + f" of {reference}"
    return "100.0% of native" if server == "native" else NONE


def _servers(run: str) -> list[str]:
    """The run's servers in the registry's order (their cells' order)."""
    seen: dict[str, None] = {}
    for f in catalogue().figures(run):
        if f.server is not None:
            seen.setdefault(f.server)
    from servers import report_order

    return sorted(seen, key=report_order)


def run_before_rounds(run: str, targets: str = "") -> list[str]:
    """A run before rounds at 1, 2 and 4 threads: % of native and of memory, the 1-thread
    runs' spread and CPU per query; `targets` ("memory=~60%,pg=20%"): the targets of the time,
    given, not measured."""
    goal = dict(item.split("=", 1) for item in targets.split(",") if item)
    rows = []
    for s in _servers(run):
        server, db = value(run, "named_us", server=s, threads=1), value(run, "db_us", server=s,
                                                                         threads=1)
        rows.append([s, _per_threads(run, "ratio.native", s), _per_threads(run, "ratio.memory", s),
                     f"{num(value(run, 'qps.min', server=s, threads=1), 0)}–"
                     f"{num(value(run, 'qps.max', server=s, threads=1), 0)} QPS",
                     _cost(server, db), goal.get(s, NONE)])
    return markdown_table(["server", "% of native, 1 / 2 / 4 threads",
                           "% of memory, 1 / 2 / 4 threads", "spread of the 3 runs (1 thread)",
                           "CPU us/query named + db (1 thread)", "target"], rows)


def _per_threads(run: str, metric: str, server: str) -> str:
    return " / ".join(num(value(run, metric, server=server, threads=t), 1) for t in (1, 2, 4))


def _cost(server: float | None, db: float | None) -> str:
    """named's CPU per query, "+ the database's" where there is one."""
    if db is None:
        return num(server)
    return f"{num(server)} + {num(db)}"


def run_every_row(run: str, rows: Sequence[str]) -> list[str]:
    """Every kind of server in one run: QPS at 1 and 4 threads, % of native, CPU per query."""
    from servers import group_of

    lines = []
    for s in rows:
        lines.append([group_of(s), s, bound(fig(run, "qps", server=s, threads=1), 0),
                      bound(fig(run, "qps", server=s, threads=4), 0),
                      f"{bound(fig(run, 'ratio.native', server=s, threads=1), 1)} / "
                      f"{bound(fig(run, 'ratio.native', server=s, threads=4), 1)}",
                      _cost(value(run, "named_us", server=s, threads=1),
                            value(run, "db_us", server=s, threads=1))])
    return markdown_table(["group", "row", "QPS 1 thread", "QPS 4 threads", "% of native 1 / 4",
                           "CPU us/query"], lines)


def run_every_row_costs(run: str, rows: Sequence[str]) -> list[str]:
    """Every kind of server in one run in rounds, at 1 thread: the cost per query with its
    interval and the database's share of it, the cost as a % of the reference measured next
    to it, and QPS with its interval (a lower bound where the load generator set the pace)."""
    from servers import group_of

    return markdown_table(
        ["group", "row", "cost us/query (server + db)", "of it the database",
         "cost % of reference", "QPS"],
        [[group_of(s), s, with_interval(fig(run, "cost_us", server=s, threads=1), 1),
          num(value(run, "db_us", server=s, threads=1), 1), _cost_share(run, s),
          _bounded(run, "qps", s, 1, 0)] for s in rows])


# ---------------------------------------------------------------- capacity.md

def capacity_brackets(runs: Sequence[str]) -> list[str]:
    """Every server of the runs at 1 thread: closed loop, the breaking point's bracket, what
    ended the walk and the drops at the server's sockets in the load that ended it."""
    rows = []
    for run in runs:
        for s in _capacity_servers(run):
            rows.append([s, run, num(value(run, "closed_loop_qps", server=s), 0),
                         bracket(run, s), _ended(run, s), _end_drops(run, s)])
    return markdown_table(["server", "run", "closed loop (QPS)", "breaking point (QPS)",
                           "ended by", "drops at the server's sockets"], rows)


def _capacity_servers(run: str) -> list[str]:
    from servers import report_order

    return sorted({f.server for f in catalogue().find(run, "closed_loop_qps") if f.server},
                  key=report_order)


def bracket(run: str, server: str, name: str = "breaking") -> str:
    """The breaking point as capacity's report prints it: "held–failed", ">= held" (the walk
    ended without a failing load), "< failed" (the lowest load failed)."""
    held = value(run, f"{name}.held_qps", server=server)
    failed = value(run, f"{name}.failed_qps", server=server)
    if held is None:
        return NONE if failed is None else f"< {num(failed, 0)}"
    if failed is None:
        return f">= {num(held, 0)}"
    return f"{num(held, 0)}–{num(failed, 0)}"


def _ended(run: str, server: str) -> str:
    ended = fig(run, "breaking.ended_by", server=server)
    if ended is None or ended.value in ("held every step", "no steps"):
        return NONE if ended is None else str(ended.value)
    percent = value(run, "breaking.ended_percent", server=server)
    answered = value(run, "breaking.ended_answered", server=server)
    offered = value(run, "breaking.ended_offered_qps", server=server)
    target = value(run, "step.target_qps", server=server, percent=_pct(percent))
    if ended.value == "not offered":
        return f"not offered ({num(offered, 0)} of {num(target, 0)})"
    return f"lost ({num(answered, 1)}% answered at {num(offered, 0)})"


def _pct(percent: float | None) -> str:
    return NONE if percent is None else f"{percent:g}"


def _end_drops(run: str, server: str) -> str:
    percent = value(run, "breaking.ended_percent", server=server)
    if percent is None:
        return NONE
    drops = catalogue().find(run, "step.server_drops", server=server, percent=_pct(percent))
    return " / ".join(num(f.number, 0) for f in sorted(drops, key=lambda f: f.where))


def capacity_old(run: str) -> list[str]:
    """A sweep of the old kind (one step a load, default buffers), recomputed as brackets."""
    rows = []
    for s in _capacity_servers(run):
        closed = value(run, "closed_loop_qps", server=s)
        held = value(run, "breaking.held_qps", server=s)
        rows.append([s, num(closed, 0), bracket(run, s),
                     num(None if held is None or not closed else 100 * held / closed, 1),
                     bracket(run, s, "breaking_strict"),
                     f"{num(value(run, 'latency.p50_us', server=s, share='common'), 0)} / "
                     f"{num(value(run, 'latency.p99_us', server=s, share='common'), 0)}",
                     num(value(run, "resperf_max_qps", server=s), 0)])
    return markdown_table(["server", "closed loop (QPS)", "breaking point, 5% loss (QPS)",
                           "held, % of closed loop", "breaking point, 1% loss",
                           "p50 / p99 at 1,000 QPS (us)",
                           "resperf max (QPS)"], rows)


# ---------------------------------------------------------------- faults.md

FAULT_COLUMNS = ("kill-backends", "sigstop", "restart", "crash")


def faults_table(runs: Sequence[str], none_text: str = "(none)") -> list[str]:
    """One row per run (one server each): per fault, first SERVFAIL after / recovered after /
    SERVFAIL / lost of the queries sent until recovery."""
    rows = []
    for run in runs:
        server = next(f.server for f in catalogue().find(run, "fault.sent"))
        qps = value(run, "offered_qps")
        label = server if qps == 2000 else f"{server} at {num(qps, 0)} QPS"
        rows.append([results_link(run, label),
                     *(_fault_cell(run, server, kind) or none_text for kind in FAULT_COLUMNS)])
    header = ["server", *(f"{k} 5 s" if k == "sigstop" else f"{k} 3 s" if k == "crash" else k
                          for k in FAULT_COLUMNS)]
    return _plain_table(header, rows)


def _fault_cell(run: str, server: str, kind: str) -> str | None:
    if fig(run, "fault.sent", server=server, fault=kind) is None:
        return None
    first = value(run, "fault.first_servfail_s", server=server, fault=kind)
    recovered = value(run, "fault.recovered_s", server=server, fault=kind)
    parts = ["none" if first is None else f"{first:.2f} s",
             "not recovered" if recovered is None else f"{recovered:.0f} s",
             num(value(run, "fault.servfail", server=server, fault=kind), 0),
             num(value(run, "fault.lost", server=server, fault=kind), 0)]
    return " / ".join(parts)


def _plain_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A table whose cells are text, every column left-aligned."""
    return ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|",
            *("| " + " | ".join(row) + " |" for row in rows)]


# ---------------------------------------------------------------- instructions.md

def instructions_table(first: str, rerun: str) -> list[str]:
    """Instructions per answered query of named, the database and both, first run / rerun, and
    the total as a share of the memory driver's in the first run."""
    memory = value(first, "instructions.total", server="memory")
    rows = []
    for s in _servers(first):
        both = [value(r, "instructions.named", server=s) for r in (first, rerun)]
        database = [value(r, "instructions.database", server=s) for r in (first, rerun)]
        process = fig(first, "instructions.database_process", server=s)
        counted = process is not None and process.value is not None
        total = [value(r, "instructions.total", server=s) for r in (first, rerun)]
        if counted:
            db_text = f"{process.value} {_pair(database)}"
        else:
            db_text = "not counted" if s == "pg" else NONE
        share = (f"(named alone: {num(100 * both[0] / memory, 1)}%)"
                 if s == "pg" and both[0] and memory
                 else num(None if not total[0] or not memory else 100 * total[0] / memory, 1)
                 + "%")
        rows.append([s, _pair(both), db_text, NONE if s == "pg" else _pair(total), share])
    return markdown_table(["server", "named", "database", "total", "of memory (first run)"],
                          rows)


def _pair(values: Sequence[float | None]) -> str:
    return " / ".join(num(v, 0) for v in values)


# ---------------------------------------------------------------- scale.md

def scale_uniform(run: str, counts: Sequence[int] = (1000, 10000, 100000, 1000000)) -> list[str]:
    """QPS by zone count (uniform mix), CPU per query at the smallest and largest count, and
    the database's cache at the largest."""
    rows = []
    first, last = counts[0], counts[-1]
    for s in _scale_servers(run):
        at = {"server": s, "mix": "uniform", "shape": "no"}
        rows.append([s, *(num(value(run, "qps", zones=z, **at), 0) for z in counts),
                     _scale_cost(run, first, at), _scale_cost(run, last, at),
                     _cache(run, last, at)])
    return markdown_table(["uniform mix", *(f"{z:,}" for z in counts[:-1]),
                           f"{last:,} zones", f"CPU us/q at {first:,}", f"at {last:,}",
                           f"db cache hits at {last:,}"], rows)


def _scale_servers(run: str) -> list[str]:
    from servers import report_order

    return sorted({f.server for f in catalogue().find(run, "qps") if f.server},
                  key=report_order)


def _scale_cost(run: str, zones: int, at: dict) -> str:
    server = value(run, "named_us", zones=zones, **at)
    db = value(run, "db_us", zones=zones, **at)
    return num(server, 0) if db is None else f"{num(server, 0)}+{num(db, 0)}"


def _cache(run: str, zones: int, at: dict) -> str:
    hit = value(run, "cache_hit", zones=zones, **at)
    if hit is not None:
        return f"{hit:.1f}%"
    resident = value(run, "cache_resident", zones=zones, **at)
    if resident is not None:
        return f"{resident:.1f}% resident"
    if at["server"] in ("native", "memory", "fs"):
        return NONE
    return "not readable"


# ---------------------------------------------------------------- signed.md

def signed_table(run: str) -> list[str]:
    """Unsigned against signed: QPS (and the change), CPU per query, reply size and traffic."""
    rows = []
    for s in _servers(run):
        before, after = ({"server": s, "variant": v} for v in ("unsigned", "signed"))
        f0, f1 = fig(run, "qps", **before), fig(run, "qps", **after)
        q0, q1 = (None if f is None else f.number for f in (f0, f1))
        change = NONE if not q0 or q1 is None else f"{100 * (q1 - q0) / q0:+.0f}%"
        if any(f is not None and LOAD_GENERATOR in f.flags for f in (f0, f1)):
            change = "load generator"
        rows.append([s, f"{bound(f0, 0)} → {bound(f1, 0)} ({change})",
                     f"{_cost(value(run, 'named_us', **before), value(run, 'db_us', **before))}"
                     f" → {_cost(value(run, 'named_us', **after), value(run, 'db_us', **after))}",
                     f"{num(value(run, 'reply_bytes', **before), 0)} → "
                     f"{num(value(run, 'reply_bytes', **after), 0)}",
                     f"{_mbit(value(run, 'reply_mbit_s', **before))} → "
                     f"{_mbit(value(run, 'reply_mbit_s', **after))}"])
    return _plain_table(["server", "QPS unsigned → signed",
                         "CPU us/query (server + db) unsigned → signed", "reply bytes",
                         "reply Mbit/s"], rows)


def _mbit(x: float | None) -> str:
    return num(x, None if x is None or x >= 100 else 1)


# ---------------------------------------------------------------- startup.md

def startup_grid(run: str, counts: Sequence[int], servers: Sequence[str] | None = None,
                 load_at: int | None = None) -> list[str]:
    """Startup time and named's memory per zone count; with load_at, the store's load at
    that count (time and size on disk) in a last column."""
    rows = []
    names = servers or _startup_servers(run)
    for s in names:
        row = [s, *(_start(run, s, z) for z in counts)]
        if load_at is not None:
            row.append(_store_load(run, s, load_at))
        rows.append(row)
    header = ["server", *(f"{z:,} zones" for z in counts)]
    if load_at is not None:
        header.append(f"store load at {load_at:,}")
    return markdown_table(header, rows)


def _startup_servers(run: str) -> list[str]:
    from servers import report_order

    return sorted({f.server for f in catalogue().find(run, "startup_s") if f.server},
                  key=report_order)


def _start(run: str, server: str, zones: int) -> str:
    seconds = value(run, "startup_s", server=server, zones=zones)
    if seconds is None:
        status = fig(run, "status", server=server, zones=zones)
        return NONE if status is None else str(status.value)
    started = with_interval(fig(run, "startup_s", server=server, zones=zones))
    return f"{started} s, {num(value(run, 'rss_mib', server=server, zones=zones), 0)} MiB"


def _store_load(run: str, server: str, zones: int) -> str:
    seconds = value(run, "load_s", server=server, zones=zones)
    size = value(run, "store_mb", server=server, zones=zones)
    return f"{num(seconds, 0)} s, {num(size, 0)} MB"


def startup_detail(run: str, zones: int) -> list[str]:
    """Every figure of one zone count: startup, named's memory, the store and its load."""
    rows = []
    for s in _startup_servers(run):
        at = {"server": s, "zones": zones}
        rows.append([s, f"{zones:,}", num(value(run, "startup_s", **at)),
                     num(value(run, "rss_mib", **at), 0), num(value(run, "store_mb", **at), 0),
                     num(value(run, "load_s", **at), 0), num(value(run, "records_per_s", **at), 0),
                     num(value(run, "loader_rss_mib", **at), 0)])
    return markdown_table(["server", "zones", "startup (s)", "named RSS (MiB)", "store size (MB)",
                           "load (s)", "records/s", "loader RSS (MiB)"], rows)


# ---------------------------------------------------------------- tune.md

def tune_table(runs: Sequence[str]) -> list[str]:
    """Per tune run (one server, one added round trip): 1 thread and 1 connection, the
    recommended setting and its figures."""
    rows = []
    for run in runs:
        server = next(f.server for f in catalogue().find(run, "recommended.threads"))
        t = value(run, "recommended.threads", server=server)
        c = value(run, "recommended.connections", server=server)
        at = {"server": server, "threads": _int(t), "connections": _int(c)}
        added = value(run, "added_rtt_ms")
        rtt = "none" if not added else f"1 ms ({added:.2f} ms)"
        p99 = value(run, "loaded.p99_us", **at)
        single = value(run, "qps", server=server, threads=1, connections=1)
        rows.append([server, rtt, num(single, 0),
                     f"{_int(t)} / {_int(c)}",
                     f"{num(value(run, 'qps', **at), 0)} ({num(value(run, 'qps.min', **at), 0)}–"
                     f"{num(value(run, 'qps.max', **at), 0)})",
                     NONE if p99 is None else f"{p99 / 1000:.0f} ms",
                     _cost(value(run, "named_us", **at), value(run, "db_us", **at))])
    return markdown_table(["server", "added round trip (measured)",
                           "1 thread, 1 connection: QPS", "recommended threads / connections",
                           "its QPS (3 runs)", "p99 under load", "CPU us/query named + db there"],
                          rows)


def tune_starts_table(runs: Sequence[str]) -> list[str]:
    """Per tune run measured in fresh starts: 1 thread and 1 connection, the recommended
    setting, their QPS over the starts and the recommended setting's cost per query, each with
    its interval over the starts."""
    rows = []
    for run in runs:
        server = next(f.server for f in catalogue().find(run, "recommended.threads"))
        t = _int(value(run, "recommended.threads", server=server))
        c = _int(value(run, "recommended.connections", server=server))
        added = value(run, "added_rtt_ms")
        rtt = "none" if not added else f"1 ms ({added:.2f} ms)"
        single = {"server": server, "threads": "1", "connections": "1"}
        pick = {"server": server, "threads": t, "connections": c}
        rows.append([server, rtt, with_interval(fig(run, "qps.starts", **single), 0),
                     f"{t} / {c}", with_interval(fig(run, "qps.starts", **pick), 0),
                     with_interval(fig(run, "cost_us", **pick), 1)])
    return markdown_table(["server", "added round trip (measured)",
                           "1 thread, 1 connection: QPS", "recommended threads / connections",
                           "its QPS", "its cost per query (us, server + database)"], rows)


def _int(x: float | None) -> str:
    return NONE if x is None else str(int(x))


# ---------------------------------------------------------------- writes.md

def writes_table(run: str, labels: str = "", rate: int = 100) -> list[str]:
    """Reads at a fixed rate while the store is written: the ceiling, the write rate achieved
    at `rate`, reads, read p99 and CPU per read at 0 and at `rate`, and visibility there.
    labels: "native=native BIND (rndc),..." for the rows."""
    names = dict(item.split("=", 1) for item in labels.split(",") if item)
    rows = []
    for s in _write_servers(run):
        zero, busy = {"server": s, "rate": 0}, {"server": s, "rate": rate}
        rows.append([names.get(s, s),
                     with_interval(fig(run, "write_rate", server=s, rate="ceiling"), None),
                     num(value(run, "write_rate", **busy), 1),
                     arrow(num(value(run, "reads", **zero), 0),
                           num(value(run, "reads", **busy), 0)),
                     arrow(num(value(run, "read_p99_ms", **zero)),
                           num(value(run, "read_p99_ms", **busy))),
                     _visible(run, busy),
                     arrow(num(value(run, "cpu_per_read_us", **zero), 0),
                           num(value(run, "cpu_per_read_us", **busy), 0))])
    return markdown_table(["server", "ceiling (writes/s)", f"writes/s at {rate}/s",
                           f"reads answered/s, 0 -> {rate}/s", f"read p99 (ms), 0 -> {rate}/s",
                           f"visible p99 at {rate}/s (ms)",
                           f"server + database CPU per read (us), 0 -> {rate}/s"], rows)


def _write_servers(run: str) -> list[str]:
    from servers import report_order

    return sorted({f.server for f in catalogue().find(run, "reads") if f.server},
                  key=report_order)


def _visible(run: str, at: dict) -> str:
    text = num(value(run, "visible_p99_ms", **at))
    unseen = value(run, "not_seen", **at)
    return f"{text} (+{unseen:.0f} not seen)" if unseen else text


def updates_beside_reads(run: str, labels: str = "", rate: int = 100) -> list[str]:
    """Reads while RFC 2136 updates run: as writes_table, with the rate achieved beside the
    reads where it fell short of the offered one."""
    names = dict(item.split("=", 1) for item in labels.split(",") if item)
    rows = []
    for s in _write_servers(run):
        zero, busy = {"server": s, "rate": 0}, {"server": s, "rate": rate}
        reads = arrow(num(value(run, "reads", **zero), 0), num(value(run, "reads", **busy), 0))
        achieved = fig(run, "write_rate", **busy)
        if achieved is not None and achieved.number is not None and achieved.number < 0.95 * rate:
            reads += f" (at {with_interval(achieved, 1)} updates/s)"
        rows.append([names.get(s, s),
                     with_interval(fig(run, "write_rate", server=s, rate="ceiling"), 0), reads,
                     arrow(num(value(run, "read_p99_ms", **zero)),
                           num(value(run, "read_p99_ms", **busy))),
                     _visible(run, busy),
                     arrow(num(value(run, "cpu_per_read_us", **zero), 0),
                           num(value(run, "cpu_per_read_us", **busy), 0))])
    return markdown_table(["server", "ceiling (updates/s)",
                           f"reads answered/s, 0 -> {rate} updates/s",
                           f"read p99 (ms), 0 -> {rate}", f"visible p99 at {rate}/s (ms)",
                           f"server + database CPU per read (us), 0 -> {rate}"], rows)


def writes_at_breaking_point(runs: Sequence[str], rate: int = 100) -> list[str]:
    """Reads offered at each store's breaking point, at 0 and `rate` writes/s: reads and CPU
    per read with their intervals, and what is kept of each."""
    rows = []
    for run in runs:
        for s in _write_servers(run):
            zero, busy = {"server": s, "rate": 0}, {"server": s, "rate": rate}
            reads = [value(run, "reads", **zero), value(run, "reads", **busy)]
            cpu = [value(run, "cpu_per_read_us", **zero), value(run, "cpu_per_read_us", **busy)]
            rows.append([s, num(value(run, "reads_offered", server=s), 0),
                         arrow(with_interval(fig(run, "reads", **zero), 0),
                               with_interval(fig(run, "reads", **busy), 0)),
                         _kept(reads[1], reads[0]),
                         arrow(with_interval(fig(run, "cpu_per_read_us", **zero), 0),
                               with_interval(fig(run, "cpu_per_read_us", **busy), 0)),
                         _kept(cpu[0], cpu[1]),
                         arrow(num(value(run, "read_p99_ms", **zero)),
                               num(value(run, "read_p99_ms", **busy))),
                         num(value(run, "visible_p99_ms", **busy)),
                         num(value(run, "sampled", **busy), 0)])
    return markdown_table(["store", "reads offered/s", f"reads answered/s, 0 -> {rate} writes/s",
                           "kept", f"server + database CPU per read (us), 0 -> {rate}",
                           "kept by CPU", f"read p99 (ms), 0 -> {rate}", "visible p99 (ms)",
                           "writes sampled"], rows)


def _kept(part: float | None, whole: float | None) -> str:
    return NONE if part is None or not whole else f"{100 * part / whole:.0f}%"


# ---------------------------------------------------------------- advise.md, README

# The BIND whose committed runs the examples read: the suite's default.
ADVICE_BIND = "9.18"


def advise_example(zones: int, peak_qps: float, p99_ms: float, db_rtt_ms: float = 0,
                   writes: float = 0, signed: bool = False, servers: str | None = None
                   ) -> list[str]:
    """`python3 -m bench advise` on the committed results: its command line and what it
    prints, as a text block."""
    from bench.measure.advice import Requirement, advise
    from bench.report.advise import page, plain

    words = [f"--zones {zones}", f"--peak-qps {peak_qps:g}", f"--p99-ms {p99_ms:g}"]
    words += [f"--db-rtt {db_rtt_ms:g}"] if db_rtt_ms else []
    words += [f"--writes {writes:g}"] if writes else []
    words += ["--signed"] if signed else []
    words += [f"--servers {servers}"] if servers else []
    wanted = Requirement(zones, peak_qps, p99_ms, db_rtt_ms, writes, signed)
    advice = advise(catalogue(), wanted, bind=ADVICE_BIND,
                    servers=None if servers is None else servers.split(","))
    return ["```text", f"$ python3 -m bench advise {' '.join(words)}",
            *plain(page(advice, with_figure=False)).splitlines(), "```"]


# ---------------------------------------------------------------- make docs

def documents(root: Path = REPO_ROOT) -> list[Path]:
    """Every Markdown document with a cog block: README.md and the pages under docs/."""
    found = []
    for name in DOCUMENTS:
        path = root / name
        for page in sorted(path.rglob("*.md")) if path.is_dir() else [path]:
            if "[[[cog" in page.read_text():
                found.append(page)
    return found


def cog_arguments(check: bool) -> list[str]:
    """cog's command line over every document: rewrite them, or (check) only say which
    would change."""
    mode = ["--check", "--diff"] if check else ["-r"]
    return ["cog", *mode, "-p", PROLOGUE, *(str(p) for p in documents())]


def run_cog(check: bool = False, call: Callable[[list[str]], int] | None = None) -> int:
    """Run cog over every document from the repository's root (so `bench` imports)."""
    from cogapp import Cog

    return (call or Cog().main)(cog_arguments(check))


if __name__ == "__main__":
    sys.exit(run_cog(check="--check" in sys.argv[1:]))
