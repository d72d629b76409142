"""The results catalogue: every figure of every results directory, found by what it is.

A figure is one number a results file gives, or that the suite computes from it the one way
the reports do (a median with its 95% interval, a ratio, a breaking point): which run (the
results directory, named by its path under docs/results/, or as a user's own directory was
added), which server at which thread count, where else (zones, query mix, write rate, fault,
records per message, ...), and which metric, in the unit the metric's name ends in (`_ms`,
`_us`, `_s`, `_mib`; a ratio or share in %; a rate in queries or records per second). Each
carries flags a reader must not miss: the load generator set the pace ("load generator"), a
capacity step the load generator did not offer ("not offered"), a run superseded by a later
one ("superseded"), a run measured before the rule it would be read by ("before rounds": no
interval, one block of runs; RULE_SINCE says when the rule began). The run's provenance
(command, commit, boot, date, machine, data set, round trip to the database) is one look-up
away.

README.md and docs/ state no measured figure by hand: their tables are generated from here
(bench/report/doctables.py, `make docs`), and a figure in a sentence carries a reference that
resolves here (bench/report/docfigures.py), checked by tests/test_docs.py. Results are read
only through bench.measure.results.load_results, whatever form the files take on disk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from base.errors import UserError
from base.paths import REPO_ROOT
from bench.load.prober import LatencyStats
from bench.measure import cost, loadgen
from bench.measure.capacity import STRICT, UP_TO_THE_TASK, BreakingPoint, Curve, Level
from bench.measure.faults import ServerFaults
from bench.measure.results import Cell, Results, load_results
from bench.measure.stats import Interval, paired_ratios
from bench.measure.tune import qps_over_starts
from bench.measure.writes import CEILING, ServerWrites
from servers import base_name

COMMITTED = REPO_ROOT / "docs" / "results"
# The names a results file may have on disk (results.py may store it compressed).
RESULTS_NAMES = ("results.json", "results.json.gz", "results.json.xz")

LOAD_GENERATOR = "load generator"
NOT_OFFERED = "not offered"
SUPERSEDED = "superseded"
BEFORE_ROUNDS = "before rounds"
# The rule: every figure in interleaved rounds with its 95% interval (issue 26), first kept by
# quick-2026-11-26, started then. A figure without an interval from a run before it was
# measured before the rule (the cells say so with BEFORE_ROUNDS themselves).
RULE_SINCE = "2026-11-26T10:24:00+00:00"

# Committed runs a later one replaced, with why: their figures still resolve (the docs cite
# them for what went wrong) but carry the flag. Kept here, beside the figures, not in prose.
SUPERSEDED_BY = {
    "writes-2026-11-26": ("writes-every-server-2026-11-26", "its sampler counted a write "
                          "deleted before it showed as not seen, its CPU ran past the step"),
    "writes-at-max-pg-fs-2026-11-26": ("writes-at-max-pg-fs-2026-11-26-rerun",
                                       "the same sampler and CPU faults"),
    "writes-at-max-mysql-ldap-bdbhpt-t-2026-11-26": (
        "writes-at-max-mysql-ldap-bdbhpt-t-2026-11-26-rerun", "the same sampler and CPU faults"),
    "capacity-quick-2026-11-24": ("capacity-2026-11-26", "dnsperf 2.10, default receive "
                                  "buffers, one measurement a step"),
    "capacity-native-drops-2026-11-24": ("capacity-2026-11-26", "dnsperf 2.10, default "
                                         "receive buffers, one measurement a step"),
}

Where = tuple[tuple[str, str], ...]
# A generated data set as the metadata describes it (bench.measure.datasets.describe).
_GENERATED = re.compile(r"^(\d+) generated zones")


@dataclass(frozen=True)
class Provenance:
    """Where a run's figures come from: its directory and what its metadata records."""

    run: str
    path: Path
    command: str | None
    commit: str | None
    dirty: bool | None
    boot: str | None
    date: str | None
    machine: str | None
    bind: str | None
    superseded_by: str | None = None
    # The data set of the whole run (None where each figure has its own zone count: startup,
    # scale), its zone count when it was generated, and the round trip added between the
    # server and its database (0: none; None: not recorded, the database beside the server).
    dataset: str | None = None
    zones: int | None = None
    db_rtt_ms: float | None = None

    @classmethod
    def of(cls, run: str, path: Path, meta: Mapping) -> Provenance:
        cpu = meta.get("cpu_model")
        machine = None if cpu is None else f"{cpu}, {meta.get('cpu_count', '?')} CPUs"
        later = SUPERSEDED_BY.get(run)
        dataset = meta.get("dataset")
        generated = _GENERATED.match(dataset) if isinstance(dataset, str) else None
        return cls(run=run, path=path, command=meta.get("command"),
                   commit=meta.get("git_commit"), dirty=meta.get("git_dirty"),
                   boot=meta.get("boot_id"), date=meta.get("date"), machine=machine,
                   bind=meta.get("bind"), superseded_by=None if later is None else later[0],
                   dataset=dataset, zones=None if generated is None else int(generated[1]),
                   db_rtt_ms=meta.get("db_rtt_ms"))

    def before_the_rule(self) -> bool:
        """The run started before RULE_SINCE (an unrecorded date counts as before)."""
        return self.date is None or self.date < RULE_SINCE


