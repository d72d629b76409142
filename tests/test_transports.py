"""`run --transport udp|tcp|tcp-new|dot` (docs/method/transports.md): every transport against
native BIND and the memory driver on the tiny profile (the pg driver over TCP, NSD over DoT),
answers checked over the transport and a QPS row; a server that does not speak a transport
gets an n/a cell with the reason; the prober's TCP modes; the options that cannot go together
are one clear error."""

from __future__ import annotations

from pathlib import Path

import dns.name
import pytest

from base.transports import self_signed
from bench.load import prober
from bench.load.dnsperf import transport_args
from bench.measure.results import load_results
from bench.verify.answers import ask
from servers import get_server
from servers.named import Named
from tests.benchcli import run_bench
from tests.test_measure import ZONE, tiny_named, write_query_file
from zonedata.queries import read_query_file

TRANSPORTS = ("tcp", "tcp-new", "dot")
# Besides native BIND, each transport's run: the memory driver in every one; the pg driver
# (a database behind named) over TCP only, since what the transport changes is between the
# client and named, the same for every driver (pg in all three runs: 79 s of the module's 83);
# over DoT NSD, which speaks it, and knot, which does not, for its n/a cell.
SERVERS = {"tcp": ("memory", "pg"), "tcp-new": ("memory",), "dot": ("memory", "nsd", "knot")}


@pytest.fixture(scope="module")
def transport_runs(tmp_path_factory: pytest.TempPathFactory, run_root: Path) -> dict[str, Path]:
    """A tiny run over each transport, one after the other (three at once took 238 s against
    168 s in turn on this 2-core VM), without the update-visibility phase (a store write read
    back over UDP: no transport's)."""
    runs = {}
    for transport in TRANSPORTS:
        out = tmp_path_factory.mktemp(f"transport-{transport}")
        done = run_bench(run_root / transport, "run", "--profile", "tiny", "--servers",
                         ",".join(SERVERS[transport]), "--transport", transport,
                         "--update-repeats", "0", "--out", str(out), timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        runs[transport] = out
    return runs


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_server_answers_over_the_transport(transport_runs: dict[str, Path],
                                                 transport: str) -> None:
    out = transport_runs[transport]
    results = load_results(out)
    assert results.meta["transport"] == transport
    cells = {c.server: c for c in results.cells}
    assert sorted(cells) == sorted(["native", *SERVERS[transport]])
    for server in ("native", *(s for s in SERVERS[transport] if s != "knot")):
        cell = cells[server]
        assert cell.status == "ok", cell.error
        assert cell.mismatches == 0
        assert cell.qps.median and cell.qps.median > 0
        for run in cell.qps_runs:
            assert run.queries_completed > 0
            words = list(transport_args(transport))
            assert any(run.argv[i:i + len(words)] == words for i in range(len(run.argv))), \
                run.argv
        if transport == "dot":
            assert cell.latency_unloaded is None
            assert "not TLS" in cell.unavailable["latency_unloaded"]
        else:
            assert cell.latency_unloaded is not None and cell.latency_unloaded.count > 0
    assert "| QPS |" in (out / "results.md").read_text()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_na_cells_exactly_where_the_transport_is_not_spoken(transport_runs: dict[str, Path],
                                                            transport: str) -> None:
    cells = load_results(transport_runs[transport]).cells
    for cell in cells:
        reason = get_server(cell.server).transport_unsupported(transport)
        if reason is None:
            assert cell.status == "ok", cell.error
            continue
        assert cell.status == "n/a"
        assert cell.error is not None and reason in cell.error
        assert not cell.qps_runs
    if transport == "dot":
        knot = next(c for c in cells if c.server == "knot")
        assert knot.status == "n/a" and "Knot DNS 3.2" in (knot.error or "")
        assert "N/A" in (transport_runs[transport] / "results.md").read_text()


@pytest.mark.check
def test_which_servers_speak_dot() -> None:
    for name in ("native", "memory", "pg", "nsd"):
        assert get_server(name).transport_unsupported("dot") is None, name
    for name in ("knot", "pdns-gpgsql", "pdns-bind"):
        reason = get_server(name).transport_unsupported("dot")
        assert reason, name
    for name in ("knot", "pdns-gpgsql", "nsd", "native"):
        for transport in ("udp", "tcp", "tcp-new"):
            assert get_server(name).transport_unsupported(transport) is None


@pytest.mark.parametrize("transport", ["udp", "tcp", "tcp-new"])
def test_prober_speaks_tcp(tmp_path: Path, transport: str) -> None:
    query_file = write_query_file(tmp_path)
    with tiny_named(tmp_path) as named:
        closed = prober.probe(named.host, named.port, query_file, 50, transport=transport)
        opened = prober.probe(named.host, named.port, query_file, 50, transport=transport,
                              interval=0.002, open_loop=True)
        for stats in (closed, opened):
            assert stats.count == 50 and stats.lost == 0
            # A socket (a connection over TCP) of its own per query.
            assert stats.source_ports is not None and stats.source_ports > 1


def test_prober_counts_a_refused_connection_as_lost(tmp_path: Path) -> None:
    query_file = write_query_file(tmp_path)
    with tiny_named(tmp_path) as named:
        port = named.port
    stats = prober.probe("127.0.0.1", port, query_file, 5, transport="tcp-new")
    assert stats.count == 0 and stats.lost == 5


def test_answers_over_every_transport_match_udp(tmp_path: Path) -> None:
    zone_file = tmp_path / "example.test.zone"
    zone_file.write_text(ZONE)
    named = Named(tmp_path / "named",
                  f'zone "example.test" {{ type primary; file "{zone_file}"; }};\n')
    named.serve_tls(self_signed(tmp_path / "tls"))
    with named:
        for name, rdtype in read_query_file(write_query_file(tmp_path)):
            udp, _ = ask(named, (dns.name.from_text(name), rdtype))
            for transport in ("tcp", "tcp-new", "dot"):
                over, none = ask(named, (dns.name.from_text(name), rdtype), transport=transport)
                assert none is None and over.tcp
                assert over == udp, (name, rdtype, transport)


@pytest.mark.parametrize("args", [
    ["capacity", "--transport", "dot"],
    ["run", "--transport", "dot", "--flood", "100"],
    ["run", "--transport", "quic"],
    ["run", "--target", "127.0.0.1:53", "--server-label", "x", "--transport", "dot"],
    ["run", "--signed", "--transport", "tcp"],
])
def test_impossible_combinations_are_one_clear_error(run_root: Path, args: list[str]) -> None:
    done = run_bench(run_root / "refused", *args, "--profile", "tiny", timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "error:" in last and ("transport" in last or "dot" in last or "TLS" in last), last
