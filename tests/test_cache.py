"""The driver core's coherent cache (drivers/common/cache.c) through its rows in the registry,
against the plain row of the same driver over the same store.

For PostgreSQL (pg+cache: LISTEN/NOTIFY), MariaDB (mysql+cache: a polled change log) and
OpenLDAP (ldap+cache: RFC 4533 content synchronisation), the cached row (named with cache=yes,
trace=yes here) and the plain row serve one store holding the coverage zones and a zone of many
hosts. Then, for each:
  - every answer of the cached row, asked twice (the second time from the cache), is the
    plain row's;
  - a change made through the database's own client (psql, mariadb, ldapmodify/ldapadd/
    ldapdelete: a record changed, added, deleted) and a zone replaced whole by the loader are
    answered by the cached row once the bound has passed, from the cache again after that, as
    the plain row answers them;
  - pg and mysql: the channel's connection ended (its id from named's log) and kept from
    reconnecting (the reader account capped at the connections it holds; ServerKind's
    channel_cut, as `bench faults`' channel-cut does it): named's log says
    the cache is flushed and bypassed, every fetch goes to the store and a change is answered
    at once; let back, the log says the cache answers again, and it does. ldap (slapd ends no
    connection on request): slapd restarted under it, flushed, then answering again.
What is the core's, whatever the store, is checked over pg:
  - a cache of 64 KiB over a few thousand names evicts, stays within its budget, and answers
    every name as the plain row does, before and after changes;
  - an RFC 2136 update through the cached row is answered at once by it, with PostgreSQL's
    notifications of the driver's own writes switched off: the invalidation at its commit is
    the only thing that can make it so;
  - the same under Valgrind (a small cache, changes, a killed listener), and the cache alone
    against a store simulated in memory (drivers/tools/cache_check: every rule, then readers,
    writers, outages and eviction at once) under ASan with UBSan and under ThreadSanitizer;
  - cache=yes over a store that cannot tell the driver of its changes does not start.
Verify against native BIND on every data set is tests/test_drivers.py's and test_signed.py's,
which take every registry row.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dns.name
import dns.query
import dns.rcode
import dns.update
import ldap
import pytest

from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import write_private
from base.update_access import TsigKey
from bench.measure.serving import LoadedStore, loaded_store
from bench.measure.writes import CONFIRM_ASKS, Sampler, WriteCycle
from bench.verify.answers import Reply, ask, compare_answers, complete
from bench.verify.compare import detail
from databases.postgresql import PG_BIN, WRITER_ROLE
from loaders.ldap import live_generation, node_dn, zone_dn
from loaders.writes import ADD_ZONE, DELETE_ZONE, Change
from servers import get_server
from servers.dlz import DlzCache, DlzNamed, stack_frames_of
from servers.kind import ChangeChannel
from servers.named import Named, valgrind_errors, valgrind_wrapper
from servers.update_policy import NamedUpdatePolicy
from tests.at_once import entered_at_once
from zonedata.derive import Query, derive_queries
from zonedata.generator import COVERAGE_ORIGIN, coverage_zones
from zonedata.model import Record, Zone, make_record, name_key

MANY = dns.name.from_text("many.test.")
HOSTS = 2000
# The fixture's cached rows take a bound shorter than the registry rows', so that waiting it
# out costs the tests little (mysql polls every 100 ms, at most half of it).
BOUND_MS = 300
TOOLS = REPO_ROOT / "build" / "tools"
VALGRIND_SUPPRESSIONS = Path(__file__).parent / "data" / "valgrind.supp"
KEY = TsigKey.generate("dlzbench-cache")


def _kind(name: str, **changes: object) -> DlzNamed:
    kind = get_server(name)
    assert isinstance(kind, DlzNamed)
    return dataclasses.replace(kind, **changes)  # type: ignore[arg-type]


def host(i: int) -> dns.name.Name:
    return dns.name.from_text(f"host{i}", MANY)


def host_address(i: int) -> str:
    return f"10.{i // 250}.{i % 250}.1"


def zone_of_addresses(origin: dns.name.Name, ns_address: str,
                      addresses: Iterable[tuple[str, str]]) -> Zone:
    """A zone at origin: its SOA, NS ns, ns's address, and an A record per (relative name,
    address)."""
    def rec(relative: str, rdtype: str, rdata: str) -> Record:
        return make_record(dns.name.from_text(relative, origin), 300, rdtype, rdata, origin)
    return Zone(origin, [rec("@", "SOA", "ns hostmaster 1 3600 900 604800 60"),
                         rec("@", "NS", "ns"), rec("ns", "A", ns_address),
                         *(rec(name, "A", address) for name, address in addresses)])


def many_zone() -> Zone:
    return zone_of_addresses(MANY, "192.0.2.53",
                             ((f"host{i}", host_address(i)) for i in range(HOSTS)))


# --- each store, through its own client ----------------------------------------------------------


def _in_zone(zone: dns.name.Name) -> str:
    return f"(SELECT id FROM zones WHERE name = '{name_key(zone)}')"


class Side:
    """A cached row's store as a test changes it: statements through the database's own
    client as the loading account."""

    store: str

    @property
    def cached(self) -> str:
        return f"{self.store}+cache"

    def run(self, loaded: LoadedStore, statement: str) -> None:
        done = subprocess.run(self._client(loaded.target, statement), env=self._env(loaded),
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr

    def _client(self, target: Any, statement: str) -> list[str]:
        raise NotImplementedError

    def _env(self, loaded: LoadedStore) -> dict[str, str]:
        raise NotImplementedError

    def set_a(self, loaded: LoadedStore, name: dns.name.Name, zone: dns.name.Name,
              address: str) -> None:
        """The address of a name that has one A record."""
        self.run(loaded, f"UPDATE records SET data = '{address}' WHERE zone_id = "
                         f"{_in_zone(zone)} AND name = '{name_key(name)}' AND type = 'A'")

    def add_a(self, loaded: LoadedStore, name: dns.name.Name, zone: dns.name.Name,
              address: str) -> None:
        raise NotImplementedError

    def delete(self, loaded: LoadedStore, name: dns.name.Name, zone: dns.name.Name) -> None:
        self.run(loaded, f"DELETE FROM records WHERE zone_id = {_in_zone(zone)} AND "
                         f"name = '{name_key(name)}'")


class PgSide(Side):
    store = "pg"

    def _client(self, target: Any, statement: str) -> list[str]:
        return [str(PG_BIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", statement,
                f"host={target.host} port={target.port} dbname={target.dbname} "
                f"user={target.user}"]

    def _env(self, loaded: LoadedStore) -> dict[str, str]:
        return {**os.environ, "PGPASSWORD": loaded.target.password}

    def add_a(self, loaded: LoadedStore, name: dns.name.Name, zone: dns.name.Name,
              address: str) -> None:
        self.run(loaded, "INSERT INTO records (zone_id, name, type, ttl, data) SELECT id, "
                         f"'{name_key(name)}', 'A', 300, '{address}' FROM zones "
                         f"WHERE name = '{name_key(zone)}'")


class MysqlSide(Side):
    store = "mysql"

    def _client(self, target: Any, statement: str) -> list[str]:
        return ["/usr/bin/mariadb", "--no-defaults", f"--socket={target.socket}",
                f"--user={target.user}", target.database, "-e", statement]

    def _env(self, loaded: LoadedStore) -> dict[str, str]:
        return {**os.environ, "MYSQL_PWD": loaded.target.password}

    def add_a(self, loaded: LoadedStore, name: dns.name.Name, zone: dns.name.Name,
              address: str) -> None:
        self.run(loaded, "INSERT INTO records (zone_id, name, seq, type, ttl, data) SELECT id, "
                         f"'{name_key(name)}', 0, 'A', 300, '{address}' FROM zones "
                         f"WHERE name = '{name_key(zone)}'")


class LdapSide(Side):
    """Entries written with ldapmodify, ldapadd and ldapdelete as the rootdn (its password in
    a file of the run directory, mode 0600), at the DNs the loader gives them."""

    store = "ldap"

    def _client(self, target: Any, statement: str) -> list[str]:
        command, _, ldif = statement.partition("\n")
        password = Path(target.run_dir) / "rootdn.password"
        write_private(password, target.password)
        return [f"/usr/bin/{command}", "-x", "-H", target.uri, "-D", target.bind_dn, "-y",
                str(password), "-f", str(self._ldif_file(target, ldif))]

    @staticmethod
    def _ldif_file(target: Any, ldif: str) -> Path:
        path = Path(target.run_dir) / "change.ldif"
        path.write_text(ldif)
        return path

    def _env(self, loaded: LoadedStore) -> dict[str, str]:
        return dict(os.environ)

    def _node(self, loaded: LoadedStore, name: dns.name.Name, zone: dns.name.Name) -> str:
        conn = loaded.target.connect()
        try:
            generation = live_generation(conn, zone_dn(name_key(zone)))
        finally:
            conn.unbind_s()
        assert generation is not None
        return node_dn(name_key(zone), name_key(name), generation)

    def _a_value(self, loaded: LoadedStore, dn: str) -> str:
        conn = loaded.target.connect()
        try:
            (_, attrs), = conn.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["dlzRecord"])
        finally:
            conn.unbind_s()
        (value,) = [v.decode() for v in attrs["dlzRecord"] if v.startswith(b"A ")]
        return value

    def set_a(self, loaded: LoadedStore, name: dns.name.Name, zone: dns.name.Name,
              address: str) -> None:
        dn = self._node(loaded, name, zone)
        old = self._a_value(loaded, dn)
        ttl = old.split(" ")[1]
        self.run(loaded, f"ldapmodify\ndn: {dn}\nchangetype: modify\ndelete: dlzRecord\n"
                         f"dlzRecord: {old}\n-\nadd: dlzRecord\ndlzRecord: A {ttl} {address}\n")

    def add_a(self, loaded: LoadedStore, name: dns.name.Name, zone: dns.name.Name,
              address: str) -> None:
        dn = self._node(loaded, name, zone)
        generation, owner_id = dn.split(",", 1)[0].removeprefix("dlzId=").split("-")
        self.run(loaded, f"ldapadd\ndn: {dn}\nobjectClass: dlzNodeEntry\n"
                         f"dlzId: {generation}-{owner_id}\ndlzOwner: {name_key(name)}\n"
                         f"dlzZone: {name_key(zone)}\ndlzGeneration: {generation}\n"
                         f"dlzRecord: A 300 {address}\n")

    def delete(self, loaded: LoadedStore, name: dns.name.Name, zone: dns.name.Name) -> None:
        self.run(loaded, f"ldapdelete\n{self._node(loaded, name, zone)}\n")


SIDES: dict[str, Side] = {side.store: side for side in (PgSide(), MysqlSide(), LdapSide())}
# The stores whose channel's connection a test can end alone (slapd ends no connection on
# request: the ldap channel is cut by a restart of slapd instead).
CUT_SIDES = ["pg", "mysql"]


# --- the fleet ---------------------------------------------------------------------------------


@dataclass
class Fleet:
    side: Side
    run_dir: Path
    zones: list[Zone]
    loaded: LoadedStore
    plain: Named
    cached: Named


@contextmanager
def serving_both(side: Side, run_dir: Path, zones: list[Zone]) -> Iterator[Fleet]:
    """The store; the plain row and the cached row over it (trace on; one connection, so that
    every one the driver's pool needs is open once it has answered)."""
    with ExitStack() as stack:
        loaded = stack.enter_context(loaded_store(side.cached, lambda: iter(zones),
                                                  run_dir / side.store))
        plain = stack.enter_context(dataclasses.replace(loaded, server=get_server(side.store))
                                    .dns_server(run_dir / side.store, threads=2))
        kind = _kind(side.cached, cache=DlzCache(bound_ms=BOUND_MS))
        cached = Named(run_dir / side.store / "named-cached",
                       kind.body(loaded.target, 1, extra={"trace": "yes"}), threads=2,
                       env=kind.client_env(loaded.target))
        stack.enter_context(cached)
        wait_for_log(cached, "cache: answering from the cache", 0)
        yield Fleet(side, run_dir / side.store, zones, loaded, plain, cached)


@pytest.fixture(scope="module")
def fleets(run_dir: Path) -> Iterator[dict[str, Fleet]]:
    """Each store's fleet, started at once."""
    zones = [*coverage_zones(), many_zone()]
    with ExitStack() as stack:
        yield entered_at_once(stack, {store: serving_both(side, run_dir, zones)
                                      for store, side in SIDES.items()})


@pytest.fixture(scope="module")
def fleet(fleets: dict[str, Fleet]) -> Fleet:
    """The pg fleet, for what one store shows for every store (the cache is the core's)."""
    return fleets["pg"]


# --- named's log -------------------------------------------------------------------------------

_FETCH = re.compile(r"dlz_\w+: fetch (\S+) zone=\S+ rows=\d+ extras=\d+ \(([^)]*)\)")
_COUNTS = re.compile(r"cache: (\d+) fetches answered from the cache, (\d+) from the store "
                     r"\(not cached\), (\d+) from the store \(cache bypassed\); (\d+) entries "
                     r"held \((\d+) of (\d+) bytes\), (\d+) inserted, (\d+) evicted")


def log_size(named: Named) -> int:
    return named.log_path.stat().st_size


def log_since(named: Named, offset: int) -> str:
    with open(named.log_path, "rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace")


def wait_for_log(named: Named, text: str, offset: int, seconds: float = 30) -> None:
    """Until named's log says text after offset (a liveness limit, not a measurement)."""
    deadline = time.monotonic() + seconds
    while text not in log_since(named, offset):
        assert time.monotonic() < deadline, f"named's log never said {text!r}"
        time.sleep(0.05)


def fetch_sources(named: Named, offset: int, qname: dns.name.Name) -> list[str]:
    """Where each fetch for qname after offset came from ("cache", "store, not cached",
    "store, cache bypassed"), from the trace."""
    key = name_key(qname)
    return [source for name, source in _FETCH.findall(log_since(named, offset)) if name == key]


def cache_counts(log: str) -> dict[str, int]:
    """The counts the driver logs as named stops (the last such line)."""
    found = _COUNTS.findall(log)
    assert found, "no cache counts in named's log"
    keys = ("hits", "misses", "bypassed", "entries", "bytes", "budget", "inserted", "evicted")
    return dict(zip(keys, map(int, found[-1]), strict=True))


# --- asking ------------------------------------------------------------------------------------


def differences(named: Named, expected: dict[Query, Reply]) -> list[str]:
    """The queries named answers otherwise than expected."""
    wrong = []
    for query, reply in expected.items():
        diff = compare_answers(query, reply, ask(named, query))
        if diff is not None:
            wrong.append(detail(query, diff))
    return wrong


def plain_replies(fleet: Fleet, queries: list[Query]) -> dict[Query, Reply]:
    """The plain row's replies: the store as it is now."""
    return {query: ask(fleet.plain, query) for query in queries}


def a_of(named: Named, name: dns.name.Name) -> set[str]:
    answer = complete(ask(named, (name, "A")))
    return {rr[3] for rr in answer.answer if rr[2] == "A"}


def rcode_of(named: Named, name: dns.name.Name, rdtype: str = "A") -> str:
    return complete(ask(named, (name, rdtype))).rcode


def asked_from_cache(named: Named, name: dns.name.Name, rdtype: str = "A") -> Reply:
    """The reply to (name, rdtype), asked until its fetch came from the cache (the first time
    fills it); that it did is asserted."""
    for _ in range(3):
        offset = log_size(named)
        reply = ask(named, (name, rdtype))
        if fetch_sources(named, offset, name)[:1] == ["cache"]:
            return reply
    raise AssertionError(f"{name} {rdtype} is never answered from the cache")


def past_the_bound() -> None:
    """Wait the cached row's bound: every change committed before is answered after."""
    time.sleep(BOUND_MS / 1000 + 0.1)


# --- answers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("store", SIDES)
def test_answers_from_the_cache_are_the_plain_rows(fleets: dict[str, Fleet], store: str
                                                   ) -> None:
    fleet = fleets[store]
    queries = [q for q in derive_queries(fleet.zones) if not q[0].is_subdomain(MANY)]
    # Every coverage query over pg; a third of them over the others, whose cache is the same
    # core's (each row against native BIND on everything: tests/test_drivers.py).
    queries = queries[::1 if store == "pg" else 3] + [(host(i), "A") for i in range(0, HOSTS, 97)]
    expected = plain_replies(fleet, queries)
    offset = log_size(fleet.cached)
    first = differences(fleet.cached, expected)
    second = differences(fleet.cached, expected)
    assert not first and not second, "\n".join((first or second)[:5])
    sources = [s for _, s in _FETCH.findall(log_since(fleet.cached, offset))]
    assert sources.count("cache") > len(queries) // 2, (sources.count("cache"), len(queries))


MAIL = dns.name.from_text("mail", COVERAGE_ORIGIN)  # one A record, 192.0.2.25
ADDED = dns.name.from_text("added", COVERAGE_ORIGIN)


def _change_record(fleet: Fleet) -> Callable[[], None]:
    fleet.side.set_a(fleet.loaded, MAIL, COVERAGE_ORIGIN, "192.0.2.201")
    return lambda: fleet.side.set_a(fleet.loaded, MAIL, COVERAGE_ORIGIN, "192.0.2.25")


def _add_name(fleet: Fleet) -> Callable[[], None]:
    fleet.side.add_a(fleet.loaded, ADDED, COVERAGE_ORIGIN, "192.0.2.202")
    return lambda: fleet.side.delete(fleet.loaded, ADDED, COVERAGE_ORIGIN)


def _delete_name(fleet: Fleet) -> Callable[[], None]:
    fleet.side.delete(fleet.loaded, host(7), MANY)
    return lambda: fleet.side.add_a(fleet.loaded, host(7), MANY, host_address(7))


def _replace_zone(fleet: Fleet) -> Callable[[], None]:
    """The loader's zone update (the zones row tells of the change, not each records row)."""
    zone = next(z for z in fleet.zones if z.origin == MANY)
    changed = dataclasses.replace(zone, records=[
        r if r.owner != host(9) else make_record(host(9), 300, "A", "10.9.9.9")
        for r in zone.records])
    fleet.loaded.loader.update(changed, fleet.loaded.target)
    return lambda: fleet.loaded.loader.update(zone, fleet.loaded.target)


CHANGES: dict[str, tuple[Callable[[Fleet], Callable[[], None]], Query]] = {
    "record changed": (_change_record, (MAIL, "A")),
    "name added": (_add_name, (ADDED, "A")),
    "name deleted": (_delete_name, (host(7), "A")),
    "zone replaced": (_replace_zone, (host(9), "A")),
}


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("store", SIDES)
def test_a_change_is_answered_within_the_bound(fleets: dict[str, Fleet], store: str,
                                               change: str) -> None:
    """Made through the database's own client (psql, mariadb), or by the loader."""
    fleet = fleets[store]
    make, query = CHANGES[change]
    before = asked_from_cache(fleet.cached, *query)
    undo = make(fleet)
    try:
        past_the_bound()
        after = ask(fleet.cached, query)
        assert compare_answers(query, before, after) is not None, "the change is not seen"
        assert compare_answers(query, ask(fleet.plain, query), after) is None
        again = asked_from_cache(fleet.cached, *query)
        assert compare_answers(query, after, again) is None, "the cache went back"
    finally:
        undo()
    past_the_bound()
    assert compare_answers(query, before, ask(fleet.cached, query)) is None


GONE = dns.name.from_text("gone.test.")


def gone_zone() -> Zone:
    return zone_of_addresses(GONE, "192.0.2.54", [("www", "192.0.2.80")])


@pytest.mark.parametrize("store", SIDES)
def test_a_zone_added_and_deleted_changes_that_zone_only(fleets: dict[str, Fleet],
                                                          store: str) -> None:
    """The writes workload's zone writes, through the loader's writer: the zone answers while
    it is there and not after, as the plain row does, and the other zones' cached entries
    stay (ldap+cache once flushed the whole cache for a deleted zone entry: 359 flushes in a
    53-s `writes` step run at 100 writes/s, and its reads fell through to slapd)."""
    fleet = fleets[store]
    named, kept, www = fleet.cached, host(13), dns.name.from_text("www", GONE)
    zone = gone_zone()
    writer = fleet.loaded.loader.writer(fleet.loaded.target)
    try:
        writer.apply(Change(ADD_ZONE, GONE, zone_records=tuple(zone.records)))
        past_the_bound()
        assert a_of(named, www) == {"192.0.2.80"}
        asked_from_cache(named, kept)
        writer.apply(Change(DELETE_ZONE, GONE))
        past_the_bound()
        assert rcode_of(named, www) == rcode_of(fleet.plain, www) != "NOERROR"
        offset = log_size(named)
        assert a_of(named, kept) == {host_address(13)}
        assert fetch_sources(named, offset, kept)[:1] == ["cache"], "the cache was flushed"
    finally:
        with suppress(UserError):  # not there: deleted above
            writer.apply(Change(DELETE_ZONE, GONE))
        writer.close()


# --- the channel down --------------------------------------------------------------------------


def change_channel(fleet: Fleet) -> ChangeChannel:
    channel = get_server(fleet.side.cached).change_channel()
    assert channel is not None
    return channel


def channel_connection(fleet: Fleet, named: Named, offset: int = 0) -> int:
    """The driver's channel connection, as named's log last named it after offset."""
    found = change_channel(fleet).connection(log_since(named, offset))
    assert found is not None, "named's log names no channel connection"
    return found


@contextmanager
def channel_cut(fleet: Fleet, named: Named, *, kept_out: bool = True) -> Iterator[None]:
    """named's channel connection (named's log names it) ended and, kept_out, kept from
    coming back until the block ends: the reader account may hold no more connections than
    it holds then (ServerKind.channel_cut, as `bench faults`' channel-cut does it; the pool's
    are all open: one connection, and it has answered)."""
    with get_server(fleet.side.cached).channel_cut(fleet.loaded.target, named,
                                                   kept_out=kept_out):
        yield


@pytest.mark.parametrize("store", CUT_SIDES)
def test_a_killed_channel_flushes_bypasses_and_recovers(fleets: dict[str, Fleet],
                                                        store: str) -> None:
    fleet = fleets[store]
    named, name = fleet.cached, host(11)
    asked_from_cache(named, name)
    offset = log_size(named)
    with channel_cut(fleet, named):
        wait_for_log(named, "cache: flushed, and bypassed", offset)
        asked = log_size(named)
        assert a_of(named, name) == {host_address(11)}
        assert fetch_sources(named, asked, name)[:1] == ["store, cache bypassed"]
        fleet.side.set_a(fleet.loaded, name, MANY, "10.203.0.1")
        try:
            assert a_of(named, name) == {"10.203.0.1"}, "the bypassed cache answered"
        finally:
            back = log_size(named)
            fleet.side.set_a(fleet.loaded, name, MANY, host_address(11))
    wait_for_log(named, "cache: answering from the cache", back)
    assert channel_connection(fleet, named, back) > 0
    asked_from_cache(named, name)
    assert a_of(named, name) == {host_address(11)}


def test_a_restarted_slapd_flushes_the_ldap_cache_and_it_recovers(fleets: dict[str, Fleet]
                                                                 ) -> None:
    """slapd restarted under the cached row: the log says flushed and bypassed, then answering
    again; a change made after is answered within the bound, from the cache after that."""
    fleet = fleets["ldap"]
    named, name = fleet.cached, host(11)
    asked_from_cache(named, name)
    offset = log_size(named)
    fleet.loaded.restart_database()
    wait_for_log(named, "cache: flushed, and bypassed", offset)
    wait_for_log(named, "cache: answering from the cache", offset)
    assert _until(lambda: rcode_of(named, name) == "NOERROR", 30), "answers did not resume"
    fleet.side.set_a(fleet.loaded, name, MANY, "10.205.0.1")
    try:
        past_the_bound()
        assert a_of(named, name) == {"10.205.0.1"}
        asked_from_cache(named, name)
    finally:
        fleet.side.set_a(fleet.loaded, name, MANY, host_address(11))
    past_the_bound()
    assert a_of(named, name) == {host_address(11)}


# --- a full cache ------------------------------------------------------------------------------


def test_a_full_cache_evicts_and_stays_correct(fleet: Fleet) -> None:
    """64 KiB (one shard) for a few thousand names: every answer the plain row's, before and
    after changes; evictions; never more than the budget held."""
    kind = _kind(fleet.side.cached, cache=DlzCache(size_kb=64, bound_ms=BOUND_MS))
    named = Named(fleet.run_dir / "named-small", kind.body(fleet.loaded.target, 2), threads=2,
                  env=kind.client_env(fleet.loaded.target))
    # About 200 bytes of entries each: twice what 64 KiB holds.
    queries: list[Query] = [(host(i), "A") for i in range(0, HOSTS, 3)]
    changed = [host(i) for i in range(0, HOSTS, 300)]
    with named:
        wait_for_log(named, "cache: answering from the cache", 0)
        expected = plain_replies(fleet, queries)
        for _ in range(2):
            wrong = differences(named, expected)
            assert not wrong, "\n".join(wrong[:5])
        for i, name in enumerate(changed):
            fleet.side.set_a(fleet.loaded, name, MANY, f"10.200.{i}.1")
        try:
            past_the_bound()
            wrong = differences(named, plain_replies(fleet, queries))
            assert not wrong, "\n".join(wrong[:5])
        finally:
            for name in changed:
                fleet.side.set_a(fleet.loaded, name, MANY, host_address(int(name.labels[0][4:])))
        log = named.log_path
    counts = cache_counts(log.read_text(errors="replace"))
    assert counts["budget"] == 64 * 1024
    assert counts["evicted"] > 0 and counts["hits"] > 0, counts
    assert 0 < counts["bytes"] <= counts["budget"], counts


# --- RFC 2136 updates --------------------------------------------------------------------------


@contextmanager
def silent_role(fleet: Fleet, role: str) -> Iterator[None]:
    """Sessions of role that start inside the block send no notification of the records rows
    they write (schemas/pg_notify.sql: dlz.zone_replace)."""
    with fleet.loaded.loader.database.connect(fleet.loaded.target) as conn:
        conn.autocommit = True
        conn.execute(f"ALTER ROLE {role} SET dlz.zone_replace = 'on'")
        try:
            yield
        finally:
            conn.execute(f"ALTER ROLE {role} RESET dlz.zone_replace")


def _update(message: dns.update.UpdateMessage, named: Named) -> str:
    return dns.rcode.to_text(dns.query.tcp(message, named.host, port=named.port,
                                           timeout=10).rcode())


def test_an_update_through_the_cached_row_is_answered_at_once(fleet: Fleet) -> None:
    """Its own writes are never notified here: only the invalidation at the commit can make
    the next query see them."""
    kind = _kind(fleet.side.cached, updates=NamedUpdatePolicy((COVERAGE_ORIGIN,), KEY))
    target = fleet.loaded.target
    named = Named(fleet.run_dir / "named-updates", kind.body(target, 2, extra={"trace": "yes"}),
                  threads=2, env=kind.client_env(target))  # makes the writer role
    name = dns.name.from_text("updated", COVERAGE_ORIGIN)
    with silent_role(fleet, WRITER_ROLE), named:
        wait_for_log(named, "cache: answering from the cache", 0)
        for value in ("192.0.2.211", "192.0.2.212", "192.0.2.213"):
            asked_from_cache(named, name)
            message = dns.update.UpdateMessage(COVERAGE_ORIGIN, keyring=KEY.keyring(),
                                               keyname=dns.name.from_text(KEY.name))
            message.replace(name, 300, "A", value)
            assert _update(message, named) == "NOERROR"
            assert a_of(named, name) == {value}
        message = dns.update.UpdateMessage(COVERAGE_ORIGIN, keyring=KEY.keyring(),
                                           keyname=dns.name.from_text(KEY.name))
        message.delete(name)
        assert _update(message, named) == "NOERROR"
        assert rcode_of(named, name) == "NXDOMAIN"


# --- memory checking ---------------------------------------------------------------------------


@pytest.mark.slow
def test_valgrind_finds_nothing_in_the_cache(fleet: Fleet) -> None:
    """named under Valgrind with a small cache: answers filling and evicting it, a change
    through psql, the listener killed and back; any memcheck error in our code fails."""
    if not Path("/usr/bin/valgrind").exists():
        pytest.skip("valgrind is not installed")
    kind = _kind(fleet.side.cached, cache=DlzCache(size_kb=64, bound_ms=5000))
    report = fleet.run_dir / "valgrind-cache.log"
    extra = {"connect_timeout_ms": "20000", "query_timeout_ms": "20000"}
    named = Named(fleet.run_dir / "named-valgrind", kind.body(fleet.loaded.target, 1, extra=extra),
                  env=kind.client_env(fleet.loaded.target),
                  wrapper=valgrind_wrapper(report, [VALGRIND_SUPPRESSIONS]))
    queries: list[Query] = [(host(i), "A") for i in range(0, 400)]
    name = host(13)
    with named:
        wait_for_log(named, "cache: answering from the cache", 0, seconds=120)
        for _ in range(2):
            for query in queries:
                named.query(*query, timeout=30)
        fleet.side.set_a(fleet.loaded, name, MANY, "10.204.0.1")
        try:
            assert _until(lambda: a_of(named, name) == {"10.204.0.1"}, 30)
        finally:
            fleet.side.set_a(fleet.loaded, name, MANY, host_address(13))
        offset = log_size(named)
        with channel_cut(fleet, named, kept_out=False):
            pass
        wait_for_log(named, "cache: answering from the cache", offset, seconds=120)
        assert a_of(named, name) == {host_address(13)}
    log = report.read_text(errors="replace")
    assert "ERROR SUMMARY" in log
    found = valgrind_errors(log, stack_frames_of(kind.library_file))
    assert not found, "\n\n".join(found[:3])


def _until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture(scope="module")
def tools_built() -> None:
    done = subprocess.run(["make", "-s", f"-j{os.cpu_count() or 1}", "-C",
                           str(REPO_ROOT / "drivers"), "tools"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("build", ["cache_check", "cache_check_tsan"])
def test_the_cache_alone_against_a_simulated_store(tools_built: None, build: str) -> None:
    """Every rule in turn, then readers, writers, outages and eviction at once for 1 s: no
    hit older than a change reported before it, no sanitizer report (ASan and UBSan, or
    ThreadSanitizer's data races)."""
    for args in (["units"], ["stress", "1"]):
        done = subprocess.run([str(TOOLS / build), *args], capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr[-4000:]
        assert "all checks passed" in done.stdout


# --- the staleness check of `bench writes` ----------------------------------------------------


def sampled_writes(fleet: Fleet, zone: dns.name.Name, named: Named, writes: int, *,
                   bound_ms: float, timeout_s: float) -> Sampler:
    """writes record changes (add, change, delete) in zone made through fleet's store's own
    writer, each followed on named by writes' sampler with its staleness check."""
    cycle = WriteCycle([zone], zone_kinds=False)
    stop = threading.Event()
    sampler = Sampler(named, cycle, stop, stale_bound_ms=bound_ms, visible_timeout_s=timeout_s)
    sampler.start()
    try:
        with fleet.loaded.loader.writer(fleet.loaded.target) as store:
            for _ in range(writes):
                change = cycle.next()
                store.apply(change)
                cycle.done(change, time.monotonic_ns())
                sampler.offer(len(cycle.changes) - 1)
                sampler.idle.wait()  # followed to its end before the next
    finally:
        stop.set()
        sampler.join()
    return sampler


def test_the_staleness_check_holds_each_answer_to_the_bound(fleets: dict[str, Fleet]) -> None:
    """The cached row, written through its store: no sampled answer misses a write committed
    more than the bound before it. A server that never sees the writes (the mysql fleet's,
    asked about writes into pg): every write, and every answer past the bound, stale."""
    fresh = sampled_writes(fleets["pg"], COVERAGE_ORIGIN, fleets["pg"].cached, 6,
                           bound_ms=BOUND_MS, timeout_s=10)
    assert fresh.not_seen == 0 and len(fresh.delays_ms) == 6
    assert fresh.answers >= 6 * (1 + CONFIRM_ASKS)
    assert fresh.stale_writes == 0 and fresh.stale_answers == 0
    blind = sampled_writes(fleets["pg"], MANY, fleets["mysql"].cached, 3, bound_ms=50,
                           timeout_s=0.3)
    assert blind.not_seen == 3 and blind.stale_writes == 3
    assert 0 < blind.stale_answers < blind.answers


# --- arguments ---------------------------------------------------------------------------------


def test_a_cache_over_a_store_without_a_change_channel_does_not_start(run_dir: Path) -> None:
    kind = _kind("fs", cache=DlzCache())
    with loaded_store(kind, lambda: iter(coverage_zones()), run_dir / "fs") as loaded:
        named = loaded.dns_server(run_dir / "fs", threads=1)
        with pytest.raises(UserError):
            with named:
                pass
        assert "cannot tell the driver of its changes" in named.log_path.read_text()
