"""Every built DLZ driver (all but native and memory), on the same data, in a real named.

One fleet serves the data set through native BIND, the memory driver and every driver at once
(each store's server and each named start once for the module): the answers are compared with
bench.verify side by side, as `python3 -m bench verify` does, and then per driver:
  - answers and zone transfers: no difference beyond BIND's own DLZ-path classes, on the
    coverage set and on hand-written real-world-shaped zones (tests/data/realworld: a TLD
    full of delegations, an in-addr.arpa reverse zone with an RFC 2317 delegation);
  - 4 concurrent clients against named -n 4 with 4 connections: the memory driver's answers;
  - a store update is answered within a second (stores that need no reload);
  - the database stopped mid-load: SERVFAIL, not a crash or a hang; back: answers resume, and
    named was never restarted;
  - the filesystem driver never reads outside its root;
  - the AddressSanitizer build under concurrent queries, and named under Valgrind.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import dns.exception
import dns.message
import dns.name
import dns.rcode
import dns.wire
import pytest

from base.paths import REPO_ROOT
from bench.measure.serving import LoadedStore, loaded_store
from bench.verify.answers import (
    UDP_PAYLOAD,
    Reply,
    ask,
    compare_answers,
    complete,
    rr_owner,
    transfer,
)
from bench.verify.compare import REFERENCE_SERVERS, Comparison, compare_servers, detail
from loaders.fs import XFR_HEADER, ZONE_FILE, FsLoader, zone_file_path
from loaders.loader import DEFAULT_XFR_CLIENTS
from servers import SERVERS, get_server
from servers.dlz import DlzNamed, stack_frames_of
from servers.named import Named, asan_environment, valgrind_errors, valgrind_wrapper
from tests.at_once import entered_at_once
from zonedata.derive import Query, derive_queries
from zonedata.generator import coverage_zones
from zonedata.model import Record, Zone, make_record, name_key
from zonedata.zonefiles import read_zone_dir

REALWORLD = Path(__file__).parent / "data" / "realworld"
# Library reports whose stacks pass through a driver without being its own.
VALGRIND_SUPPRESSIONS = Path(__file__).parent / "data" / "valgrind.supp"
THREADS = 4  # named -n and the driver's connections
CLIENTS = 4  # concurrent client threads


def _dlz(driver: str) -> DlzNamed:
    server = get_server(driver)
    assert isinstance(server, DlzNamed), driver
    return server


# The DLZ drivers (other servers, PowerDNS, NSD and Knot, are tests/test_others.py's).
DRIVERS = [s.name for s in SERVERS
           if isinstance(s, DlzNamed) and s.name not in REFERENCE_SERVERS and s.is_built()]
UPDATABLE = [d for d in DRIVERS if not get_server(d).needs_reload]
# The store runs a database server of its own (PostgreSQL, MariaDB, slapd).
WITH_SERVER = [d for d in DRIVERS if get_server(d).loader().database.has_server]


def data_set() -> list[Zone]:
    return [*coverage_zones(), *read_zone_dir(REALWORLD)]


def coverage_queries() -> list[Query]:
    return derive_queries(coverage_zones())


def by_origin(zones: list[Zone], origin: str) -> Zone:
    return next(z for z in zones if z.origin == dns.name.from_text(origin))


# --- the fleet ---------------------------------------------------------------------------------


@dataclass
class Fleet:
    run_dir: Path
    zones: list[Zone]
    stores: dict[str, LoadedStore]
    named: dict[str, Named]


@pytest.fixture(scope="module")
def fleet(run_dir: Path) -> Iterator[Fleet]:
    zones = data_set()
    with ExitStack() as stack:
        stores = entered_at_once(stack, {d: loaded_store(d, lambda: iter(zones), run_dir / d)
                                         for d in [*REFERENCE_SERVERS, *DRIVERS]})
        named = entered_at_once(stack, {d: s.dns_server(run_dir / d, threads=THREADS)
                                        for d, s in stores.items()})
        yield Fleet(run_dir, zones, stores, named)


def ask_concurrently(named: Named, queries: list[Query], clients: int = CLIENTS
                     ) -> dict[Query, Reply]:
    """Every query's reply, the queries spread over concurrent clients."""
    replies: dict[Query, Reply] = {}
    errors: list[BaseException] = []

    def work(part: list[Query]) -> None:
        try:
            for query in part:
                replies[query] = ask(named, query)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(queries[i::clients],))
               for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, f"{named.run_dir.name}: {errors[0]!r}"
    return replies


