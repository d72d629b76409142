"""The round-trip time a latency proxy adds between named and its database, measured from the
client's side, ping-style: the median of many trivial requests (Database.round_trips: `SELECT 1`,
an LDAP whoami) through the proxy minus the median of the same requests straight to the server.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from base.latency_proxy import LatencyProxy, split_rtt
from databases.database import Database


@dataclass
class AddedRtt:
    """What the proxy was asked for and what a client saw, for results.json."""

    requested_ms: int
    upstream_ms: int
    downstream_ms: int
    direct_ms: float  # median round trip straight to the database
    proxied_ms: float  # median round trip through the proxy
    samples: int
    tool: str

    @property
    def measured_added_ms(self) -> float:
        return self.proxied_ms - self.direct_ms

    def as_json(self) -> dict[str, Any]:
        return {"requested_ms": self.requested_ms, "upstream_ms": self.upstream_ms,
                "downstream_ms": self.downstream_ms, "direct_ms": round(self.direct_ms, 4),
                "proxied_ms": round(self.proxied_ms, 4),
                "measured_added_ms": round(self.measured_added_ms, 4),
                "samples": self.samples, "tool": self.tool}


def median_round_trip_ms(round_trip: Callable[[], object], samples: int) -> float:
    """Median wall time of `samples` calls of round_trip, in ms (after one warm-up call)."""
    round_trip()
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        round_trip()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def measure_added_rtt(proxy: LatencyProxy, direct: Callable[[], object],
                      proxied: Callable[[], object], samples: int = 100) -> AddedRtt:
    """Ping-style: the same trivial round trip straight to the database and through proxy."""
    upstream, downstream = split_rtt(proxy.rtt_ms)
    return AddedRtt(proxy.rtt_ms, upstream, downstream, median_round_trip_ms(direct, samples),
                    median_round_trip_ms(proxied, samples), samples, proxy.version())


def measure_store_added_rtt(database: Database[Any], target: Any, proxy: LatencyProxy,
                            samples: int = 100) -> AddedRtt:
    """measure_added_rtt with the store's own trivial request, once straight to its server and
    once through the proxy (as the DLZ driver will reach it)."""
    saved = target.via
    try:
        target.via = None
        with database.round_trips(target) as direct:
            target.via = (proxy.listen_host, proxy.listen_port)
            with database.round_trips(target) as proxied:
                return measure_added_rtt(proxy, direct, proxied, samples)
    finally:
        target.via = saved
