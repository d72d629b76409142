"""`bench scale` scaled down: 200 and 2,000 zones, no timing asserted.

Without servers: both query mixes ask for every zone class they claim (uniform: every zone;
popular: every decile of the popularity order, in falling shares) with generate's hit /
NXDOMAIN / NODATA split, each line checked against the generated zone it names; the popular
mix's skew is the stated exponent's; bad options are one error line.
With servers (the command itself): one server of each store measured under the uniform mix
at 200 zones, in two runs made at once (every zone asked: the store's cache figures and
rcodes), the cache figures of every store that has them read, --add-to merging a count and a
shape under both mixes into memory's run (made after it, while the other run goes on), the
memory driver's cells under the popular mix among them. (`startup` loads every store at 2,000
zones; two counts here cost three minutes of the suite and added no check. The popular mix
asks the same names as the uniform one, more often for some: every store under it cost a
minute more and exercised no other path of a store.)
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import dns.name
import pytest

from bench.measure.results import load_results
from bench.measure.scale_cells import SizeCell
from databases.database import Database, DirectoryDatabase
from servers import SERVERS, get_server
from tests.at_once import results_at_once
from tests.benchcli import processes_under, run_bench
from zonedata.generator import generate, generate_zone
from zonedata.mixes import MixWriter, expected_share, plan_mix
from zonedata.model import empty_nonterminals
from zonedata.queries import DEFAULT_QUERY_MIX, NXDOMAIN_PREFIX, split_count

SMALL, LARGE = 200, 2000
QUERIES = 20000
_ZONE = re.compile(r"(?:^|\.)z(\d{6})\.bench\.test\.$")


def _write(tmp: Path, zones: int, mix: str, count: int, exponent: float = 1.0) -> Path:
    path = tmp / f"{mix}-{zones}-{exponent:g}.txt"
    writer = MixWriter({path: plan_mix(mix, zones, count, exponent=exponent, seed=1)})
    for _ in writer.watch(generate(zones, 10, 1)):
        pass
    writer.write()
    return path


def _lines(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split()) for line in path.read_text().splitlines()]


def _zone_of(name: str) -> int:
    match = _ZONE.search(name)
    assert match, name
    return int(match.group(1))


def _kind(name: str, rdtype: str) -> str:
    """What the generated zone answers to the query, from the zone itself."""
    zone = generate_zone(_zone_of(name), 10, 1)
    owner = dns.name.from_text(name)
    if owner.labels[0].decode().startswith(NXDOMAIN_PREFIX):
        names = {r.owner for r in zone.records} | set(empty_nonterminals(zone))
        assert owner not in names
        return "nxdomain"
    types = {r.rdtype for r in zone.records if r.owner == owner}
    if rdtype in types:
        return "hit"
    assert owner in empty_nonterminals(zone) or types, (name, rdtype)
    return "nodata"


@pytest.mark.parametrize("zones", [SMALL, LARGE])
def test_uniform_mix_asks_for_every_zone_evenly(tmp_path: Path, zones: int) -> None:
    per_zone = collections.Counter(_zone_of(n) for n, _ in _lines(
        _write(tmp_path, zones, "uniform", QUERIES)))
    assert set(per_zone) == set(range(zones))
    assert max(per_zone.values()) - min(per_zone.values()) <= 1


@pytest.mark.parametrize("mix", ["uniform", "popular"])
def test_both_mixes_keep_the_kinds_of_generate(tmp_path: Path, mix: str) -> None:
    lines = _lines(_write(tmp_path, SMALL, mix, 2000))
    kinds = collections.Counter(_kind(name, rdtype) for name, rdtype in lines)
    assert kinds == collections.Counter(split_count(2000, DEFAULT_QUERY_MIX))


@pytest.mark.parametrize("zones", [SMALL, LARGE])
def test_popular_mix_reaches_every_decile_in_falling_shares(tmp_path: Path, zones: int) -> None:
    order = plan_mix("popular", zones, 1, seed=1).order
    rank = {zone: r for r, zone in enumerate(order)}
    per_decile = collections.Counter(rank[_zone_of(n)] * 10 // zones for n, _ in _lines(
        _write(tmp_path, zones, "popular", QUERIES)))
    shares = [per_decile[d] for d in range(10)]
    assert all(shares), shares
    assert shares == sorted(shares, reverse=True), shares


@pytest.mark.parametrize("exponent", [0.5, 1.0, 2.0])
def test_popular_mix_is_skewed_as_stated(tmp_path: Path, exponent: float) -> None:
    zones = LARGE
    order = plan_mix("popular", zones, 1, exponent=exponent, seed=1).order
    per_zone = collections.Counter(_zone_of(n) for n, _ in _lines(
        _write(tmp_path, zones, "popular", QUERIES, exponent)))
    for top in (1, 10, 200):
        share = sum(per_zone[z] for z in order[:top]) / QUERIES
        assert share == pytest.approx(expected_share(zones, exponent, top), abs=0.02), top
    # The most popular zone against the second: 2**exponent as often.
    ratio = per_zone[order[0]] / per_zone[order[1]]
    assert ratio == pytest.approx(2 ** exponent, rel=0.15)


def test_a_larger_exponent_is_a_hotter_set(tmp_path: Path) -> None:
    tops = []
    for exponent in (0.0, 0.5, 1.0, 2.0):
        per_zone = collections.Counter(_zone_of(n) for n, _ in _lines(
            _write(tmp_path, SMALL, "popular", QUERIES, exponent)))
        tops.append(sum(count for _, count in per_zone.most_common(SMALL // 10)))
    assert tops == sorted(tops) and tops[0] < tops[-1], tops


@pytest.mark.check
def test_popularity_order_is_seeded_and_not_the_load_order() -> None:
    first = plan_mix("popular", LARGE, 10, seed=1).order
    assert first == plan_mix("popular", LARGE, 10, seed=1).order
    assert first != plan_mix("popular", LARGE, 10, seed=2).order
    assert first[:10] != list(range(10))


@pytest.mark.parametrize("args, words", [
    (["--zones-counts", "0"], "--zones-counts"),
    (["--zones-counts", "100,0"], "--zones-counts"),
    (["--zipf", "-1"], "--zipf -1"),
    (["--zipf", "-0.5"], "--zipf -0.5"),
    (["--shapes", "10x0"], "--shapes"),
    (["--shapes", "ten"], "--shapes"),
    (["--mixes", "hot"], "--mixes"),
    (["--queries", "0"], "--queries"),
])
def test_bad_input_is_one_error_line(run_root: Path, args: list[str], words: str) -> None:
    done = run_bench(run_root, "scale", "--servers", "native", *args, timeout=60)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], lines


# --- the command, with servers ----------------------------------------------------------------

def _one_per_store() -> list[str]:
    """The first built server of each store: what scale varies is the data, and what grows
    with it is the store's (the servers over one store share it; each is checked by its own
    tests and by `startup`)."""
    first: dict[str, str] = {}
    for server in SERVERS:
        if server.is_built():
            first.setdefault(server.store, server.name)
    return list(first.values())


def _scale(out: Path, run_root: Path, servers: list[str]) -> Path:
    done = run_bench(run_root, "scale", "--profile", "tiny", "--zones-counts", f"{SMALL}",
                     "--servers", ",".join(servers), "--mixes", "uniform",
                     "--out", str(out), timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


# The --add-to run: memory at a new count and a shape, under both mixes (6 cells, 24 s of the
# suite), counted as ADD_TO_STORES stores' cells (8 s each, one after the other) when the
# stores are shared out between the two runs.
ADD_TO = ["--servers", "memory", "--zones-counts", f"100,{SMALL}", "--shapes", "10x200",
          "--mixes", "uniform,popular"]
ADD_TO_STORES = 3


def _halves(stores: list[str]) -> list[tuple[str, ...]]:
    """The stores in two runs, memory's with the --add-to run's work after it: each store
    goes to the run with less to do so far."""
    halves: list[list[str]] = [["memory"], []]
    work = [1 + ADD_TO_STORES, 0]
    for store in (s for s in stores if s != "memory"):
        lighter = work.index(min(work))
        halves[lighter].append(store)
        work[lighter] += 1
    return [tuple(half) for half in halves]


@dataclass
class ScaleRuns:
    """Each run's results directory as the run left it, by its servers (memory's: a copy,
    `before`); memory's run's own directory, which the --add-to run then extended; and that
    run."""

    measured: dict[tuple[str, ...], Path]
    before: Path
    extended: Path
    added: subprocess.CompletedProcess[str]


def _scale_and_add_to(out: Path, run_root: Path, servers: list[str],
                      copy: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """memory's run, a copy of its results, then the --add-to run into it."""
    _scale(out, run_root, servers)
    shutil.copytree(out, copy)
    added = run_bench(run_root, "scale", "--profile", "tiny", *ADD_TO, "--add-to", str(out),
                      timeout=3600)
    return copy, added


