"""The one dataclass (de)serialiser of results.json (bench/measure/serial.py): nested
dataclasses, Optional, list, tuple and dict by their type hints, and the per-class hooks for
older files (renamed keys, absent fields) and derived figures."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from bench.measure.capacity import Step
from bench.measure.cells import Cell, QpsSummary, RoundRun
from bench.measure.instructions import Counted, Repeat
from bench.measure.serial import RENAMED_SERVER, Derived, Section, from_json, to_json
from bench.measure.startup import StartupPoint
from bench.measure.stats import Interval
from bench.measure.updates import ServerCheck
from bench.verify.compare import UNEXPLAINED


@dataclass(frozen=True)
class Leaf:
    value: float
    label: str = ""


@dataclass
class Tree:
    server: str
    leaves: list[Leaf] = field(default_factory=list)
    pair: tuple[Leaf, ...] = ()
    by_name: dict[str, Leaf] = field(default_factory=dict)
    maybe: Leaf | None = None
    either: int | Leaf | None = None
    raw: dict = field(default_factory=dict)
    counts: list[int | None] = field(default_factory=list)
    since: str = "now"

    json_renamed: ClassVar[dict[str, str]] = RENAMED_SERVER
    json_renamed_keys: ClassVar[dict[str, dict[str, str]]] = {"by_name": {"old": "x"}}
    json_absent: ClassVar[dict[str, Any]] = {"since": "before"}
    json_derived: ClassVar[Derived] = {"leaf_count": lambda t: len(t.leaves)}


def _tree() -> Tree:
    return Tree("pg", leaves=[Leaf(1.5, "a"), Leaf(2)], pair=(Leaf(3.0),),
                by_name={"x": Leaf(4, "x")}, maybe=Leaf(5.0), either=Leaf(6.0),
                raw={"nested": {"kept": [1, 2]}}, counts=[1, None])


def test_a_tree_of_dataclasses_survives_json() -> None:
    tree = _tree()
    data = json.loads(json.dumps(to_json(tree)))
    assert list(data) == ["server", "leaves", "pair", "by_name", "maybe", "either", "raw",
                          "counts", "since", "leaf_count"]
    assert data["leaf_count"] == 2 and data["pair"] == [{"value": 3.0, "label": ""}]
    again = from_json(Tree, data)
    assert again == tree
    assert isinstance(again.pair, tuple) and isinstance(again.by_name["x"], Leaf)
    # A number is read back as it was written: 2 stays an int, 1.5 a float.
    assert type(again.leaves[1].value) is int and type(again.leaves[0].value) is float
    assert from_json(Tree, {**data, "either": 7}).either == 7


def test_older_files_keys_and_absent_fields() -> None:
    data = {"driver": "mysql", "leaves": [{"value": 1}], "by_name": {"old": {"value": 2}}}
    tree = from_json(Tree, data)
    assert tree.server == "mysql" and tree.since == "before" and tree.maybe is None
    assert tree.by_name == {"x": Leaf(2)}
    assert from_json(Tree | None, None) is None


def test_a_key_of_another_shape_is_refused() -> None:
    with pytest.raises(TypeError, match="Tree has no field colour"):
        from_json(Tree, {"server": "pg", "colour": "red"})
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'server'"):
        from_json(Tree, {"leaves": []})
    with pytest.raises(TypeError, match="an object was expected"):
        from_json(list[Leaf], [3])


def test_sections_know_their_empty_value() -> None:
    assert Section("cells", list[Cell], always=True).empty() == []
    assert Section("faults", Leaf | None).empty() is None
    assert not Section("faults", Leaf | None).present(None)
    assert Section("tuning", Leaf | None, always=True).present(None)


def test_results_classes_keep_their_json() -> None:
    """The JSON of classes with hooks: a capacity step keeps `run` last (as files before the
    serialiser did), an instructions repeat writes its per-query figures, a cell reads the
    "driver" of files before 2026-11-25, and an interval is a plain object."""
    run = {"argv": ["dnsperf"], "queries_sent": 10, "queries_completed": 10}
    step = {"percent": 50.0, "target_qps": 100.0, "offered_qps": 100.0, "answered_qps": 100.0,
            "answered_fraction": 1.0, "lost": 0, "latency_us": {"p99": 80.0},
            "slowest_us": {}, "probes": 10, "probes_lost": 0, "reply_mbit_s": 0.1,
            "burst": False, "repeat": 1, "socket_drops": None, "run": run}
    read = from_json(Step, step)
    assert read.udp_rcvbuf_errors is None and read.run.queries_sent == 10
    written = to_json(read)
    assert list(written)[-4:] == ["repeat", "socket_drops", "duration_s", "run"]
    assert written["run"]["queries_sent"] == 10
    repeat = Repeat(sent=10, answered=10, idle_seconds=1.0, query_seconds=1.0,
                    named=Counted(idle_ir=100, query_ir=1100))
    assert to_json(repeat)["named_per_query"] == 100.0
    assert from_json(Repeat, to_json(repeat)) == repeat
    cell = from_json(Cell, {"driver": "fs", "threads": 1, "connections": 1,
                            "qps": {"median": 5.0}, "ratios": {"native": to_json(
                                Interval(0.5, 0.4, 0.6, 9))}})
    assert cell.server == "fs" and cell.qps == QpsSummary(median=5.0)
    assert cell.ratios["native"] == Interval(0.5, 0.4, 0.6, 9)


def test_files_that_named_the_server_after_named_read_as_server() -> None:
    """Files up to 2026-11-27 key the server's own process "named", for NSD and Knot too;
    they read as "server", and are written so."""
    cell = from_json(Cell, {
        "server": "nsd", "threads": 1, "connections": 1,
        "cpu_us_per_query": {"named": 20.0, "db": None, "dnsperf": 1.0},
        "peak_rss_kb": {"named": 9000, "db": None},
        "qps_rounds": [{"round": 0, "start": 0, "named_cpu_s": 0.5, "db_cpu_s": None}],
        "unavailable": {"cpu_us_per_query.named": "not ours", "startup_ms": "not started"}})
    assert cell.cpu_us_per_query == {"server": 20.0, "db": None, "dnsperf": 1.0}
    assert cell.peak_rss_kb == {"server": 9000, "db": None}
    assert cell.qps_rounds == [RoundRun(0, 0, server_cpu_s=0.5)]
    assert cell.unavailable == {"cpu_us_per_query.server": "not ours",
                                "startup_ms": "not started"}
    assert to_json(cell)["cpu_us_per_query"] == {"server": 20.0, "db": None, "dnsperf": 1.0}
    point = from_json(StartupPoint, {"driver": "knot", "zones": 10, "named_rss_kb": 5000})
    assert point.server == "knot" and point.server_rss_kb == 5000
    check = from_json(ServerCheck, {"server": "knot", "classes": {"driver": 2, "x": 1}})
    assert check.unexplained == 2 and check.classes == {UNEXPLAINED: 2, "x": 1}
