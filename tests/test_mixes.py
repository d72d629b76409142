"""Traffic mixes that cost the database (docs/method/mixes.md): --nxdomain-share,
--unknown-zone-share and the random-subdomain flood. Every share is counted on the query file
the suite writes, each name classified from the data set itself; the flood is run once on the
tiny profile and must report both traffic classes."""

from __future__ import annotations

import collections
from pathlib import Path

import dns.name
import pytest

from base.errors import UserError
from bench.load.dnsperf import DnsperfRun
from bench.measure.cells import Cell
from bench.measure.results import load_results
from bench.measure.scale import check_rcodes
from tests.benchcli import run_bench
from zonedata.generator import generate
from zonedata.mixes import MixWriter, plan_mix
from zonedata.model import Zone, empty_nonterminals
from zonedata.queries import (
    NXDOMAIN_PREFIX,
    UNKNOWN_MAX_DEPTH,
    split_count,
    traffic_mix,
    write_flood_file,
    write_query_file,
)

ZONES = 20


def _zones() -> list[Zone]:
    return list(generate(ZONES, 10, 1))


def _zone_of(name: dns.name.Name, origins: set[dns.name.Name]) -> dns.name.Name | None:
    """The closest enclosing zone of the data set (None: the name is under no zone)."""
    current = name
    while True:
        if current in origins:
            return current
        if current == dns.name.root:
            return None
        current = current.parent()


def _kinds(path: Path, zones: list[Zone]) -> tuple[collections.Counter[str], list[str]]:
    """Queries of the file per kind, from the data set: unknown (under no zone), nxdomain
    (a name the zone does not have), or answered (hit or nodata); and the unknown names."""
    by_origin = {zone.origin: zone for zone in zones}
    counts: collections.Counter[str] = collections.Counter()
    unknown = []
    for line in path.read_text().splitlines():
        text, _ = line.split()
        name = dns.name.from_text(text)
        origin = _zone_of(name, set(by_origin))
        if origin is None:
            counts["unknown"] += 1
            unknown.append(text)
            continue
        zone = by_origin[origin]
        names = {r.owner for r in zone.records} | set(empty_nonterminals(zone))
        if name in names:
            counts["answered"] += 1
        else:
            assert name.labels[0].decode().startswith(NXDOMAIN_PREFIX), text
            counts["nxdomain"] += 1
    return counts, unknown


def _expected(count: int, mix: dict[str, float]) -> collections.Counter[str]:
    split = split_count(count, mix)
    return collections.Counter({"unknown": split["unknown"], "nxdomain": split["nxdomain"],
                                "answered": split["hit"] + split["nodata"]})


@pytest.mark.check
@pytest.mark.parametrize(("nxdomain", "unknown"),
                         [(0, 0), (50, 0), (100, 0), (30, 20), (0, 100), (33.3, 33.3)])
def test_run_query_file_has_the_stated_shares(tmp_path: Path, nxdomain: float,
                                              unknown: float) -> None:
    zones, path, count = _zones(), tmp_path / "queries.txt", 600
    mix = traffic_mix(nxdomain, unknown)
    for _ in write_query_file(iter(zones), path, count, mix, seed=3):
        pass
    counts, _ = _kinds(path, zones)
    assert +counts == +_expected(count, mix)
    # Exact to the rounding of the count: split_count's largest remainders.
    assert abs(counts["nxdomain"] - count * nxdomain / 100) < 1
    assert abs(counts["unknown"] - count * unknown / 100) < 1


@pytest.mark.check
def test_unknown_names_are_under_no_zone_at_every_depth(tmp_path: Path) -> None:
    zones, path = _zones(), tmp_path / "queries.txt"
    for _ in write_query_file(iter(zones), path, 600, traffic_mix(0, 100), seed=5):
        pass
    _, unknown = _kinds(path, zones)
    assert len(unknown) == 600
    tlds = {zone.origin.labels[-2].lower() for zone in zones}
    names = [dns.name.from_text(text) for text in unknown]
    assert all(name.labels[-2].lower() not in tlds for name in names)
    depths = collections.Counter(len(name) - 1 for name in names)  # labels, root left out
    assert set(depths) == set(range(1, UNKNOWN_MAX_DEPTH + 1))
    assert max(depths.values()) - min(depths.values()) <= 1
    assert len(set(unknown)) == len(unknown)  # random: no name repeats


@pytest.mark.check
@pytest.mark.parametrize("mix_name", ["uniform", "popular"])
def test_scale_mixes_keep_the_stated_shares(tmp_path: Path, mix_name: str) -> None:
    zones, path, count = _zones(), tmp_path / f"{mix_name}.txt", 500
    kinds = traffic_mix(50, 25)
    writer = MixWriter({path: plan_mix(mix_name, ZONES, count, seed=2, kinds=kinds)})
    for _ in writer.watch(iter(zones)):
        pass
    writer.write()
    counts, _ = _kinds(path, zones)
    assert +counts == +_expected(count, kinds)


