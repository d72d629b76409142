"""RFC 2136 updates beside queries and beside each other, against the SQL stores (and
Berkeley DB's for a large delete).

  - an update stuck in the store (a row it deletes locked by another transaction, under a
    statement time-out an operator raised) while updates of other zones arrive: they wait
    for the driver's one update connection a bounded time and are answered SERVFAIL, so the
    worker named runs each on goes back to answering queries; with two workers, queries to a
    zone nobody updates are answered meanwhile (before, every worker waited);
  - one update deleting two thousand names of a zone of 50,000 (mysql: the check for a name
    below an owner read every row of the zone, once per deleted name; bdbhpt: the zone's
    owner list read for each check and rewritten for each name) while another client
    queries: every query answered within a client time-out far above any bound;
  - every update answered, NOERROR or SERVFAIL, each having made all of its change or none;
  - two nameds on one store (the usual DLZ deployment), many times over: one deletes the last
    name below b.Z while the other adds c.b.Z. Whichever commits last, b.Z exists as long as
    c.b.Z does (its empty non-terminal marker), never NXDOMAIN;
  - two nameds on one store taking updates of different zones: both write as the store's one
    writer account, limited to the update zones of both, and both updates are taken.

Bounds are never timed: a query "not left hanging" is one answered at all within the client's
time-out.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.update
import pytest

from base.update_access import TsigKey
from bench.measure.serving import LoadedStore, loaded_store
from databases.mariadb import WRITER_USER
from servers import get_server
from servers.dlz import DlzNamed
from servers.dnsserver import DnsServer
from servers.named import Named
from servers.update_policy import NamedUpdatePolicy
from zonedata.model import Record, Zone, make_record, name_key

SQL_DRIVERS = [d for d in ("pg", "mysql") if get_server(d).is_built()]
# The writable drivers whose below() or owner list once cost a read of the whole zone.
LARGE_DELETE_DRIVERS = [d for d in ("mysql", "bdbhpt-t", "bdbhpt-c") if get_server(d).is_built()]
KEY = TsigKey.generate("dlzbench-races")
QUIET = dns.name.from_text("quiet.races.test.")  # queried, never updated
QUERY_TIMEOUT = 5.0  # far above any bound: an unanswered query is a hung worker
STUCK = dns.name.from_text("stuck.races.test.")
UPDATE_TIMEOUT = 120.0


def _zone(origin: dns.name.Name, hosts: int, *extra: tuple[str, str, str]) -> Zone:
    def rec(rel: str, rdtype: str, rdata: str) -> Record:
        return make_record(dns.name.from_text(rel, origin), 300, rdtype, rdata)
    return Zone(origin, [
        rec("@", "SOA", "ns hostmaster 1 3600 900 604800 60"),
        rec("@", "NS", "ns"),
        rec("ns", "A", "192.0.2.53"),
        *(rec(f"host{i}", "A", f"198.51.{i // 250 % 250}.{i % 250 + 1}") for i in range(hosts)),
        *(rec(*r) for r in extra),
    ])


def _update(zone: dns.name.Name) -> dns.update.UpdateMessage:
    return dns.update.UpdateMessage(zone, keyring=KEY.keyring(),
                                    keyname=dns.name.from_text(KEY.name))


def _send(named: DnsServer, message: dns.message.Message) -> str:
    try:
        response = dns.query.tcp(message, named.host, port=named.port, timeout=UPDATE_TIMEOUT)
    except dns.exception.Timeout:
        return "timeout"
    return dns.rcode.to_text(response.rcode())


def _rcode(named: DnsServer, qname: dns.name.Name, rdtype: str = "A") -> str:
    try:
        return dns.rcode.to_text(named.query(qname, rdtype, timeout=QUERY_TIMEOUT).rcode())
    except dns.exception.Timeout:
        return "timeout"


def _updating(driver: str, zones: tuple[dns.name.Name, ...]) -> DlzNamed:
    server = get_server(driver)
    assert isinstance(server, DlzNamed), driver
    return dataclasses.replace(server, updates=NamedUpdatePolicy(zones, KEY))


def _quiet_queries(named: DnsServer, count: int) -> dict[str, int]:
    """count queries to QUIET at once, each from a socket of its own (so named's workers
    share them): their outcomes."""
    rcodes = _at_once([lambda i=i: _rcode(named, dns.name.from_text(f"host{i % 3}", QUIET))
                       for i in range(count)])
    return {rcode: rcodes.count(rcode) for rcode in set(rcodes)}


@contextmanager
def _queries_beside(named: DnsServer) -> Iterator[dict[str, int]]:
    """Queries to QUIET, one after another until the block ends: their outcomes."""
    outcomes: dict[str, int] = {}
    stop = threading.Event()

    def ask() -> None:
        i = 0
        while not stop.is_set():
            rcode = _rcode(named, dns.name.from_text(f"host{i % 3}", QUIET))
            outcomes[rcode] = outcomes.get(rcode, 0) + 1
            i += 1

    client = threading.Thread(target=ask)
    client.start()
    try:
        yield outcomes
    finally:
        stop.set()
        client.join()


def _at_once(calls: list[Callable[[], str]]) -> list[str]:
    """The calls run together, each in a thread of its own, released at the same moment."""
    results = [""] * len(calls)
    start = threading.Barrier(len(calls))

    def run(i: int) -> None:
        start.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


# --- large updates beside queries --------------------------------------------------------------


def _delete_hosts(zone: dns.name.Name, count: int) -> dns.message.Message:
    message = _update(zone)
    for i in range(count):
        message.delete(dns.name.from_text(f"host{i}", zone))
    return message


def _deleted_wholly_or_not(named: DnsServer, updates: dict[dns.name.Name, str],
                           deleted: int) -> dict[dns.name.Name, list[str]]:
    """Per zone, where its update (updates: zone -> RCODE) did not leave its first `deleted`
    hosts all gone (NOERROR) or all there (SERVFAIL): the RCODEs of host0, of the last host
    deleted and of the next one."""
    wrong = {}
    for zone, rcode in updates.items():
        got = [_rcode(named, dns.name.from_text(f"host{i}", zone))
               for i in (0, deleted - 1, deleted)]
        gone = "NXDOMAIN" if rcode == "NOERROR" else "NOERROR"
        if got != [gone, gone, "NOERROR"]:
            wrong[zone] = [rcode, *got]
    return wrong


class _RowLock:
    """The records rows of an owner locked FOR UPDATE (not its zone's row) by a transaction of
    the loader's account, until release(); waiting() says whether the driver waits for a lock
    (PostgreSQL: a lock wait of its session; MariaDB: its writer's DELETE running a second)."""

    def __init__(self, loaded: LoadedStore, zone: dns.name.Name, owner: dns.name.Name) -> None:
        self.loaded = loaded
        self.conn = loaded.target.connect()
        cursor = self.conn.cursor()
        cursor.execute("SELECT id FROM zones WHERE name = %s", (name_key(zone),))
        row = cursor.fetchone()
        assert row is not None, zone
        cursor.execute("SELECT name FROM records WHERE zone_id = %s AND name = %s FOR UPDATE",
                       (row[0], name_key(owner)))

    def waiting(self) -> bool:
        # A connection of its own each time: PostgreSQL shows a transaction one picture of
        # pg_stat_activity, taken at its first look.
        if self.loaded.loader.name == "pg":
            with self.loaded.target.connect() as conn:
                row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                   "application_name = 'dlz_pg' AND wait_event_type = 'Lock'"
                                   ).fetchone()
        else:
            # (information_schema.innodb_trx left the waiting transaction out, at times.)
            admin = self.loaded.target.admin_connection()
            try:
                cursor = admin.cursor()
                cursor.execute("SELECT COUNT(*) FROM information_schema.processlist WHERE"
                               " user = %s AND info LIKE 'DELETE %%' AND time >= 1",
                               (WRITER_USER,))
                row = cursor.fetchone()
            finally:
                admin.close()
        return row is not None and row[0] > 0

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()


def _until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("driver", SQL_DRIVERS)
def test_an_update_stuck_in_the_store_takes_only_its_own_worker(run_dir: Path,
                                                                driver: str) -> None:
    """named 9.18 runs an update on one of its workers, the threads that answer queries too,
    and the driver has one connection for updates. One update waits in the store for a row
    another transaction holds (for seconds: query_timeout_ms raised to 30 s); updates of eight
    other zones arrive meanwhile. They must not wait for the connection without end: with
    named's two workers, queries are still answered while the first update is stuck."""
    stuck, others = STUCK, [dns.name.from_text(f"z{i}.races.test.") for i in range(8)]
    data = [_zone(zone, 20) for zone in (stuck, *others)] + [_zone(QUIET, 3)]
    kind = _updating(driver, (stuck, *others))
    with loaded_store(kind, lambda: iter(data), run_dir / f"stuck-{driver}") as loaded:
        body = kind.body(loaded.target, 2, extra={"query_timeout_ms": "30000"})
        with Named(run_dir / f"stuck-{driver}" / "named", body, threads=2,
                   env=kind.client_env(loaded.target)) as named:
            lock = _RowLock(loaded, stuck, dns.name.from_text("host0", stuck))
            updates: dict[dns.name.Name, str] = {}
            sender = threading.Thread(target=lambda: updates.update(_at_once_by_zone(
                named, [stuck, *others], 10, lock)))
            try:
                sender.start()
                assert _until(lock.waiting, 30), "the update never reached the locked row"
                time.sleep(1.0)  # the other updates have arrived
                while_stuck = _quiet_queries(named, 20)
            finally:
                lock.release()
                sender.join()
            wrong = _deleted_wholly_or_not(named, updates, 10)
    assert "NOERROR" in while_stuck, while_stuck
    assert updates[stuck] == "NOERROR", updates
    assert set(updates.values()) <= {"NOERROR", "SERVFAIL"}, updates
    assert wrong == {}, wrong


def _at_once_by_zone(named: DnsServer, zones: list[dns.name.Name], deleted: int,
                     lock: _RowLock) -> dict[dns.name.Name, str]:
    """The first zone's update sent first; once it waits for the locked row, one update per
    other zone, all at once: RCODE per zone."""
    first: list[str] = []
    sender = threading.Thread(target=lambda: first.append(
        _send(named, _delete_hosts(zones[0], deleted))))
    sender.start()
    _until(lock.waiting, 30)
    rcodes = _at_once([lambda z=zone: _send(named, _delete_hosts(z, deleted))
                       for zone in zones[1:]])
    sender.join()
    return {zones[0]: first[0], **dict(zip(zones[1:], rcodes, strict=True))}


@pytest.mark.parametrize("driver", LARGE_DELETE_DRIVERS)
def test_a_large_delete_in_a_large_zone_hangs_no_worker(run_dir: Path, driver: str) -> None:
    """Deleting the last record of an owner asks whether a name lies below it, and takes the
    name out of the zone: the MariaDB driver answered the first by reading every row of the
    zone (RIGHT(name, ?)), 2,000 times for 2,000 names (PostgreSQL's store has an index for
    it); the Berkeley DB driver read the zone's whole owner list for each question, and read,
    rewrote and put it back for each name (bdbhpt-t: inside the update's transaction, whose
    locks the quiet zone's readers wait for, at most lock_timeout_ms, then SERVFAIL; bdbhpt-c
    edits a copy nobody reads, so it was only slow)."""
    zone, deleted = dns.name.from_text("large.races.test."), 2000
    data = [_zone(zone, 50_000), _zone(QUIET, 3)]
    kind = _updating(driver, (zone,))
    with loaded_store(kind, lambda: iter(data), run_dir / f"large-{driver}") as loaded, \
            loaded.dns_server(run_dir / f"large-{driver}", threads=2) as named:
        with _queries_beside(named) as outcomes:
            rcode = _send(named, _delete_hosts(zone, deleted))
        wrong = _deleted_wholly_or_not(named, {zone: rcode}, deleted)
    assert set(outcomes) == {"NOERROR"}, outcomes
    assert rcode == "NOERROR" and wrong == {}, (rcode, wrong)


# --- two nameds on one store ---------------------------------------------------------------------

RACE = dns.name.from_text("race.test.")
A_B, B, C_B = (dns.name.from_text(rel, RACE) for rel in ("a.b", "b", "c.b"))
ROUNDS = 40


def _delete_name(name: dns.name.Name) -> dns.message.Message:
    message = _update(RACE)
    message.delete(name)
    return message


def _add_name(name: dns.name.Name) -> dns.message.Message:
    message = _update(RACE)
    message.add(name, 300, "A", "192.0.2.7")
    return message


@pytest.mark.parametrize("driver", SQL_DRIVERS)
def test_two_nameds_on_one_store_keep_empty_non_terminals(run_dir: Path, driver: str) -> None:
    """Round after round, one named deletes a.b.Z (the last name below b.Z) while the other
    adds c.b.Z, the two roles alternating between them; then both are put back. b.Z must
    exist after every round: c.b.Z does."""
    kind = _updating(driver, (RACE,))
    data = [_zone(RACE, 3, ("a.b", "A", "192.0.2.1"))]
    with ExitStack() as stack:
        loaded: LoadedStore = stack.enter_context(
            loaded_store(kind, lambda: iter(data), run_dir / f"race-{driver}"))
        nameds = [stack.enter_context(loaded.dns_server(run_dir / f"race-{driver}-{i}", threads=1))
                  for i in range(2)]
        lost = []
        for i in range(ROUNDS):
            deleter, adder = nameds[i % 2], nameds[1 - i % 2]
            rcodes = _at_once([lambda d=deleter: _send(d, _delete_name(A_B)),
                               lambda a=adder: _send(a, _add_name(C_B))])
            seen = {"updates": rcodes, "c.b": _rcode(deleter, C_B),
                    "b": _rcode(deleter, B, "TXT")}
            if seen != {"updates": ["NOERROR", "NOERROR"], "c.b": "NOERROR", "b": "NOERROR"}:
                lost.append((i, seen))
            assert _send(deleter, _delete_name(C_B)) == "NOERROR"
            assert _send(adder, _add_name(A_B)) == "NOERROR"
    assert lost == [], f"{len(lost)} of {ROUNDS} rounds: {lost[:3]}"


def _add_host(zone: dns.name.Name) -> dns.message.Message:
    message = _update(zone)
    message.add(dns.name.from_text("added", zone), 300, "A", "192.0.2.8")
    return message


@pytest.mark.parametrize("driver", SQL_DRIVERS)
def test_two_nameds_on_one_store_take_updates_of_different_zones(run_dir: Path,
                                                                 driver: str) -> None:
    """The writer account may change the records of the update zones only (loaders/pg.py and
    loaders/mysql.py: limit_writes), and both nameds' drivers write as it: the zones of the
    second named must not take the place of the first's."""
    zones = (dns.name.from_text("left.races.test."), dns.name.from_text("right.races.test."))
    kinds = [_updating(driver, (zone,)) for zone in zones]
    data = [_zone(zone, 3) for zone in zones]
    with ExitStack() as stack:
        loaded: LoadedStore = stack.enter_context(
            loaded_store(kinds[0], lambda: iter(data), run_dir / f"apart-{driver}"))
        nameds = [stack.enter_context(dataclasses.replace(loaded, server=kind).dns_server(
            run_dir / f"apart-{driver}-{i}", threads=1)) for i, kind in enumerate(kinds)]
        rcodes = [_send(named, _add_host(zone)) for named, zone in zip(nameds, zones, strict=True)]
        added = [_rcode(named, dns.name.from_text("added", zone))
                 for named, zone in zip(nameds, zones, strict=True)]
    assert (rcodes, added) == (["NOERROR", "NOERROR"], ["NOERROR", "NOERROR"])