# --- answers -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verified(fleet: Fleet) -> dict[str, Comparison]:
    """One comparison of every server side by side, as the verify command makes it."""
    results = compare_servers(fleet.named, derive_queries(fleet.zones), fleet.zones)
    for result in results.values():
        print(f"\n{result.summary()}", end="")
    return results


@pytest.mark.parametrize("driver", ["memory", *DRIVERS])
def test_answers_and_transfers_match_native(verified: dict[str, Comparison],
                                            driver: str) -> None:
    result = verified[driver]
    assert result.total > 2000 and result.identical > 0.9 * result.total, result.summary()
    assert not result.differences, (f"{result.summary()}; first ones:\n"
                                    + "\n".join(result.differences[:5]))


@pytest.fixture(scope="module")
def memory_replies(fleet: Fleet) -> dict[Query, Reply]:
    return {q: ask(fleet.named["memory"], q) for q in coverage_queries()}


@pytest.mark.parametrize("driver", DRIVERS)
def test_concurrent_clients_get_the_memory_drivers_answers(
        fleet: Fleet, memory_replies: dict[Query, Reply], driver: str) -> None:
    """named -n 4, 4 connections, 4 clients at once: every answer as the memory driver's."""
    replies = ask_concurrently(fleet.named[driver], list(memory_replies))
    wrong = [detail(q, diff) for q, reply in replies.items()
             if (diff := compare_answers(q, memory_replies[q], reply)) is not None]
    assert not wrong, f"{len(wrong)} of {len(replies)} differ; first ones:\n" + \
        "\n".join(wrong[:5])


# --- a wildcard owner that is a redirection or a zone cut --------------------------------------

# Names below a wildcard owner: BIND walks down "x.*.w" through "*.w" (lib/dns/sdlz.c findext)
# and must see the DNAME or NS there, while the core tells that lookup of "*.w" from sdlz's
# wildcard probe of "w" by the order of the calls (drivers/common/core.c).
WILD_DNAME = dns.name.from_text("wild-dname.test.")
WILD_NS = dns.name.from_text("wild-ns.test.")


def _below_a_wildcard(origin: dns.name.Name, rdtype: str, rdata: str) -> Zone:
    def rec(rel: str, rtype: str, text: str) -> Record:
        return make_record(dns.name.from_text(rel, origin), 300, rtype, text)
    # Names in the rdata absolute, as the loaders' data sets have them (a relative one would
    # be completed with the zone's name as the query spelled it, in the DLZ path).
    return Zone(origin, [
        rec("@", "SOA", f"ns.{origin} hostmaster.{origin} 1 3600 900 604800 300"),
        rec("@", "NS", f"ns.{origin}"),
        rec("ns", "A", "192.0.2.53"),
        rec("*.w", rdtype, rdata),
        rec("x.*.w", "A", "192.0.2.1"),
        rec("y.b.*.w", "TXT", '"below an empty non-terminal"'),
        rec("*.*.w", "A", "192.0.2.2"),
        rec("v", "A", "192.0.2.3"),
    ])


@dataclass
class BelowWildcard:
    dname: Zone
    ns: Zone
    named: dict[str, Named]


@pytest.fixture(scope="module")
def below_wildcard(run_dir: Path) -> Iterator[BelowWildcard]:
    """Native BIND and the memory driver serving a zone with a DNAME at "*.w" and names below
    it; the memory driver also one with an NS there, which native BIND refuses to load
    ("NS record owners cannot legally be wild cards", lib/dns/rbtdb.c)."""
    dname = _below_a_wildcard(WILD_DNAME, "DNAME", "target.example.")
    ns = _below_a_wildcard(WILD_NS, "NS", "ns.example.")
    zones = {"native": [dname], "memory": [dname, ns]}
    with ExitStack() as stack:
        stores = entered_at_once(stack, {
            d: loaded_store(d, lambda z=zones[d]: iter(z), run_dir / "below-wildcard" / d)
            for d in zones})
        named = entered_at_once(stack, {
            d: s.dns_server(run_dir / "below-wildcard" / d, threads=2)
            for d, s in stores.items()})
        yield BelowWildcard(dname, ns, named)