@dataclass(frozen=True)
class Figure:
    """One figure: its value (a number, or a word such as what ended a capacity walk), its 95%
    interval where it has one, and where it sits: which run ("" while figures_of reads a
    results file, whose name it does not know), and where in it."""

    metric: str
    value: float | str | None
    low: float | None = None
    high: float | None = None
    server: str | None = None
    threads: int | None = None
    where: Where = ()
    flags: frozenset[str] = frozenset()
    run: str = ""

    def coordinate(self, key: str) -> str | None:
        """The figure's coordinate `key` as text ("server", "threads", or a `where` key)."""
        if key == "server":
            return self.server
        if key == "threads":
            return None if self.threads is None else str(self.threads)
        return dict(self.where).get(key)

    def matches(self, wanted: Mapping[str, Iterable[str]]) -> bool:
        return all(self.coordinate(key) in values for key, values in wanted.items())

    @property
    def number(self) -> float | None:
        return self.value if isinstance(self.value, int | float) else None


class Catalogue:
    """Every figure of a set of results directories, loaded on first use of each."""

    def __init__(self, runs: Mapping[str, Path]) -> None:
        self.paths = dict(runs)
        self._figures: dict[str, list[Figure]] = {}
        self._provenance: dict[str, Provenance] = {}

    @classmethod
    def committed(cls, root: Path = COMMITTED) -> Catalogue:
        """The committed results under docs/results/, each named by its path below it."""
        return cls({directory.relative_to(root).as_posix(): directory
                    for directory in results_directories(root)})

    def add(self, path: Path, name: str | None = None) -> str:
        """A user's own results directory, by its name (default: the directory's)."""
        run = name or path.resolve().name
        self.paths[run] = path
        self._figures.pop(run, None)
        return run

    def add_results(self, run: str, results: Results, path: Path | None = None) -> str:
        """Results already in memory (compare's two runs, a test's), under the name `run`."""
        self.paths[run] = path or Path(run)
        self._set(run, results)
        return run

    def runs(self) -> list[str]:
        return sorted(self.paths)

    def provenance(self, run: str) -> Provenance:
        self._load(run)
        return self._provenance[run]

    def figures(self, run: str) -> list[Figure]:
        self._load(run)
        return self._figures[run]

    def find(self, run: str, metric: str, **where: str | Iterable[str]) -> list[Figure]:
        """The run's figures of `metric` at every coordinate given (a value, or several:
        any of them)."""
        wanted = {key: {value} if isinstance(value, str) else {str(v) for v in value}
                  for key, value in where.items()}
        return [f for f in self.figures(run) if f.metric == metric and f.matches(wanted)]

    def one(self, run: str, metric: str, **where: str | Iterable[str]) -> Figure:
        """The one figure the query names; an error saying what matched otherwise."""
        found = self.find(run, metric, **where)
        if len(found) != 1:
            query = " ".join([run, metric, *(f"{k}={v}" for k, v in where.items())])
            raise UserError(f"figure {query}: {len(found)} figures match, expected one"
                            + _near_misses(self.figures(run), metric, found))
        return found[0]

    def _load(self, run: str) -> None:
        if run in self._figures:
            return
        if run not in self.paths:
            raise UserError(f"no results run {run!r} in the catalogue")
        self._set(run, load_results(self.paths[run]))

    def _set(self, run: str, results: Results) -> None:
        provenance = Provenance.of(run, self.paths[run], results.meta)
        self._provenance[run] = provenance
        flags = frozenset({SUPERSEDED}) if provenance.superseded_by else frozenset()
        self._figures[run] = [replace(f, run=run, flags=f.flags | flags)
                              for f in figures_of(results)]


