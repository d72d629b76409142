"""The `scale` part of results.md and its plot: per query mix, a table of server x zone count
(QPS, p99 under load), the zone-shape table, every cell's figures with the database's cache,
and scale.png: QPS and p99 against zone count (log x), one line per server."""

from __future__ import annotations

from pathlib import Path

from bench.measure.results import Results
from bench.measure.scale_cells import SizeCell
from bench.report.comparing import Comparison, Figure, figure_rows, pairs, same_boot, status_row
from bench.report.format import NONE, fmt_number, markdown_table
from bench.report.style import server_style
from servers import report_order


def _status(point: SizeCell) -> str | None:
    """NOT MEASURED / FAILED / WRONG for a cell without valid figures, else None."""
    if point.not_measured:
        return "NOT MEASURED"
    if point.cell.status != "ok":
        return point.cell.status.upper()
    return None


def _p99(point: SizeCell) -> float | None:
    stats = point.cell.latency_loaded
    return stats.p99_us if stats is not None else None


def _summary(point: SizeCell) -> str:
    """QPS, then p99 under load in microseconds."""
    status = _status(point)
    if status:
        return status
    return f"{fmt_number(point.cell.qps.median, 0)} / {fmt_number(_p99(point), 0)} us"


def _curve(results: Results) -> list[SizeCell]:
    """The zone-count curve: the cells at the run's --records records per zone."""
    records = results.meta.get("scale", {}).get("records")
    return [p for p in results.scale if p.records_per_zone == records or
            (records is None and not p.shape)]


def _mixes(points: list[SizeCell]) -> list[str]:
    return sorted({p.mix for p in points}, key=lambda m: (m != "uniform", m))


def _grid(points: list[SizeCell], mix: str, column: str) -> list[str]:
    """Server x data set (zone count, or shape) for one mix: QPS / p99 under load."""
    mine: dict[tuple[str, int | str], SizeCell] = {
        (p.server, p.zones if column == "zones" else _shape(p)): p
        for p in points if p.mix == mix}
    columns = sorted({c for _, c in mine}, key=_column_order)
    servers = sorted({s for s, _ in mine}, key=report_order)
    rows = [[s, *(_summary(mine[s, c]) if (s, c) in mine else NONE for c in columns)]
            for s in servers]
    labels = [f"{c:,} zones" if isinstance(c, int) else c for c in columns]
    return markdown_table(["server", *labels], rows)


def _shape(point: SizeCell) -> str:
    return f"{point.zones:,} x {point.records_per_zone:,}"


def _column_order(column: int | str) -> tuple[int, int]:
    if isinstance(column, int):
        return column, 0
    zones, records = column.replace(",", "").split(" x ")
    return int(zones), int(records)


def _cache_text(cache: dict | None) -> str:
    if not cache:
        return NONE
    if cache.get("hit_ratio") is not None:
        return f"{100 * cache['hit_ratio']:.1f}% hits"
    if cache.get("resident_share") is not None:
        return f"{100 * cache['resident_share']:.1f}% resident"
    return "not readable"


def _mib(value: float | None) -> str:
    return fmt_number(None if value is None else value / 1048576, 0)


def _detail_row(p: SizeCell) -> list[str]:
    where = [p.server, f"{p.zones:,}", f"{p.records_per_zone:,}", p.mix]
    status = _status(p)
    if status:
        reason = p.not_measured or p.cell.error or "no reason recorded"
        return [*where, f"{status}: {reason.splitlines()[0]}", *[NONE] * 10]
    c = p.cell
    cpu, rss = c.cpu_us_per_query, c.peak_rss_kb
    unloaded = c.latency_unloaded
    cache = p.cache or {}
    return [*where, fmt_number(c.qps.median, 0),
            fmt_number(unloaded.p50_us if unloaded else None, 0),
            fmt_number(unloaded.p99_us if unloaded else None, 0), fmt_number(_p99(p), 0),
            fmt_number(cpu.get("server"), 1), fmt_number(cpu.get("db"), 1),
            _mib((rss.get("server") or 0) * 1024 or None),
            _mib((rss.get("db") or 0) * 1024 or None),
            _mib(p.store_bytes), _cache_text(p.cache), _mib(cache.get("configured_bytes"))]