def _not_matched_below_a_match(query: Query, w: dns.name.Name) -> bool:
    """Not a name two labels or more below w outside "*.w": the walk down to it passes a name
    that "*.w" matches, and sdlz's wildcard probe there hands that name the DNAME, which
    native BIND applies to the names below "*.w" only (BIND's DLZ path, whatever the driver)."""
    name = query[0]
    return not (name.is_subdomain(w) and not name.is_subdomain(dns.name.Name([b"*", *w.labels]))
                and len(name) > len(w) + 1)


def test_a_wildcard_dname_with_names_below_answers_as_native(
        below_wildcard: BelowWildcard) -> None:
    """Every query of the zone (names at, below and matching "*.w", but for those the DLZ
    path answers otherwise whatever the driver) and its transfer: the memory driver answers
    as native BIND, which redirects every name below "*.w"."""
    zones = [below_wildcard.dname]
    w = dns.name.from_text("w", WILD_DNAME)
    queries = [q for q in derive_queries(zones) if _not_matched_below_a_match(q, w)]
    result = compare_servers(below_wildcard.named, queries, zones)["memory"]
    assert not result.differences, (f"{result.summary()}; first ones:\n"
                                    + "\n".join(result.differences[:5]))
    redirected = complete(ask(below_wildcard.named["native"],
                              (dns.name.from_text("x.*.w", WILD_DNAME), "A")))
    assert any(rr[2] == "DNAME" for rr in redirected.answer), redirected.describe()


@pytest.mark.parametrize("below", ["x.*.w", "y.b.*.w", "q.*.w", "*.*.w"])
def test_a_wildcard_ns_delegates_the_names_below_it(below_wildcard: BelowWildcard,
                                                    below: str) -> None:
    """Native BIND refuses the zone, so the DLZ path is the only one to judge: BIND's walk meets
    the NS at "*.w" on its way down, and every name below it is referred there."""
    owner = rr_owner(dns.name.from_text("*.w", WILD_NS))
    reply = complete(ask(below_wildcard.named["memory"],
                         (dns.name.from_text(below, WILD_NS), "A")))
    assert reply.rcode == "NOERROR" and not reply.aa and not reply.answer, reply.describe()
    assert {(rr[0], rr[2]) for rr in reply.authority} == {(owner, "NS")}, reply.describe()


# --- update visibility -------------------------------------------------------------------------


def _txt_values(named: Named, name: dns.name.Name) -> set[str]:
    msg = named.query(name, "TXT", payload=UDP_PAYLOAD)
    return {rd.to_text() for rrset in msg.answer for rd in rrset}