def _near_misses(figures: list[Figure], metric: str, found: list[Figure]) -> str:
    """What the run does hold of the metric, so that a wrong coordinate shows itself."""
    pool = found or [f for f in figures if f.metric == metric]
    if not pool:
        metrics = sorted({f.metric for f in figures})
        return f"; the run's metrics: {', '.join(metrics[:40])}"
    shown = [" ".join(filter(None, [f.server, f.threads and f"threads={f.threads}",
                                    *(f"{k}={v}" for k, v in f.where)])) for f in pool[:8]]
    return f"; e.g. {'; '.join(shown)}"


def results_directories(root: Path) -> list[Path]:
    """Every directory under root holding a results file, sorted."""
    found = {path.parent for name in RESULTS_NAMES for path in root.rglob(name)}
    return sorted(found)


# ---------------------------------------------------------------- figures of a results file

def figures_of(results: Results) -> list[Figure]:
    """Every figure of a results file, section by section."""
    figures: list[Figure] = []
    figures += _meta_figures(results.meta)
    figures += _cell_figures(results)
    figures += _capacity_figures(results)
    figures += _startup_figures(results)
    figures += _scale_figures(results)
    figures += _signed_figures(results)
    figures += _tuning_figures(results)
    figures += _instruction_figures(results)
    figures += _fault_figures(results)
    figures += _write_figures(results)
    figures += _update_figures(results)
    return figures


def _value(metric: str, value: float | str | None, **at: object) -> Figure:
    return Figure(metric, value, **_placed(at))


def _interval(metric: str, interval: Interval | None, scale: float = 1.0,
              **at: object) -> list[Figure]:
    """A median with its interval (none: no figure)."""
    if interval is None:
        return []
    low = None if interval.low is None else scale * interval.low
    high = None if interval.high is None else scale * interval.high
    return [Figure(metric, scale * interval.estimate, low, high, **_placed(at))]


def _placed(at: Mapping[str, object]) -> dict:
    """server, threads and flags as fields; every other coordinate as text in `where`."""
    fields: dict = {"server": at.get("server"), "threads": at.get("threads")}
    if "flags" in at:
        fields["flags"] = frozenset(at["flags"])  # type: ignore[arg-type]
    fields["where"] = tuple((k, _text(v)) for k, v in at.items()
                            if k not in ("server", "threads", "flags") and v is not None)
    return fields


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _meta_figures(meta: Mapping) -> Iterator[Figure]:
    """The run's parameters that docs quote: rounds done, rates offered."""
    rounds = meta.get("rounds") or {}
    if "done" in rounds:
        yield _value("rounds", rounds["done"])
    calibration = meta.get("calibration") or {}
    for key in ("first_round_qps", "last_round_qps"):
        if calibration.get(key) is not None:
            yield _value(f"calibration.{key}", calibration[key])


# ---------------------------------------------------------------- run: cells

def _cell_figures(results: Results) -> Iterator[Figure]:
    """Every cell's figures; a `tune` run's cells also say the round trip added."""
    cpus = loadgen.server_cpus(results.meta)
    added: Where = () if results.tuning is None else (("rtt", str(results.tuning.db_rtt_ms)),)
    adjacent = cost.AdjacentCost(results.cells)
    for cell in results.cells:
        for figure in _one_cell(results, cell, cpus, adjacent):
            yield replace(figure, where=figure.where + added)


