"""Every store, through the one Loader interface: identical data in, identical data out.

Parametrized over the registry, so a new backend is covered by adding its registry line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.name
import pytest

from bench.measure.loading import timed_load
from loaders import get_loader
from loaders.loader import Loader
from servers import store_names
from tests.failing import FailsHalfWay
from zonedata.generator import coverage_zones
from zonedata.model import Zone, canonical_set, make_record


@pytest.fixture(scope="module", params=store_names())
def loaded(request: pytest.FixtureRequest, run_dir: Path) -> Iterator[tuple[Loader, Any]]:
    """A running store holding coverage_zones()."""
    store = get_loader(request.param)
    with store.database.server(run_dir / store.name) as target:
        stats = timed_load(store, coverage_zones(), target)
        assert stats.zones == len(coverage_zones())
        assert stats.records == sum(len(z.records) for z in coverage_zones())
        yield store, target


def _by_key(zones: list[Zone]) -> dict[str, Zone]:
    return {z.key: z for z in zones}


def _held(store: Loader, zones: list[Zone]) -> dict[str, list[tuple[str, int, str, str]]]:
    return canonical_set(store.as_held(z) for z in zones)


def test_round_trip_is_identical(loaded: tuple[Loader, Any]) -> None:
    store, target = loaded
    assert canonical_set(store.read_back(target)) == _held(store, coverage_zones())


def _changed(zone: Zone) -> Zone:
    """The zone with half its non-SOA records dropped and one new record."""
    kept = [r for i, r in enumerate(zone.records) if r.rdtype == "SOA" or i % 2 == 0]
    new = make_record(dns.name.Name((b"added-by-reload",) + zone.origin.labels), 1234, "TXT",
                      '"new"')
    return dataclasses.replace(zone, records=[*kept, new])


def test_reload_replaces_whole_zone(loaded: tuple[Loader, Any]) -> None:
    store, target = loaded
    original = coverage_zones()
    zone = original[0]
    store.load([_changed(zone)], target)
    back = _by_key(list(store.read_back(target)))
    assert back[zone.key].canonical() == store.as_held(_changed(zone)).canonical()
    for other in original[1:]:
        assert back[other.key].canonical() == store.as_held(other).canonical()
    store.load([zone], target)
    assert canonical_set(store.read_back(target)) == _held(store, original)


def test_failed_load_keeps_old_zone(loaded: tuple[Loader, Any]) -> None:
    store, target = loaded
    zone = coverage_zones()[0]
    broken = dataclasses.replace(_changed(zone), records=FailsHalfWay(_changed(zone).records))
    with pytest.raises(RuntimeError, match="half-way"):
        store.load([broken], target)
    assert canonical_set(store.read_back(target)) == _held(store, coverage_zones())