@pytest.mark.check
def test_flood_file_is_distinct_random_names_under_one_zone(tmp_path: Path) -> None:
    zones, path = _zones(), tmp_path / "flood.txt"
    zone = write_flood_file(iter(zones), path, 2000, seed=1)
    lines = path.read_text().splitlines()
    assert len(lines) == len(set(lines)) == 2000
    origin = dns.name.from_text(zone)
    counts, _ = _kinds(path, zones)
    assert counts == collections.Counter({"nxdomain": 2000})
    assert all(dns.name.from_text(line.split()[0]).parent() == origin for line in lines)


@pytest.mark.check
@pytest.mark.parametrize(("nxdomain", "unknown"), [(80, 30), (-1, None), (None, 101)])
def test_bad_shares_are_one_clear_error(nxdomain: float | None, unknown: float | None) -> None:
    with pytest.raises(UserError):
        traffic_mix(nxdomain, unknown)


def test_mix_beside_a_given_query_file_is_refused(tmp_path: Path, run_root: Path) -> None:
    queries = tmp_path / "q.txt"
    queries.write_text("example. A\n")
    done = run_bench(run_root / "refused", "run", "--profile", "tiny", "--servers", "native",
                     "--queries", str(queries), "--nxdomain-share", "50", timeout=120)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("error: --nxdomain-share")


@pytest.fixture(scope="module")
def flood_run(tmp_path_factory: pytest.TempPathFactory, run_root: Path) -> Path:
    out = tmp_path_factory.mktemp("flood")
    done = run_bench(run_root / "flood", "run", "--profile", "tiny", "--servers", "memory",
                     "--nxdomain-share", "40", "--unknown-zone-share", "20", "--flood", "500",
                     "--update-repeats", "0", "--out", str(out), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_mixed_run_checks_answers_and_records_the_mix(flood_run: Path) -> None:
    results = load_results(flood_run)
    mix = results.meta["traffic_mix"]
    assert mix["nxdomain_share_percent"] == 40
    assert mix["unknown_zone_share_percent"] == 20
    assert sum(mix["queries_per_kind"].values()) == results.meta["parameters"]["queries"]
    for cell in results.cells:
        assert cell.status == "ok", cell.error
        assert cell.qps.median
        # Names under no zone are refused by both servers: REFUSED answers, not lost ones.
        assert sum(run.rcodes.get("REFUSED", 0) for run in cell.qps_runs) > 0


def test_flood_run_reports_both_traffic_classes(flood_run: Path) -> None:
    results = load_results(flood_run)
    assert results.meta["flood"]["rate_qps"] == 500
    for cell in results.cells:
        flood = cell.flood
        assert flood is not None, cell.server
        for step in ("without_flood", "with_flood"):
            assert flood[step]["run"]["queries_sent"] > 0
            assert flood[step]["latency_us"]["p99"] is not None
        assert flood["flood_run"]["queries_sent"] > 0
        assert 0 < flood["flood_answered_share"] <= 1
        # The flood's queries are its own: none of them counted in the normal traffic's.
        assert "flood.txt" in " ".join(flood["flood_run"]["argv"])
        assert "flood.txt" not in " ".join(flood["with_flood"]["run"]["argv"])
    assert "## Random-subdomain flood" in (flood_run / "results.md").read_text()


@pytest.mark.check
@pytest.mark.parametrize(("refused", "status"), [(200, "ok"), (600, "wrong")])
def test_scale_counts_refused_answers_to_unknown_names_as_right(refused: int,
                                                                status: str) -> None:
    kinds = traffic_mix(30, 20)
    cell = Cell("native", 1, 1)
    cell.qps_runs.append(DnsperfRun(argv=[], rcodes={"NOERROR": 1000 - 300 - refused,
                                                     "NXDOMAIN": 300, "REFUSED": refused}))
    check_rcodes(cell, kinds, threshold=0.01)
    assert cell.status == status, cell.error


def test_update_repeats_0_leaves_update_visibility_out(flood_run: Path) -> None:
    results = load_results(flood_run)
    assert results.meta["parameters"]["update_repeats"] == 0
    for cell in results.cells:
        assert cell.update_visibility_ms is None and not cell.update_visibility_runs_ms
        assert cell.unavailable["update_visibility_ms"] == "not measured (--update-repeats 0)"
    assert "not measured (--update-repeats 0)" in (flood_run / "results.md").read_text()


def test_negative_update_repeats_is_one_clear_error(run_root: Path) -> None:
    done = run_bench(run_root / "repeats", "run", "--profile", "tiny", "--servers", "native",
                     "--update-repeats", "-1", timeout=120)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == "error: --update-repeats -1: needs 0 or more"