def _one_cell(results: Results, cell: Cell, cpus: int | None,
              adjacent: cost.AdjacentCost) -> Iterator[Figure]:
    if cell.status != "ok":
        yield _value("status", cell.status, server=cell.server, threads=cell.threads,
                     connections=cell.connections)
        return
    yield from _cell_qps(results, cell, cpus)
    yield from _cell_costs(cell, cpus, adjacent)
    yield from _cost_of_own_row(results, cell, adjacent)
    yield from _cell_latency(cell)
    yield from _flood_figures(cell)


def _cell_at(cell: Cell, flags: set[str]) -> dict:
    return {"server": cell.server, "threads": cell.threads, "connections": cell.connections,
            "flags": flags}


def _cell_flags(cell: Cell, cpus: int | None) -> set[str]:
    flags = set()
    if loadgen.generator_limit(cell, cpus).bound:
        flags.add(LOAD_GENERATOR)
    if not cell.qps_rounds:
        flags.add(BEFORE_ROUNDS)
    return flags


def _cell_qps(results: Results, cell: Cell, cpus: int | None) -> Iterator[Figure]:
    flags = _cell_flags(cell, cpus)
    at = _cell_at(cell, flags)
    q = cell.qps
    if cell.qps_rounds and cell.qps_interval is not None:
        yield from _interval("qps", cell.qps_interval, **at)
    elif q.median is not None:
        yield _value("qps", q.median, **at)
    yield _value("qps.min", q.min, **at)
    yield _value("qps.max", q.max, **at)
    for reference in ("native", "memory"):
        yield from _ratio(results, cell, reference, cpus, at)


def _ratio(results: Results, cell: Cell, reference: str, cpus: int | None,
           at: dict) -> Iterator[Figure]:
    """% of the reference's QPS in the same run: the round-paired ratio with its interval, or
    (before rounds) the ratio of the medians. Flagged when either side is the load
    generator's."""
    ref = results.cell(reference, cell.threads)
    if ref is None or ref.status != "ok":
        return
    flags = set(at["flags"])
    if loadgen.generator_limit(ref, cpus).bound:
        flags.add(LOAD_GENERATOR)
    metric = f"ratio.{reference}"
    per_round = (paired_ratios(cell.qps_by_round(), ref.qps_by_round())
                 if _in_rounds(cell) and _in_rounds(ref) else [])
    if per_round and ref is not cell:
        yield _value(f"{metric}.round_min", 100 * min(per_round), **{**at, "flags": flags})
        yield _value(f"{metric}.round_max", 100 * max(per_round), **{**at, "flags": flags})
    if ref is cell:
        yield _value(metric, 100.0, **{**at, "flags": flags})
    elif reference in cell.ratios:
        yield from _interval(metric, cell.ratios[reference], 100.0, **{**at, "flags": flags})
    elif cell.qps.median is not None and ref.qps.median:
        yield _value(metric, 100 * cell.qps.median / ref.qps.median, **{**at, "flags": flags})


def _in_rounds(cell: Cell) -> bool:
    return bool(cell.qps_rounds) and len(cell.qps_rounds) == len(cell.qps_runs)


def _cost_of_own_row(results: Results, cell: Cell,
                     adjacent: cost.AdjacentCost) -> Iterator[Figure]:
    """cost.bind: a row on another BIND (NAME@VERSION), its cost in % of NAME's measured
    next to it in the same run."""
    base = base_name(cell.server)
    own = results.cell(base, cell.threads)
    if base == cell.server or own is None or own.status != "ok":
        return
    yield from _interval("cost.bind", adjacent.ratio_to(cell, own), 100.0,
                         **_cell_at(cell, set()))