def _seen_within(named: Named, name: dns.name.Name, expected: set[str], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _txt_values(named, name) != expected:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("driver", UPDATABLE)
def test_update_is_answered_within_a_second(fleet: Fleet, driver: str) -> None:
    """An update of the store reaches every named thread within a second, and stays: the
    core's per-thread memos never bring the old answer back."""
    loaded, named = fleet.stores[driver], fleet.named[driver]
    zone = by_origin(fleet.zones, "child.cov.test.")
    marker = dns.name.from_text(f"update-{driver}", zone.origin)
    value = f'"{time.time_ns()}"'
    changed = dataclasses.replace(zone, records=[*zone.records,
                                                 make_record(marker, 60, "TXT", value)])
    for _ in range(4 * THREADS):  # every thread has met the name: no such name
        assert named.query(marker, "TXT").rcode() == dns.rcode.NXDOMAIN
    loaded.loader.update(changed, loaded.target)
    try:
        assert _seen_within(named, marker, {value}, 1.0), "update not answered within 1 s"
        answers = ask_concurrently(named, [(marker, "TXT")] * 40)  # the same query 40 times
        assert all(complete(r).answer for r in answers.values())
    finally:
        loaded.loader.update(zone, loaded.target)
    assert _seen_within(named, marker, set(), 1.0), "the zone's restore not seen within 1 s"


# --- what a store may hold --------------------------------------------------------------------


def _wire_ttls(named: Named, owner: dns.name.Name, rdtype: str) -> list[int]:
    """The TTL of each answer RR as named sent it: dnspython's message parser takes a TTL with
    the top bit set for 0 (RFC 2181, section 8), and would hide one."""
    reply = named.exchange(dns.message.make_query(owner, rdtype).to_wire())
    parser = dns.wire.Parser(reply, 12)
    questions, answers = struct.unpack("!HH", reply[4:8])
    for _ in range(questions):
        parser.get_name()
        parser.get_struct("!HH")
    ttls = []
    for _ in range(answers):
        parser.get_name()
        _, _, ttl, length = parser.get_struct("!HHIH")
        parser.get_bytes(length)
        ttls.append(ttl)
    return ttls


@pytest.mark.skipif("pg" not in DRIVERS, reason="the pg driver is not built")
@pytest.mark.parametrize("ttl", [-1, -2**31])
def test_a_negative_ttl_in_postgresql_is_served_as_zero(fleet: Fleet, ttl: int) -> None:
    """PostgreSQL's ttl column is a signed integer, so a row may hold a negative TTL: 32 bits
    with the top bit set. RFC 2181 (section 8) takes such a TTL for zero, as native BIND does
    with one above 2^31 - 1 in a zone file; sent as it came, -1 would be 4294967295."""
    loaded, named = fleet.stores["pg"], fleet.named["pg"]
    zone = by_origin(fleet.zones, "child.cov.test.")
    owner = dns.name.from_text(f"negative-ttl-{-ttl}", zone.origin)
    with loaded.loader.database.connect(loaded.target) as conn:
        conn.execute("INSERT INTO records (zone_id, name, type, ttl, data) SELECT id, %s, 'A', "
                     "%s, '192.0.2.7' FROM zones WHERE name = %s",
                     (name_key(owner), ttl, zone.key))
    try:
        assert _until(lambda: bool(_wire_ttls(named, owner, "A")), 5)
        assert _wire_ttls(named, owner, "A") == [0]
    finally:
        with loaded.loader.database.connect(loaded.target) as conn:
            conn.execute("DELETE FROM records r USING zones z WHERE r.zone_id = z.id AND "
                         "z.name = %s AND r.name = %s", (zone.key, name_key(owner)))


# --- the database goes away --------------------------------------------------------------------


class Load:
    """Clients asking queries in a loop until stopped; what they got, by outcome."""

    def __init__(self, named: Named, queries: list[Query], clients: int = 2) -> None:
        self.named, self.queries = named, queries
        self.outcomes: dict[str, int] = {}
        self.hangs: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._work, args=(i,)) for i in range(clients)]

    def _work(self, offset: int) -> None:
        i = offset
        while not self._stop.is_set():
            qname, rdtype = self.queries[i % len(self.queries)]
            i += 1
            try:
                # The drivers bound every database call by a few seconds: 15 s is a hang.
                rcode = dns.rcode.to_text(self.named.query(qname, rdtype, timeout=15).rcode())
            except dns.exception.Timeout:
                self.hangs.append(f"{qname} {rdtype}")
                continue
            self.outcomes[rcode] = self.outcomes.get(rcode, 0) + 1

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()


def _rcode(named: Named, query: Query) -> str:
    return dns.rcode.to_text(named.query(*query, timeout=15).rcode())


def _until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("driver", WITH_SERVER)
def test_database_restart_mid_load(fleet: Fleet, memory_replies: dict[Query, Reply],
                                   driver: str) -> None:
    """Stopped: SERVFAIL, quickly. Started again: the right answers, from the same named."""
    loaded, named = fleet.stores[driver], fleet.named[driver]
    pid = named.pids()[0]
    queries = [q for q in memory_replies if complete(memory_replies[q]).rcode == "NOERROR"
               and q[0].is_subdomain(dns.name.from_text("cov.test."))][:50]
    probe = queries[0]
    with Load(named, queries) as load:
        time.sleep(0.3)
        loaded.target.stop()
        try:
            assert _until(lambda: _rcode(named, probe) == "SERVFAIL", 10), \
                "no SERVFAIL with the database stopped"
            down = [q for q in queries[:10] if _rcode(named, q) != "SERVFAIL"]
            assert not down, f"answered with the database stopped: {down}"
        finally:
            loaded.target.start()
        assert _until(lambda: _rcode(named, probe) == "NOERROR", 30), "answers did not resume"
        time.sleep(0.3)
    wrong = [detail(q, diff) for q in queries
             if (diff := compare_answers(q, memory_replies[q], ask(named, q))) is not None]
    assert not wrong, "\n".join(wrong[:3])
    assert not load.hangs, f"no answer within 15 s: {load.hangs[:5]}"
    assert load.outcomes.get("SERVFAIL", 0) and load.outcomes.get("NOERROR", 0), load.outcomes
    assert named.pids() and named.pids()[0] == pid, "named was restarted"


