"""A zone transfer is one long read, and must not take the store down for anyone else.

For the drivers whose transfer outlasts or outgrows a query's limits (MariaDB's statement time
limit, slapd's size limit), every transfer of a large zone is whole, and while it runs queries
to another zone of the same store are answered: none SERVFAIL, the store never taken for down
(named's log would say "the store does not answer"), transfer after transfer.

  - mysql: a zone whose transfer takes longer than the driver's query time-out (lowered here,
    so that a modest zone is enough): max_statement_time ends a statement that runs longer, and
    a transfer is one statement that runs as long as named takes to consume it;
  - ldap: a zone of 600 owners, over slapd's default size limit of 500 entries a search.

A failed read on a connection opened for it is the other half: it used to take the whole store
for down (drivers/common/pool.c); only a store that cannot be reached, or does not answer in
time, may.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dns.exception
import dns.name
import dns.rcode
import pytest

from bench.measure.serving import loaded_store
from bench.verify.answers import transfer
from servers import get_server
from servers.dlz import DlzNamed
from servers.named import Named
from zonedata.model import Record, Zone, make_record

BIG = dns.name.from_text("big.xfr.test.")
OTHER = dns.name.from_text("other.xfr.test.")
TRANSFERS = 3
# Owners of the transferred zone, and the driver arguments that make its transfer longer than a
# query may take: the smallest that fail without the fixes on this machine.
CASES = {
    "mysql": (20_000, {"query_timeout_ms": "20"}),
    "ldap": (600, {}),
}
QUERY_TIMEOUT = 5.0  # far above any bound: an unanswered query is a hung worker


def _dlz(driver: str) -> DlzNamed:
    server = get_server(driver)
    assert isinstance(server, DlzNamed), driver
    return server


def _zone(origin: dns.name.Name, owners: int) -> Zone:
    def rec(rel: str, rdtype: str, rdata: str) -> Record:
        return make_record(dns.name.from_text(rel, origin), 300, rdtype, rdata)
    return Zone(origin, [
        rec("@", "SOA", "ns hostmaster 1 3600 900 604800 60"),
        rec("@", "NS", "ns"),
        rec("ns", "A", "192.0.2.53"),
        *(rec(f"host{i}", "A", f"198.51.{i // 250 % 250}.{i % 250 + 1}")
          for i in range(owners)),
    ])


@contextmanager
def _queries_beside(named: Named) -> Iterator[dict[str, int]]:
    """Queries to the other zone, one after another until the block ends: their outcomes."""
    outcomes: dict[str, int] = {}
    stop = threading.Event()

    def ask() -> None:
        i = 0
        while not stop.is_set():
            qname = dns.name.from_text(f"host{i % 3}", OTHER)
            try:
                rcode = dns.rcode.to_text(named.query(qname, "A", timeout=QUERY_TIMEOUT).rcode())
            except dns.exception.Timeout:
                rcode = "timeout"
            outcomes[rcode] = outcomes.get(rcode, 0) + 1
            i += 1

    client = threading.Thread(target=ask)
    client.start()
    try:
        yield outcomes
    finally:
        stop.set()
        client.join()


def _transfers_beside_queries(named: Named, driver: str, transfers: int
                              ) -> tuple[dict[str, object], list[str]]:
    """transfers of BIG one after another while another client queries OTHER: what each
    transfer answered (RCODE, RRs), the other zone's outcomes, whether the store was taken
    for down; and the driver's error lines."""
    results = []
    with _queries_beside(named) as outcomes:
        for _ in range(transfers):
            got = transfer(named, BIG)
            results.append((got.rcode, len(got.answer)))
    log = named.log_path.read_text(errors="replace")
    errors = [line for line in log.splitlines() if f"dlz_{driver}:" in line and "error" in line]
    return {"transfers": results, "other zone": outcomes,
            "store down": "the store does not answer" in log}, errors


def _unharmed(seen: dict[str, object], transfer: tuple[str, int], transfers: int
              ) -> dict[str, object]:
    """What seen must be: every transfer answered `transfer`, every query of the other zone
    NOERROR, the store never down."""
    outcomes = seen["other zone"]
    assert isinstance(outcomes, dict)
    return {"transfers": [transfer] * transfers,
            "other zone": {"NOERROR": sum(outcomes.values())}, "store down": False}


@pytest.mark.parametrize("driver", [d for d in CASES if _dlz(d).is_built()])
def test_transfers_of_a_large_zone_leave_the_store_up(run_dir: Path, driver: str) -> None:
    owners, extra = CASES[driver]
    big, other = _zone(BIG, owners), _zone(OTHER, 3)
    with loaded_store(driver, lambda: iter([big, other]), run_dir / driver) as loaded:
        body = _dlz(driver).body(loaded.target, 2, extra=extra)
        env = loaded.loader.database.client_env(loaded.target) or None
        with Named(run_dir / f"named-{driver}", body, threads=2, env=env) as named:
            seen, errors = _transfers_beside_queries(named, driver, TRANSFERS)
    assert seen == _unharmed(seen, ("NOERROR", len(big.records)), TRANSFERS), errors[:4]


@pytest.mark.skipif(not _dlz("ldap").is_built(), reason="the LDAP driver is not built")
def test_a_transfer_the_server_refuses_fails_alone(run_dir: Path) -> None:
    """slapd as shipped (a lent server may be so): its default size limit, 500 entries a
    search, refuses the transfer of a zone of 600 owners. The transfer is SERVFAIL, every time,
    and nothing else: the refusal is no outage, even on a connection opened for it."""
    big, other = _zone(BIG, 600), _zone(OTHER, 3)
    with loaded_store("ldap", lambda: iter([big, other]), run_dir / "ldap-limited") as loaded:
        slapd = loaded.target
        config = slapd.config_path.read_text()
        lifted = [line for line in config.splitlines() if line.startswith("limits ")]
        assert lifted, "the suite's slapd.conf lifts no limit"
        slapd.config_path.write_text("".join(line + "\n" for line in config.splitlines()
                                             if line not in lifted))
        slapd.stop()
        slapd.start()
        body = _dlz("ldap").body(slapd, 2)
        env = loaded.loader.database.client_env(slapd) or None
        with Named(run_dir / "named-ldap-limited", body, threads=2, env=env) as named:
            seen, errors = _transfers_beside_queries(named, "ldap", 2 * TRANSFERS)
    assert seen == _unharmed(seen, ("SERVFAIL", 0), 2 * TRANSFERS), errors[:4]
    assert any("size=unlimited" in line for line in errors), errors[:4]