def _cell_costs(cell: Cell, cpus: int | None, adjacent: cost.AdjacentCost) -> Iterator[Figure]:
    """server_us: the median of the runs' cost with an order-statistic interval (the figure
    the table showed before the cost per query led it, which the docs cite); cost_us: the
    table's cost per query now, the geometric mean with the start-clustered interval, its
    ratio to the reference measured next to it (cost.native, cost.memory, in %) and the QPS
    per server core it implies."""
    at = _cell_at(cell, _cell_flags(cell, cpus) - {LOAD_GENERATOR})
    per_run = loadgen.server_us_interval(cell)
    if per_run is not None:
        yield from _interval("server_us", per_run, **at)
    else:
        yield _value("server_us", loadgen.server_us_per_query(cell), **at)
    figure = cost.cost_per_query(cell)
    if figure is not None:
        yield from _interval("cost_us", figure.interval, **at)
        yield from _interval("qps_per_core", cost.per_core(figure.interval), **at)
    ratio = adjacent.ratio(cell)
    if ratio is not None:
        yield from _interval(f"cost.{ratio[0]}", ratio[1], 100.0, **at)
    # named_us and rss.named_mib are the server's own process, whichever server it is: the
    # name the figure references in docs/ use (server_us is the server side, its database's
    # CPU included).
    for who, key in (("named", "server"), ("db", "db"), ("dnsperf", "dnsperf")):
        yield _value(f"{who}_us", cell.cpu_us_per_query.get(key), **at)
    for who, key in (("named", "server"), ("db", "db")):
        kb = cell.peak_rss_kb.get(key)
        yield _value(f"rss.{who}_mib", None if kb is None else kb / 1024, **at)
    use = loadgen.core_use(cell, cpus)
    yield _value("dnsperf_cores", use.dnsperf, **at)
    yield _value("server_cores", use.server, **at)
    starts = loadgen.startup_interval(cell)
    if starts is not None and starts.low is not None:
        yield from _interval("startup_ms", starts, **at)
    else:
        yield _value("startup_ms", cell.startup_ms, **at)
    yield _value("update_visible_ms", cell.update_visibility_ms, **at)
    yield _value("mismatches", cell.mismatches, **at)


def _cell_latency(cell: Cell) -> Iterator[Figure]:
    at = _cell_at(cell, set() if cell.qps_rounds else {BEFORE_ROUNDS})
    yield from _latency("unloaded", cell.latency_unloaded, at)
    yield from _latency("loaded", cell.latency_loaded, at)


def _latency(kind: str, stats: LatencyStats | None, at: dict) -> Iterator[Figure]:
    if stats is None:
        return
    for key in ("mean", "p50", "p90", "p99", "max"):
        yield _value(f"{kind}.{key}_us", getattr(stats, f"{key}_us"), **at)


def _flood_figures(cell: Cell) -> Iterator[Figure]:
    """The flood phase: the normal traffic's loss and p99 without and with the flood."""
    flood = cell.flood
    if not flood:
        return
    at = _cell_at(cell, set())
    for phase in ("without_flood", "with_flood"):
        step = flood[phase]
        name = phase.replace("_flood", "")
        if step["run"]["queries_sent"]:
            yield _value(f"flood.loss_{name}", 100 * (1 - step["answered_fraction"]), **at)
        p99 = step["latency_us"].get("p99")
        yield _value(f"flood.p99_{name}_ms", None if p99 is None else p99 / 1000, **at)
    share = flood.get("flood_answered_share")
    yield _value("flood.answered", None if share is None else 100 * share, **at)


# ---------------------------------------------------------------- capacity

def _capacity_figures(results: Results) -> Iterator[Figure]:
    for curve in results.capacity:
        at = {"server": curve.server, "threads": curve.threads}
        yield _value("closed_loop_qps", curve.closed_loop_qps, **at)
        if curve.resperf is not None:
            yield _value("resperf_max_qps", curve.resperf.max_qps, **at)
        levels = curve.levels()
        yield from _breaking(curve, "breaking", curve.breaking(UP_TO_THE_TASK), at)
        yield from _breaking(curve, "breaking_strict", curve.breaking(STRICT), at)
        yield from _walk_end(levels, at)
        for level in levels:
            yield from _level_figures(level, at)
        yield from _latency_points(curve, at)