# --- the filesystem driver stays in its root ---------------------------------------------------

SENTINEL_TXT = '"SENTINEL: read outside the root"'
SENTINEL_A = "192.0.2.66"


def _sentinel_zone(origin: dns.name.Name) -> Zone:
    def rec(rel: str, rdtype: str, rdata: str) -> Record:
        return make_record(dns.name.from_text(rel, origin), 60, rdtype, rdata)
    return Zone(origin, [
        rec("@", "SOA", "ns hostmaster 1 3600 900 604800 60"),
        rec("@", "NS", "ns"),
        rec("@", "TXT", SENTINEL_TXT),
        rec("ns", "A", SENTINEL_A),
        rec("*", "TXT", SENTINEL_TXT),
        rec("*", "A", SENTINEL_A),
        rec("sentinel", "TXT", SENTINEL_TXT),
        rec("sentinel", "A", SENTINEL_A),
    ])


def plant_sentinels(outside: Path, origins: list[dns.name.Name]) -> None:
    """Next to the root, a tree laid out like a store root whose zones all answer SENTINEL,
    and loose copies of a sentinel zone file where a path climbing out of the index would land
    (whichever zone such a file is taken for, its apex and wildcard answer SENTINEL)."""
    FsLoader().load([_sentinel_zone(o) for o in origins], outside)
    header = " ".join([XFR_HEADER, *DEFAULT_XFR_CLIENTS])
    lines = sorted(f"{owner} {rdtype} 60 {rdata}"
                   for owner in (k for o in origins for k in (name_key(o), f"*.{name_key(o)}"))
                   for rdtype, rdata in (("TXT", SENTINEL_TXT), ("A", SENTINEL_A)))
    loose = "\n".join([header, *lines, ""])
    for directory in (outside, outside / "tmp", outside / "zones"):
        for name in (ZONE_FILE, "sentinel", "..zone", "\\.\\..zone"):
            (directory / name).write_text(loose)


_UP_LABELS = (b"..", b"\\.\\.", b".", b"...", b"..\x00", b"\\047..")


def escaping_names(origin: dns.name.Name) -> list[dns.name.Name]:
    """Names under origin that would leave the root if a driver built paths naively."""
    tails = ([b"sentinel"], [b"test", b"zones"], [b"cov", b"test", b"zones"], [])
    names = []
    for up in _UP_LABELS:
        for depth in range(1, 7):
            for tail in tails:
                names.append(dns.name.Name([*tail, *[up] * depth, *origin.labels]))
    for label in (b"../../../../sentinel", b"a/../../../../../sentinel", b"/sentinel",
                  b"a/../..", b"..\\..", b"\x00", b"sentinel\x00", b"\x00/../../../sentinel",
                  b"\\047..\\047..\\047sentinel", b"/", b"//", b"*"):
        names.append(dns.name.Name([label, *origin.labels]))
    names += [_fill(b"../" * 21, origin), _fill(b"\x00" * 63, origin),
              _fill(b"/" * 63, origin)]
    return names


def _fill(label: bytes, origin: dns.name.Name) -> dns.name.Name:
    """Copies of a 63-octet label under origin, then a shorter one: 255 octets in all."""
    labels: list[bytes] = []
    room = 255 - len(origin.to_wire())
    while room > 64:
        labels.append(label)
        room -= 64
    if room > 1:
        labels.append(label[:room - 1])
    return dns.name.Name([*labels, *origin.labels])


