"""The results catalogue over the committed results: figures found by what they are, with
their intervals, flags and provenance, and a user's own directory beside them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from base.errors import UserError
from bench.measure.catalogue import (
    BEFORE_ROUNDS,
    LOAD_GENERATOR,
    NOT_OFFERED,
    SUPERSEDED,
    Catalogue,
    results_directories,
)


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue.committed()


def test_every_committed_results_file_gives_figures(catalogue: Catalogue) -> None:
    """Each directory load_results reads gives figures; the one it refuses says why."""
    unreadable = []
    for run in catalogue.runs():
        try:
            assert catalogue.figures(run), run
        except UserError as exc:
            unreadable.append((run, str(exc)))
    # the fuzzers' own formats, no schema
    assert [run for run, _ in unreadable] == ["fuzz-2026-11-26", "fuzz-harness-2026-11-27",
                                              "fuzz-harness-2026-11-28"]


def test_a_ratio_with_its_interval_and_provenance(catalogue: Catalogue) -> None:
    ratio = catalogue.one("quick-2026-11-26", "ratio.native", server="memory", threads="1")
    assert (round(ratio.number, 1), round(ratio.low, 1), round(ratio.high, 1)) == (53.2, 50.3,
                                                                                   57.6)
    assert ratio.flags == frozenset()
    made = catalogue.provenance("quick-2026-11-26")
    assert (made.command, made.commit[:7], made.boot[:8]) == ("run", "95d9d81", "849c71b6")
    assert made.machine == "AMD EPYC, 2 CPUs"


def test_flags_a_reader_must_not_miss(catalogue: Catalogue) -> None:
    nsd = catalogue.one("quick-all-2026-11-25", "qps", server="nsd", threads="1")
    assert {LOAD_GENERATOR, BEFORE_ROUNDS} <= nsd.flags
    native = catalogue.one("capacity-2026-11-26", "breaking.held_qps", server="native")
    assert NOT_OFFERED in native.flags
    assert SUPERSEDED in catalogue.one("writes-2026-11-26", "reads", server="pg",
                                       rate="100").flags
    assert catalogue.provenance("writes-2026-11-26").superseded_by == \
        "writes-every-server-2026-11-26"


def test_a_startup_point_gives_its_interval_and_its_fastest_and_slowest_start(
        catalogue: Catalogue) -> None:
    at = {"server": "native", "zones": "1000000"}
    mean = catalogue.one("startup-2026-11-28", "startup_s", **at)
    fastest = catalogue.one("startup-2026-11-28", "startup_fastest_s", **at)
    slowest = catalogue.one("startup-2026-11-28", "startup_slowest_s", **at)
    assert mean.low is not None and mean.high is not None
    assert mean.low < fastest.number < mean.number < slowest.number < mean.high
    # one start a point (before repeated starts): the time alone
    assert not catalogue.find("startup-2026-11-21", "startup_fastest_s")


def test_several_figures_and_none_are_told_apart(catalogue: Catalogue) -> None:
    assert len(catalogue.find("quick-2026-11-26", "ratio.native",
                              server=["pg", "mysql", "ldap"])) == 3
    with pytest.raises(UserError, match="2 figures match"):
        catalogue.one("faults-pdns-gmysql-2026-11-26", "fault.lost", fault=["sigstop", "crash"])
    with pytest.raises(UserError, match="0 figures match.*e.g."):
        catalogue.one("quick-2026-11-26", "ratio.native", server="nsd")
    with pytest.raises(UserError, match="no results run"):
        catalogue.one("quick-1999-01-01", "qps")


def test_a_users_own_directory_beside_the_committed_ones(tmp_path: Path,
                                                         catalogue: Catalogue) -> None:
    mine = tmp_path / "my-run"
    shutil.copytree(catalogue.paths["instructions-2026-11-26"], mine)
    assert results_directories(tmp_path) == [mine]
    own = Catalogue.committed()
    run = own.add(mine)
    assert run == "my-run"
    assert own.one(run, "instructions.total", server="memory").number == \
        catalogue.one("instructions-2026-11-26", "instructions.total", server="memory").number


def test_what_advise_reads_of_a_run(catalogue: Catalogue) -> None:
    """A run's data set, round trip and start against the rule; the writes' route; the
    store's cache size."""
    capacity = catalogue.provenance("capacity-2026-11-26")
    assert (capacity.zones, capacity.db_rtt_ms, capacity.before_the_rule()) == (1000, None, False)
    tune = catalogue.provenance("tune-2026-11-24/pg-rtt1")
    assert (tune.zones, tune.db_rtt_ms, tune.before_the_rule()) == (1000, 1, True)
    assert catalogue.provenance("startup-2026-11-21").zones is None
    via = catalogue.one("writes-via-update-2026-11-27", "reads", server="pg", rate="100")
    assert via.coordinate("via") == "update"
    status = catalogue.one("writes-every-server-2026-11-26", "status.reason", server="memory")
    assert "reads its store once" in str(status.value)
    cache = catalogue.one("scale-2026-11-25", "cache_mib", server="pg", zones="1000000",
                          mix="uniform")
    assert cache.number == 256


def test_cost_per_query_its_ratio_and_the_rate_per_core(catalogue: Catalogue) -> None:
    """A run in rounds gives the table's cost per query (interval over fresh starts), its
    ratio to the reference measured next to it (the memory driver's for a DLZ driver) and the
    QPS one server core would answer at that cost; a file before rounds, the one cost."""
    cost = catalogue.one("quick-2026-11-26", "cost_us", server="pg")
    assert cost.low is not None and cost.high is not None
    assert cost.low < cost.number < cost.high
    ratio = catalogue.one("quick-2026-11-26", "cost.memory", server="pg")
    assert ratio.number == pytest.approx(388.2, abs=0.05) and ratio.low is not None
    assert catalogue.find("quick-2026-11-26", "cost.native", server="pg") == []
    native = catalogue.one("quick-2026-11-26", "cost.native", server="native")
    assert (native.number, native.low) == (100.0, None)
    per_core = catalogue.one("quick-2026-11-26", "qps_per_core", server="pg")
    assert per_core.number == pytest.approx(1e6 / cost.number)
    assert per_core.low == pytest.approx(1e6 / cost.high)
    before = catalogue.one("quick-2026-11-24", "cost_us", server="pg", threads="1")
    assert before.low is None and BEFORE_ROUNDS in before.flags
    assert catalogue.find("quick-2026-11-24", "cost.memory", server="pg") == []