def _breaking(curve: Curve, name: str, point: BreakingPoint, at: dict) -> Iterator[Figure]:
    """The bracket: the offered rate of the last load that held and of the first that failed,
    what ended the walk, and the held load's share of the closed loop."""
    flags = {NOT_OFFERED} if point.ended_by == NOT_OFFERED else set()
    at = {**at, "flags": flags}
    yield _value(f"{name}.held_qps", point.qps, **at)
    yield _value(f"{name}.failed_qps", point.failed_qps, **at)
    yield _value(f"{name}.ended_by", point.ended_by, **at)
    if point.qps is not None and curve.closed_loop_qps:
        yield _value(f"{name}.of_closed_loop", 100 * point.qps / curve.closed_loop_qps, **at)


def _walk_end(levels: list[Level], at: dict) -> Iterator[Figure]:
    """The load that ended the walk up the steps (5% loss): its % of the closed loop and its
    answered share, whether the server lost it or the load generator did not offer it."""
    for level in levels:
        if level.outcome() != "held":
            here = {**at, "flags": set() if level.offered else {NOT_OFFERED}}
            yield _value("breaking.ended_percent", level.percent, **here)
            yield _value("breaking.ended_offered_qps", level.offered_qps, **here)
            yield _value("breaking.ended_answered", 100 * level.answered_fraction, **here)
            return


def _level_figures(level: Level, at: dict) -> Iterator[Figure]:
    """One offered load (its % of the closed loop), over its repeats."""
    flags = set() if level.offered else {NOT_OFFERED}
    here = {**at, "percent": level.percent, "flags": flags}
    yield _value("step.target_qps", level.target_qps, **here)
    yield _value("step.offered_qps", level.offered_qps, **here)
    yield _value("step.answered", 100 * level.answered_fraction, **here)
    yield _value("step.outcome", level.outcome(), **here)
    for step in level.steps:
        again = {**here, "repeat": step.repeat}
        yield _value("step.lost", step.lost, **again)
        yield _value("step.rcvbuf_errors", step.udp_rcvbuf_errors, **again)
        for key in ("p50", "p99"):
            yield _value(f"step.{key}_us", step.latency_us.get(key), **again)
        drops = step.socket_drops
        if drops is not None:
            yield _value("step.server_drops", drops.server, **again)
            yield _value("step.generator_drops", drops.load_generator, **again)


def _latency_points(curve: Curve, at: dict) -> Iterator[Figure]:
    points = [(f"{100 * p.share:g}", p.step) for p in curve.latency_points]
    if curve.common_rate_step is not None:
        points.append(("common", curve.common_rate_step))
    for share, step in points:
        for key in ("p50", "p99", "p99.9"):
            value = step.latency_us.get(key)
            yield _value(f"latency.{key}_us", value, **at, share=share)


# ---------------------------------------------------------------- startup, scale, signed, tune

def _startup_figures(results: Results) -> Iterator[Figure]:
    for p in results.startup_scaling:
        at = {"server": p.server, "zones": p.zones}
        if p.status != "ok":
            yield _value("status", p.status, **at)
            continue
        interval = p.interval()
        if interval is not None:
            yield from _interval("startup_s", interval, scale=1 / 1000, **at)
            # The spread of the starts themselves (a wide interval says how wide; these say
            # which start).
            yield _value("startup_fastest_s", min(p.starts_ms) / 1000, **at)
            yield _value("startup_slowest_s", max(p.starts_ms) / 1000, **at)
        else:
            yield _value("startup_s", None if p.startup_ms is None else p.startup_ms / 1000,
                         **at)
        yield _value("rss_mib", None if p.server_rss_kb is None else p.server_rss_kb / 1024,
                     **at)
        yield _value("store_mb", None if p.store_bytes is None else p.store_bytes / 1e6, **at)
        yield _value("load_s", p.load_seconds, **at)
        yield _value("records_per_s", p.records_per_second, **at)
        yield _value("loader_rss_mib",
                     None if p.loader_rss_kb is None else p.loader_rss_kb / 1024, **at)