@pytest.mark.skipif("fs" not in DRIVERS, reason="the filesystem driver is not built")
def test_filesystem_names_never_leave_the_root(fleet: Fleet) -> None:
    root: Path = fleet.stores["fs"].target
    origins = [z.origin for z in fleet.zones if z.origin != dns.name.root]
    plant_sentinels(root.parent, origins)
    named, memory = fleet.named["fs"], fleet.named["memory"]
    tested = [dns.name.from_text(o) for o in ("cov.test.", "test.")] + \
        [o for o in origins if b"zone's" in o.labels[0]]
    queries = [(name, rdtype) for origin in tested
               for name in escaping_names(origin) for rdtype in ("TXT", "A")]
    leaked, wrong = [], []
    for query in queries:
        reply = ask(named, query)
        text = complete(reply).describe()
        if "SENTINEL" in text or SENTINEL_A in text:
            leaked.append(f"{query[0]} {query[1]}: {text}")
        diff = compare_answers(query, ask(memory, query), reply)
        if diff is not None:
            wrong.append(detail(query, diff))
    for name in escaping_names(dns.name.from_text("cov.test."))[:40]:
        xfr = transfer(named, name)
        assert xfr.rcode != "NOERROR" or "SENTINEL" not in xfr.describe(), name
    assert not leaked, f"{len(leaked)} answers read outside the root:\n" + "\n".join(leaked[:5])
    assert not wrong, f"{len(wrong)} of {len(queries)} differ from the memory driver:\n" + \
        "\n".join(wrong[:5])


# A zone file in each way the store can be broken; the driver must answer SERVFAIL (a store
# error) and neither crash nor read out of bounds.
BROKEN_ZONE_FILES: dict[str, bytes] = {
    "empty": b"",
    "truncated": b";xfr 127.0.0.1 ::1\ntruncated.broken.test SOA 60 ns hostmaster 1 2 3 4",
    "headless": b"headless.broken.test A 60 192.0.2.1\n",
    "nospace": b";xfr 127.0.0.1 ::1\n" + b"x" * 5000 + b"\n",
    "nofields": b";xfr 127.0.0.1 ::1\nnofields.broken.test SOA\n",
    "badttl": b";xfr 127.0.0.1 ::1\nbadttl.broken.test A 99999999999 192.0.2.1\n",
    # Larger than the driver reads into its small buffer (READ_MAX): these are kept as copies.
    "bignoheader": b"bignoheader.broken.test A 60 192.0.2.1\n" * 2000,
    "bigtruncated": (b";xfr 127.0.0.1 ::1\n"
                     + b"bigtruncated.broken.test A 60 192.0.2.1\n" * 2000)[:-1],
}
LARGE_HOSTS = 3000  # a zone file of about 150 kB: a kept copy, not the small buffer


def plant_large_zone(root: Path) -> Zone:
    """large.broken.test, a good zone whose file the driver maps rather than reads."""
    origin = dns.name.from_text("large.broken.test.")
    zone = Zone(origin, [
        make_record(origin, 60, "SOA", "ns.large.broken.test. h.large.broken.test. 1 3600 900 "
                                       "604800 60"),
        make_record(origin, 60, "NS", "ns.large.broken.test."),
        *(make_record(dns.name.from_text(f"host{i}", origin), 60, "A", f"192.0.2.{i % 250 + 1}")
          for i in range(LARGE_HOSTS))])
    FsLoader().load([zone], root.parent / "large")
    path = zone_file_path(name_key(origin))
    assert (root.parent / "large" / path).stat().st_size > 64 * 1024
    (root / path).parent.mkdir(parents=True)
    shutil.copyfile(root.parent / "large" / path, root / path)
    return zone


def plant_broken_zones(root: Path) -> Path:
    """Zones <kind>.broken.test with broken zone files, a directory, a FIFO and a symlink
    (to a sentinel zone outside the root) where a zone file belongs; their parent directory."""
    broken = root / "zones" / "test" / "broken"
    for kind, data in BROKEN_ZONE_FILES.items():
        (broken / kind).mkdir(parents=True)
        (broken / kind / ZONE_FILE).write_bytes(data)
    (broken / "directory" / ZONE_FILE).mkdir(parents=True)
    (broken / "fifo").mkdir()
    os.mkfifo(broken / "fifo" / ZONE_FILE)
    origin = dns.name.from_text("symlink.broken.test.")
    FsLoader().load([_sentinel_zone(origin)], root.parent / "symlinked")
    (broken / "symlink").mkdir()
    (broken / "symlink" / ZONE_FILE).symlink_to(
        root.parent / "symlinked" / zone_file_path(name_key(origin)))
    return broken