@pytest.fixture(scope="module")
def scale_all(tmp_path_factory: pytest.TempPathFactory, run_root: Path) -> ScaleRuns:
    """Every store's server measured, in two `scale` runs made at once (each with servers of
    its own), the --add-to run after memory's: a cell mostly waits, on a database server's
    start and the load, so the two overlap (one run of all 11 took 112 s of the suite on 2
    vCPUs; the two runs 55 s and the --add-to run after them 24 s)."""
    extended, other = _halves(_one_per_store())
    outs = {servers: tmp_path_factory.mktemp("scale") for servers in (extended, other)}
    runs = results_at_once({
        "extended": partial(_scale_and_add_to, outs[extended], run_root, list(extended),
                            tmp_path_factory.mktemp("scale-as-run") / "results"),
        "other": partial(_scale, outs[other], run_root, list(other))})
    copy, added = runs["extended"]
    return ScaleRuns({extended: copy, other: outs[other]}, copy, outs[extended], added)


@pytest.fixture(scope="module")
def scale_runs(scale_all: ScaleRuns) -> dict[tuple[str, ...], Path]:
    return scale_all.measured


@pytest.fixture(scope="module")
def scale_run(scale_all: ScaleRuns) -> Path:
    """The run that measured the memory driver, which --add-to extended."""
    return scale_all.extended