def _scale_figures(results: Results) -> Iterator[Figure]:
    cpus = loadgen.server_cpus(results.meta)
    for size in results.scale:
        at = {"server": size.server, "threads": size.cell.threads, "zones": size.zones,
              "records": size.records_per_zone, "mix": size.mix, "shape": size.shape}
        if size.not_measured or size.cell.status != "ok":
            yield _value("status", size.not_measured or size.cell.status, **at)
            continue
        cell = size.cell
        yield _value("qps", cell.qps.median, **at, flags=_cell_flags(cell, cpus))
        yield _value("named_us", cell.cpu_us_per_query.get("server"), **at)
        yield _value("db_us", cell.cpu_us_per_query.get("db"), **at)
        if cell.latency_loaded is not None:
            p99 = cell.latency_loaded.p99_us
            yield _value("loaded.p99_us", p99, **at)
        hit = (size.cache or {}).get("hit_ratio")
        yield _value("cache_hit", None if hit is None else 100 * hit, **at)
        share = (size.cache or {}).get("resident_share")
        yield _value("cache_resident", None if share is None else 100 * share, **at)
        yield _value("rss.named_mib", _mib(cell.peak_rss_kb.get("server")), **at)
        configured = (size.cache or {}).get("configured_bytes")
        yield _value("cache_mib", None if configured is None else configured / 2**20, **at)
        yield _value("load_s", size.load_seconds, **at)
        yield _value("store_mb", None if size.store_bytes is None else size.store_bytes / 1e6,
                     **at)


def _mib(kb: float | None) -> float | None:
    return None if kb is None else kb / 1024


def _signed_figures(results: Results) -> Iterator[Figure]:
    cpus = loadgen.server_cpus(results.meta)
    for signed in results.signed:
        cell = signed.cell
        at = {"server": signed.server, "threads": cell.threads, "variant": signed.variant}
        if cell.status != "ok":
            yield _value("status", cell.status, **at)
            continue
        yield _value("qps", cell.qps.median, **at, flags=_cell_flags(cell, cpus))
        yield _value("named_us", cell.cpu_us_per_query.get("server"), **at)
        yield _value("db_us", cell.cpu_us_per_query.get("db"), **at)
        yield _value("server_us", loadgen.server_us_per_query(cell), **at)
        runs = cell.qps_runs
        if runs:
            completed = sum(r.queries_completed for r in runs)
            seconds = sum(r.run_time_s for r in runs)
            received = sum(r.response_bytes * r.queries_completed for r in runs)
            yield _value("reply_bytes", received / completed if completed else None, **at)
            yield _value("reply_mbit_s", 8 * received / seconds / 1e6 if seconds else None,
                         **at)
        yield _value("records", signed.records, **at)
        yield _value("store_mib", None if signed.store_bytes is None
                     else signed.store_bytes / 2**20, **at)
        yield _value("load_s", signed.load_seconds, **at)
        yield _value("truncated", signed.truncated, **at)


def _tuning_figures(results: Results) -> Iterator[Figure]:
    tuning = results.tuning
    if tuning is None:
        return
    rtt = tuning.db_rtt_ms
    added = (tuning.added_rtt or {}).get("measured_added_ms")
    yield _value("added_rtt_ms", added, rtt=rtt)
    for r in tuning.recommendations:
        at = {"server": r.server, "rtt": rtt}
        yield _value("recommended.threads", r.threads, **at)
        yield _value("recommended.connections", r.connections, **at)
    for cell in results.cells:
        yield from _interval("qps.starts", qps_over_starts(cell), server=cell.server,
                             threads=cell.threads, connections=cell.connections, rtt=rtt)
    for point in tuning.scaling:
        if point.status == "ok":
            yield _value("scaling.qps", point.qps, server=point.server, threads=point.threads,
                         kind=point.kind, count=point.count, rtt=rtt)


# ---------------------------------------------------------------- instructions, faults

def _instruction_figures(results: Results) -> Iterator[Figure]:
    section = results.instructions
    if section is None:
        return
    for server in section.servers:
        if server.status != "ok":
            continue
        at = {"server": server.server}
        yield _value("instructions.database_process",
                     server.database if server.database_counted else None, **at)
        for which in ("named", "database", "total"):
            yield _value(f"instructions.{which}", server.mean(which), **at)
            spread = server.agreement(which)
            yield _value(f"instructions.{which}_spread",
                         None if spread is None else 100 * spread, **at)


def _fault_figures(results: Results) -> Iterator[Figure]:
    section = results.faults
    if section is None:
        return
    yield _value("offered_qps", section.qps)
    for server in section.servers:
        yield from _server_fault_figures(server, section.qps)