def render_scale(results: Results) -> list[str]:
    if not results.scale:
        return []
    meta = results.meta.get("scale", {})
    lines = ["## QPS and latency against data size (scale)", "",
             "Each cell: the store's database server restarted (its cache cold), the server "
             "started, a "
             "warm-up, then QPS (closed loop, median of the runs) and the p99 of single "
             "probes under that load, in microseconds. Query mixes over the whole data set: "
             "uniform (every zone equally often) and popular (Zipf-like, rank r asked for with "
             f"weight 1/r^{meta.get('zipf_exponent', '?')}); both keep the hit / NXDOMAIN / "
             "NODATA shares of `generate`. Answers are checked by their rcodes only (NOERROR "
             "or NXDOMAIN in the query file's shares); `run` and `verify` compare them with "
             "native BIND's.", ""]
    curve = _curve(results)
    for mix in _mixes(curve):
        lines += [f"### {mix} mix: QPS / p99 under load", ""]
        lines += _grid(curve, mix, "zones") + [""]
    shapes = [p for p in results.scale if p.shape]
    for mix in _mixes(shapes):
        lines += [f"### Zone shape, {mix} mix: zones x records per zone, QPS / p99 under load",
                  ""]
        lines += _grid(shapes, mix, "shape") + [""]
    header = ["server", "zones", "records/zone", "mix", "QPS", "unloaded p50", "p99",
              "loaded p99", "CPU us/q server", "db", "RSS server (MiB)", "db (MiB)",
              "store (MiB)", "db cache", "cache size (MiB)"]
    ordered = sorted(results.scale, key=lambda p: (report_order(p.server), p.zones,
                                                   p.records_per_zone, p.mix))
    lines += ["### Every cell", "",
              "CPU per answered query over the QPS runs; RSS: peak of the server and of the "
              "database's processes; store: its files on disk; db cache: the database's own "
              "cache over the QPS runs (hit ratio of its requests, or for slapd the share of "
              "its data file resident in its mapping), and its configured size ('not "
              "readable': a cache inside the server).", ""]
    lines += markdown_table(header, [_detail_row(p) for p in ordered]) + [""]
    sources = sorted({(p.server, p.cache["source"]) for p in results.scale if p.cache},
                     key=lambda item: report_order(item[0]))
    if sources:
        lines += ["Cache figures read from:", ""]
        lines += [f"- {server}: {source}" for server, source in sources] + [""]
    return lines


def render_scale_plot(results: Results, out_dir: Path) -> list[Path]:
    """scale.png: per mix, QPS and p99 under load against zone count (log x)."""
    curve = [p for p in _curve(results) if _status(p) is None]
    mixes = _mixes(curve)
    if not mixes:
        return []
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(mixes), 2, figsize=(11, 4.2 * len(mixes)), squeeze=False)
    for row, mix in zip(axes, mixes, strict=True):
        mine = [p for p in curve if p.mix == mix]
        for server in sorted({p.server for p in mine}, key=report_order):
            points = sorted((p for p in mine if p.server == server), key=lambda p: p.zones)
            qps = [p for p in points if p.cell.qps.median is not None]
            p99 = [p for p in points if _p99(p) is not None]
            row[0].plot([p.zones for p in qps], [p.cell.qps.median for p in qps],
                        **server_style(server))
            row[1].plot([p.zones for p in p99], [_p99(p) for p in p99], **server_style(server))
        for ax, what in zip(row, ("queries per second", "p99 under load (us)"), strict=True):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("zones")
            ax.set_ylabel(what)
            ax.set_title(f"{mix} mix: {what}")
            ax.grid(which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    path = out_dir / "scale.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


# ---------------------------------------------------------------- compare

def _cache_share(point: SizeCell) -> float | None:
    """The database cache's hit ratio (or slapd's resident share), in %."""
    cache = point.cache or {}
    share = cache.get("hit_ratio", cache.get("resident_share"))
    return None if share is None else 100 * share


FIGURES: list[Figure[SizeCell]] = [
    Figure("QPS median", lambda p: p.cell.qps_interval, rate=True),
    Figure("unloaded p50 (us)", lambda p: _stat(p, "unloaded", "p50_us")),
    Figure("unloaded p99 (us)", lambda p: _stat(p, "unloaded", "p99_us")),
    Figure("loaded p99 (us)", _p99),
    Figure("CPU us/query server", lambda p: p.cell.cpu_us_per_query.get("server")),
    Figure("CPU us/query db", lambda p: p.cell.cpu_us_per_query.get("db")),
    Figure("peak RSS server (kB)", lambda p: p.cell.peak_rss_kb.get("server")),
    Figure("peak RSS db (kB)", lambda p: p.cell.peak_rss_kb.get("db")),
    Figure("store size (bytes)", lambda p: p.store_bytes),
    Figure("db cache (% hits or resident)", _cache_share),
    Figure("load (s)", lambda p: p.load_seconds),
    Figure("load (records/s)", lambda p: p.records_per_second, rate=True),
]


def _stat(point: SizeCell, kind: str, attr: str) -> float | None:
    stats = point.cell.latency_unloaded if kind == "unloaded" else point.cell.latency_loaded
    return None if stats is None else getattr(stats, attr)


def compare_scale(a: Results, b: Results) -> Comparison:
    """Cells matched by (server, zones, records per zone, mix)."""
    matched, only = pairs(a.scale, b.scale, lambda p: p.key,
                          lambda k: f"scale of {k[0]} at {_where(*k[1:])}")
    boot = same_boot(a, b)
    rows: list[str] = []
    for (server, zones, records, mix), old, new in matched:
        place = _where(zones, records, mix)
        if _status(old) or _status(new):
            rows.append(status_row(server, place, _status(old) or "ok", _status(new) or "ok"))
        else:
            rows += figure_rows(server, place, FIGURES, old, new, boot)
    return Comparison(rows, only)


def _where(zones: int, records: int, mix: str) -> str:
    return f"{zones:,} x {records:,}, {mix}"