def _assert_measured(point: SizeCell) -> None:
    assert point.not_measured is None, point.key  # a few thousand zones fit anywhere
    assert point.cell.status == "ok", (point.key, point.cell.error)
    assert point.cell.qps.median and point.cell.latency_loaded, point.key
    assert point.cell.latency_unloaded and point.cell.cpu_us_per_query["server"], point.key
    assert point.cell.peak_rss_kb["server"] and point.store_bytes, point.key


def test_every_store_is_measured(scale_runs: dict[tuple[str, ...], Path]) -> None:
    assert sorted(s for servers in scale_runs for s in servers) == sorted(_one_per_store())
    for servers, out in scale_runs.items():
        cells = {p.key: p for p in load_results(out).scale}
        assert set(cells) == {(d, SMALL, 10, "uniform") for d in servers}
        for point in cells.values():
            _assert_measured(point)


def _has_cache(database: Database) -> bool:
    """Does the store's database have cache figures of its own to read (a directory's, from
    its loader; a server's, by overriding Database.cache_reading)?"""
    if isinstance(database, DirectoryDatabase):
        return database.cache is not None
    return type(database).cache_reading is not Database.cache_reading


def test_cache_figures_are_read_for_every_store_that_has_them(
        scale_runs: dict[tuple[str, ...], Path]) -> None:
    for point in (p for out in scale_runs.values() for p in load_results(out).scale):
        database = get_server(point.server).loader().database
        if not _has_cache(database):
            assert point.cache is None, point.key
            continue
        cache = point.cache
        assert cache and cache["source"], point.key
        if cache["hits"] is not None:  # a counted cache: requests were made during the runs
            assert cache["hits"] + cache["misses"] > 0, point.key
            assert 0 <= cache["hit_ratio"] <= 1, point.key
        elif cache["mapped_bytes"] is not None:  # slapd: its data file partly in memory
            assert 0 < cache["resident_share"] <= 1, point.key
            if point.mix == "uniform":  # every zone asked for: most of the data was read
                assert cache["resident_share"] > 0.5, point.key
        else:  # a cache inside named: its configured size at least
            assert cache["configured_bytes"], point.key


def test_each_report_has_the_tables_and_the_plot(
        scale_runs: dict[tuple[str, ...], Path]) -> None:
    for out in scale_runs.values():
        markdown = (out / "results.md").read_text()
        for title in ("### uniform mix: QPS / p99 under load", "### Every cell"):
            assert title in markdown, out
        assert f"{SMALL:,} zones" in markdown
        assert "## 1 thread" not in markdown  # no `run` tables in a scale-only file
        assert (out / "scale.png").read_bytes()[:4] == b"\x89PNG"


def test_add_to_merges_and_replaces(scale_all: ScaleRuns, scale_run: Path) -> None:
    before = {p.key: p for p in load_results(scale_all.before).scale}
    done = scale_all.added
    assert done.returncode == 0, done.stderr[-3000:]
    results = load_results(scale_run)
    after = {p.key: p for p in results.scale}
    added = {("memory", zones, records, mix) for zones, records in ((100, 10), (10, 200))
             for mix in ("uniform", "popular")} | {("memory", SMALL, 10, "popular")}
    assert set(after) == set(before) | added
    assert after["memory", 10, 200, "popular"].shape
    for key in added:
        _assert_measured(after[key])
    # Measured again: a new cell in the old one's place, every other cell untouched.
    assert after["memory", SMALL, 10, "uniform"] != before["memory", SMALL, 10, "uniform"]
    for key in set(before) - {("memory", SMALL, 10, "uniform")}:
        assert after[key] == before[key], key
    assert [r["command"] for r in results.meta["added_runs"]] == ["scale"]
    markdown = (scale_run / "results.md").read_text()
    assert "Zone shape, popular mix" in markdown and "Points added by later runs" in markdown
    assert "### popular mix: QPS / p99 under load" in markdown


def test_add_to_refuses_other_measuring_conditions(scale_run: Path, run_root: Path) -> None:
    done = run_bench(run_root, "scale", "--profile", "tiny", "--servers", "memory",
                     "--zones-counts", "100", "--zipf", "2", "--add-to", str(scale_run))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: the results were measured with zipf_exponent=1.0, not 2.0: their cells would "
        "not be comparable"]


def test_no_server_is_left_running(scale_runs: dict[tuple[str, ...], Path],
                                   run_root: Path) -> None:
    assert processes_under(run_root) == []