def _server_fault_figures(server: ServerFaults, qps: float) -> Iterator[Figure]:
    at = {"server": server.server, "threads": server.threads, "qps": qps}
    if server.baseline_share is not None:
        yield _value("faults.baseline_answered", 100 * server.baseline_share, **at)
    for fault in server.faults:
        here = {**at, "fault": fault.kind}
        yield _value("fault.first_servfail_s", fault.first_servfail_s, **here)
        yield _value("fault.recovered_s", fault.recovered_s, **here)
        yield _value("fault.settled_s", fault.settled_s, **here)
        for key in ("sent", "servfail", "lost"):
            yield _value(f"fault.{key}", getattr(fault, key), **here)
        if fault.bypassed_s is not None:  # a change channel cut (channel-cut)
            yield _value("fault.bypassed_s", fault.bypassed_s, **here)
            yield _value("fault.cache_back_s", fault.cache_back_s, **here)
        yield _value("fault.recovered", "yes" if fault.recovered else "no", **here)
        if fault.recovered_s is not None and fault.started_s is not None \
                and fault.ended_s is not None:
            # Back after the fault's action was over: the database's return, not its absence.
            yield _value("fault.back_s", fault.recovered_s - (fault.ended_s - fault.started_s),
                         **here)


# ---------------------------------------------------------------- writes, updates

def _write_figures(results: Results) -> Iterator[Figure]:
    section = results.writes
    if section is None:
        return
    for entry in section.servers:
        yield from _server_write_figures(entry, section.via)


def _server_write_figures(entry: ServerWrites, via: str) -> Iterator[Figure]:
    at = {"server": entry.server, "via": via}
    if entry.status != "ok":
        yield _value("status", entry.status, **at)
        yield _value("status.reason", entry.error, **at)
        return
    yield _value("reads_offered", entry.read_qps, **at)
    yield _value("reads_sent", entry.reads_sent(), **at)
    yield _value("checked", entry.checked, **at)
    yield _value("differing", len(entry.differing), **at)
    for step in entry.steps():
        here = {**at, "rate": "ceiling" if step.rate == CEILING else step.rate}
        yield from _interval("reads", step.qps, **here)
        yield from _interval("read_loss", step.loss, 100.0, **here)
        yield from _interval("read_p50_ms", step.p50_us, 1e-3, **here)
        yield from _interval("read_p99_ms", step.p99_us, 1e-3, **here)
        yield from _interval("write_rate", step.write_rate, **here)
        yield from _interval("cpu_per_read_us", step.cpu_us_per_read, **here)
        yield from _interval("db_cpu", step.db_cpu_share, 100.0, **here)
        yield from _interval("server_cpu", step.server_cpu_share, 100.0, **here)
        yield _value("visible_p50_ms", step.visible_p50_ms, **here)
        yield _value("visible_p99_ms", step.visible_p99_ms, **here)
        yield _value("visible_max_ms", step.visible_max_ms, **here)
        yield _value("sampled", step.sampled, **here)
        yield _value("not_seen", step.not_seen, **here)
        yield _value("stale_writes", step.stale_writes, **here)
        yield _value("stale_answers", step.stale_answers, **here)


def _update_figures(results: Results) -> Iterator[Figure]:
    section = results.updates
    if section is None:
        return
    for cell in section.cells:
        at = {"server": cell.server, "batch": cell.batch, "tsig": cell.tsig}
        if cell.status != "ok":
            yield _value("status", cell.status, **at)
            continue
        yield from _interval("records_per_s", cell.records_per_s, **at)
        yield from _interval("messages_per_s", cell.messages_per_s, **at)
        yield from _interval("ratio.native", cell.ratio_to_native, 100.0, **at)
        for who, us in cell.cpu_us_per_record.items():
            yield _value(f"{who}_us_per_record", us, **at)
    for check in section.checks:
        at = {"server": check.server}
        yield _value("check.identical", check.identical, **at)
        yield _value("check.compared", check.compared, **at)
        yield _value("check.unexplained", check.unexplained, **at)