@pytest.mark.skipif("fs" not in DRIVERS, reason="the filesystem driver is not built")
def test_filesystem_broken_zone_files_are_store_errors(fleet: Fleet, asan_built: None) -> None:
    """Against the ASan build: SERVFAIL for each broken file, small (read) or large (a kept copy),
    the symlink refused (no zone: the parent zone test. answers as the memory driver does), a
    large good zone answered, no ASan report."""
    loaded = fleet.stores["fs"]
    broken = plant_broken_zones(loaded.target)
    large = plant_large_zone(loaded.target)
    asan_dir = fleet.run_dir / "asan-fs-broken"
    asan_dir.mkdir()
    try:
        with Named(fleet.run_dir / "named-asan-fs-broken", _asan_clause(loaded, THREADS),
                   threads=THREADS, env=asan_environment(asan_dir)) as named:
            for kind in [*BROKEN_ZONE_FILES, "directory", "fifo"]:
                for name, rdtype in ((f"{kind}.broken.test.", "SOA"),
                                     (f"www.{kind}.broken.test.", "A")):
                    rcode = complete(ask(named, (dns.name.from_text(name), rdtype))).rcode
                    assert rcode == "SERVFAIL", f"{name} {rdtype}: {rcode}"
                zone = dns.name.from_text(f"{kind}.broken.test.")
                assert transfer(named, zone).rcode != "NOERROR", kind
            for query in ((dns.name.from_text("symlink.broken.test."), "SOA"),
                          (dns.name.from_text("sentinel.symlink.broken.test."), "TXT")):
                reply = ask(named, query)
                assert "SENTINEL" not in complete(reply).describe()
                assert compare_answers(query, ask(fleet.named["memory"], query), reply) is None
            # Still answering from the good zones after all those errors.
            assert transfer(named, dns.name.from_text("cov.test.")).rcode == "NOERROR"
            for i in (0, LARGE_HOSTS // 2, LARGE_HOSTS - 1):
                reply = ask(named, (dns.name.from_text(f"host{i}", large.origin), "A"))
                assert f"192.0.2.{i % 250 + 1}" in complete(reply).describe(), i
            reply = ask(named, (dns.name.from_text("nohost", large.origin), "A"))
            assert complete(reply).rcode == "NXDOMAIN"
            assert transfer(named, large.origin).rcode == "NOERROR"
            log = named.log_path
    finally:
        shutil.rmtree(broken)
    reports = sorted(asan_dir.glob("asan*"))
    assert not reports, reports[0].read_text(errors="replace")[:4000]
    assert "AddressSanitizer" not in log.read_text(errors="replace")


# --- memory safety -----------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def asan_compiling() -> Iterator[subprocess.Popen[str]]:
    """`make asan`, started with the module and waited for at its end: `make build` does not
    make the ASan builds, so a fresh clone compiles all of them here (one compiler per core,
    each driver one gcc of its sources and the core), while the fleet's stores load and
    `verify` parses answers on one core."""
    make = subprocess.Popen(["make", "-s", f"-j{os.cpu_count() or 1}", "-C",
                             str(REPO_ROOT / "drivers"), "asan"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield make
    finally:
        if make.returncode is None:  # asan_built did not wait for it
            make.communicate()


@pytest.fixture(scope="module")
def asan_built(asan_compiling: subprocess.Popen[str]) -> None:
    output, _ = asan_compiling.communicate()
    assert asan_compiling.returncode == 0, output


def _driver_so(loaded: LoadedStore, threads: int) -> tuple[str, Path]:
    """The driver's dlz clause and the driver (.so) it loads."""
    server = _dlz(loaded.server.name)
    body = server.body(loaded.target, threads)
    return body, server.library_file


def _client_env(loaded: LoadedStore) -> dict[str, str]:
    """The database password named's environment carries to the driver (none in named.conf)."""
    return loaded.loader.database.client_env(loaded.target)


def _asan_clause(loaded: LoadedStore, threads: int) -> str:
    """The driver's dlz clause with its driver replaced by the ASan build of it."""
    so = _dlz(loaded.server.name).library_file
    asan = REPO_ROOT / "build" / "asan" / so.parent.name / so.name
    return _dlz(loaded.server.name).body(loaded.target, threads, library=asan)


# Preloading libasan into a process that then uses libpq deadlocks in glibc's locale locks
# (__libc_setlocale_lock and _nl_state_lock are left with a negative reader count; the next
# writer, here libpq's bindtextdomain, waits forever), with or without our driver:
# `LD_PRELOAD=$(gcc -print-file-name=libasan.so) psql -h /nonexistent` hangs the same way.
ASAN_IMPOSSIBLE = {"pg": "libasan preloaded into a libpq client deadlocks in glibc's locale "
                         "locks (psql hangs the same way); pg is checked under Valgrind"}


@pytest.mark.parametrize("driver", DRIVERS)
def test_asan_build_under_concurrent_queries(fleet: Fleet, asan_built: None,
                                             driver: str) -> None:
    """named loads the ASan build (libasan preloaded); any ASan report fails the test."""
    library = _dlz(driver).library_file.parent.name  # pg+cache's is pg's
    if library in ASAN_IMPOSSIBLE:
        pytest.skip(ASAN_IMPOSSIBLE[library])
    loaded = fleet.stores[driver]
    asan_dir = fleet.run_dir / f"asan-{driver}"
    asan_dir.mkdir(exist_ok=True)
    with Named(fleet.run_dir / f"named-asan-{driver}", _asan_clause(loaded, THREADS),
               threads=THREADS, env={**asan_environment(asan_dir), **_client_env(loaded)}
               ) as named:
        ask_concurrently(named, coverage_queries())
        assert transfer(named, dns.name.from_text("cov.test.")).rcode == "NOERROR"
        log = named.log_path
    reports = sorted(asan_dir.glob("asan*"))
    assert not reports, reports[0].read_text(errors="replace")[:4000]
    assert "AddressSanitizer" not in log.read_text(errors="replace")


# Under Valgrind a driver runs some 20-50x slower, and two runs share the 2 vCPUs: pg's default
# deadline for a connection (1 s) failed its start so on a loaded machine. What Valgrind checks
# does not depend on the deadlines of the drivers that have them (pg, mysql, ldap).
VALGRIND_DEADLINES = {"connect_timeout_ms": "20000", "query_timeout_ms": "20000"}


def _under_valgrind(fleet: Fleet, driver: str) -> str:
    """named with the driver under Valgrind asked a slice of the coverage queries and a
    transfer; Valgrind's report."""
    loaded = fleet.stores[driver]
    body = _dlz(driver).body(loaded.target, 1, extra=VALGRIND_DEADLINES
                             if loaded.loader.database.has_server else None)
    report = fleet.run_dir / f"valgrind-{driver}.log"
    named = Named(fleet.run_dir / f"named-valgrind-{driver}", body,
                  wrapper=valgrind_wrapper(report, [VALGRIND_SUPPRESSIONS]),
                  env=_client_env(loaded))
    with named:
        for qname, rdtype in coverage_queries()[::40]:
            named.query(qname, rdtype, payload=UDP_PAYLOAD, timeout=30)
        assert transfer(named, dns.name.from_text("child.cov.test.")).rcode == "NOERROR"
    return report.read_text(errors="replace")


# Two runs at a time, each a named of its own over the fleet's stores: named under Valgrind is
# one core's work (its start most of it, about 5 s), so on 2 vCPUs two take about one's time;
# the nine in turn took 45 s of the suite.
@pytest.fixture(scope="module")
def valgrind_runs(fleet: Fleet) -> Iterator[dict[str, Future[str]]]:
    """Each driver's run under Valgrind (its report, or what went wrong), two at a time."""
    if not os.path.exists("/usr/bin/valgrind"):
        pytest.skip("valgrind is not installed")
    with ThreadPoolExecutor(2) as pool:
        yield {driver: pool.submit(_under_valgrind, fleet, driver) for driver in DRIVERS}


@pytest.mark.slow
@pytest.mark.parametrize("driver", DRIVERS)
def test_valgrind_finds_nothing_in_the_driver(fleet: Fleet, valgrind_runs: dict[str, Future[str]],
                                              driver: str) -> None:
    log = valgrind_runs[driver].result()
    assert "ERROR SUMMARY" in log
    found = valgrind_errors(log, stack_frames_of(_driver_so(fleet.stores[driver], 1)[1]))
    assert not found, "\n\n".join(found[:3])

