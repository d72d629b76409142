"""The memory DLZ driver (and so the shared C core) against native BIND, answer by answer.

The same data set goes into zone files that named loads itself and into the memory store's
file that named reads through drivers/memory/dlz_memory.so. Both named answer the same
queries, compared by bench.verify (rcode, AA/TC and the three sections as sets of RRs, TTLs
included; truncated answers over TCP). The only differences allowed are BIND's own DLZ-path
differences, bench.verify.bind_classes.BIND_CLASSES, each checked there for its exact shape;
the hand-built zones below make every one of them occur.

Then what only the memory driver can show (one backend fetch per query, a backend outage,
reload), the ASan build under a concurrent query loop, and named under Valgrind.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.name
import dns.query
import dns.rcode
import dns.update
import pytest

from base.paths import REPO_ROOT
from base.update_access import TsigKey
from bench.verify.answers import (
    UDP_PAYLOAD,
    Reply,
    ask,
    compare_answers,
    complete,
    reduce,
    transfer,
)
from bench.verify.bind_classes import BIND_CLASSES, UNSIGNED_PATH_CLASSES, ZoneFacts
from bench.verify.compare import classify, compare_servers
from loaders import native
from loaders.memory import LOADER
from servers import get_server
from servers.dlz import DlzNamed, stack_frames_of
from servers.named import Named, asan_environment, valgrind_errors, valgrind_wrapper
from servers.native import NativeNamed
from servers.update_policy import NamedUpdatePolicy
from tests.benchcli import bench_env
from zonedata.derive import Query
from zonedata.generator import COVERAGE_ORIGIN, coverage_zones, longest_name
from zonedata.model import Zone, empty_nonterminals, make_record

MEMORY = get_server("memory")
NATIVE = get_server("native")
assert isinstance(MEMORY, DlzNamed) and isinstance(NATIVE, NativeNamed)
DRIVER_SO = MEMORY.library_file
ASAN_SO = REPO_ROOT / "build" / "asan" / "memory" / "dlz_memory.so"

# --- the hand-built data set -----------------------------------------------------------------

HAND = dns.name.from_text("dlz.example.")
HAND_CHILD = dns.name.from_text("sub.dlz.example.")
_DS = "12345 8 2 2BB183AF5F22588179A53B0A98631FAD1A292118C9A1E76E39F0DAD7A1D50E93"


def _r(owner: str, ttl: int, rdtype: str, rdata: str, origin: dns.name.Name = HAND):
    return make_record(dns.name.from_text(owner, origin), ttl, rdtype, rdata, origin)


def _raw(labels: list[bytes], origin: dns.name.Name) -> dns.name.Name:
    return dns.name.Name([*labels, *origin.labels])


def hand_zones() -> list[Zone]:
    """Wildcards at three depths, ENTs, delegations with glue, CNAME chains, awkward names."""
    o = HAND
    records = [
        _r("@", 3600, "SOA", "ns1 hostmaster 1 7200 3600 1209600 300"),
        _r("@", 3600, "NS", "ns1"),
        _r("@", 3600, "NS", "ns.elsewhere.example."),
        _r("@", 3600, "MX", "10 mail"),
        _r("@", 3600, "MX", "20 mx.sub"),
        _r("@", 300, "A", "192.0.2.1"),
        _r("ns1", 3600, "A", "192.0.2.53"),
        _r("ns1", 3600, "AAAA", "2001:db8::53"),
        _r("mail", 3600, "A", "192.0.2.25"),
        _r("_25._tcp.mail", 3600, "TLSA", "3 1 1 " + "ab" * 32),
        _r("www", 300, "A", "192.0.2.80"),
        _r("www", 300, "A", "192.0.2.81"),
        _r("alias", 600, "CNAME", "www"),
        _r("chain1", 60, "CNAME", "chain2"),
        _r("chain2", 120, "CNAME", "alias"),
        _r("loop1", 60, "CNAME", "loop2"),
        _r("loop2", 60, "CNAME", "loop1"),
        _r("out", 60, "CNAME", "www.elsewhere.example."),
        _r("to-wild", 60, "CNAME", "host.w"),
        _r("to-child", 60, "CNAME", "www.sub"),
        _r("to-other-zone", 60, "CNAME", "www.cov.test."),
        _r("_http._tcp", 300, "SRV", "0 5 80 www"),
        _r("*", 900, "TXT", '"apex wildcard"'),
        _r("*.w", 300, "A", "192.0.2.100"),
        _r("*.w", 300, "MX", "10 mail"),
        _r("exists.w", 300, "A", "192.0.2.101"),
        _r("sub.exists.w", 300, "TXT", '"below an explicit name under a wildcard"'),
        _r("*.deep.w", 300, "AAAA", "2001:db8::100"),
        _r("*.wc", 300, "CNAME", "www"),
        _r("*.a.b.c", 300, "A", "192.0.2.102"),
        _r("leaf.n.t", 300, "TXT", '"under two ENTs"'),
        _r("deleg", 3600, "NS", "ns.deleg"),
        _r("deleg", 3600, "NS", "ns.elsewhere.example."),
        _r("deleg", 3600, "DS", _DS),
        _r("ns.deleg", 3600, "A", "192.0.2.200"),
        _r("*.deleg", 3600, "TXT", '"occluded wildcard"'),
        _r("sub", 3600, "NS", "ns1.sub"),
        _r("ns1.sub", 3600, "A", "192.0.2.210"),
        _r("dn", 3600, "DNAME", "sub.dlz.example."),
        _r("txt", 60, "TXT", r'"with \"quotes\"" "semi;colon" "tab\009" "back\\slash"'),
        make_record(_raw([b'q"uote'], o), 60, "A", "192.0.2.111"),
        make_record(_raw([b"per%cent"], o), 60, "A", "192.0.2.112"),
        make_record(_raw([b"sl/ash"], o), 60, "A", "192.0.2.113"),
        make_record(_raw([b"nul\x00"], o), 60, "A", "192.0.2.114"),
        make_record(_raw([b"a*b", b"w"], o), 60, "A", "192.0.2.115"),
        make_record(_raw([b"x", b"*", b"w"], o), 60, "A", "192.0.2.116"),
    ]
    c = HAND_CHILD
    child = [
        _r("@", 1800, "SOA", "ns1 hostmaster 7 3600 900 604800 120", c),
        _r("@", 1800, "NS", "ns1", c),
        _r("ns1", 1800, "A", "192.0.2.210", c),
        _r("mx", 1800, "A", "192.0.2.211", c),
        _r("www", 300, "A", "192.0.2.212", c),
        _r("*", 300, "TXT", '"child wildcard"', c),
    ]
    return [Zone(o, records), Zone(c, child)]


def comparison_zones() -> list[Zone]:
    """Hand-built zones and the coverage set, without the root zone (tested on its own)."""
    return hand_zones() + [z for z in coverage_zones() if z.origin != dns.name.root]


def root_zone() -> Zone:
    return next(z for z in coverage_zones() if z.origin == dns.name.root)


# --- queries ---------------------------------------------------------------------------------

COMMON_TYPES = ("A", "AAAA", "TXT", "MX", "NS", "SOA", "CNAME", "DS", "NSEC", "SRV", "ANY",
                "TYPE65534")
DERIVED_TYPES = ("A", "TXT", "MX", "NS", "DS", "SOA", "ANY")
HOSTILE_LABELS = (b'"', b"'", b"%", b"%s%n", b"*", b"/", b"\x00", b"\\", b"a b", b"a.b",
                  b"*.*", b"\xff", b"(", b";", b"@", b"$", b"--", b"' OR '1'='1")


def _fitting(labels: list[bytes], parent: dns.name.Name) -> dns.name.Name | None:
    """labels under parent, or None when that is longer than 255 octets."""
    try:
        return _raw(labels, parent)
    except dns.name.NameTooLong:
        return None


def _mixed_case(name: dns.name.Name) -> dns.name.Name:
    def flip(label: bytes) -> bytes:
        return bytes(c ^ 0x20 if (i % 2 == 0 and 97 <= (c | 0x20) <= 122) else c
                     for i, c in enumerate(label))
    return dns.name.Name([flip(label) for label in name.labels])


def _fill_to_255(labels: list[bytes], origin: dns.name.Name) -> dns.name.Name:
    """labels, then hostile 63-octet labels, under origin: a name of exactly 255 octets."""
    room = 255 - len(_raw(labels, origin).to_wire())
    fill = (b"\x00%*/\"'" * 11)[:63]
    extra: list[bytes] = []
    while room > 64:
        extra.append(fill)
        room -= 64
    if room > 1:
        extra.append(b"z" * (room - 1))
    return _raw([*extra, *labels], origin)


def _skipped(owner: dns.name.Name, origin: dns.name.Name) -> bool:
    """Most of the coverage set's 120 identical bulk hosts add nothing but time."""
    first = owner.labels[0] if owner != origin else b""
    return first.startswith(b"bulk") and first not in (b"bulk001", b"bulk003", b"bulk015")


def _zone_queries(zone: Zone) -> Iterator[tuple[dns.name.Name, str]]:
    types = sorted({r.rdtype for r in zone.records} | set(COMMON_TYPES))
    owners = sorted({r.owner for r in zone.records} | set(empty_nonterminals(zone)))
    for owner in owners:
        if _skipped(owner, zone.origin):
            continue
        for rdtype in types:
            yield owner, rdtype
        below = [([b"nx-below"], owner), ([b"x", b"y"], owner)]
        if owner.labels[0] == b"*":
            below += [([b"match"], owner.parent()), ([b"a", b"b"], owner.parent())]
        names = [_mixed_case(owner), *(_fitting(labels, parent) for labels, parent in below)]
        for name in names:
            if name is not None:
                for rdtype in DERIVED_TYPES:
                    yield name, rdtype
    for label in HOSTILE_LABELS:
        for parent in (zone.origin, _raw([b"w"], zone.origin), _raw([b"c"], zone.origin)):
            yield _raw([label], parent), "A"
            yield _raw([label], parent), "TXT"
    yield _fill_to_255([b"*"], zone.origin), "A"
    yield _fill_to_255([], zone.origin), "TXT"
    yield _fill_to_255([b"x"], _raw([b"w"], zone.origin)), "A"
    yield _fill_to_255([b"q"], _raw([b"exists", b"w"], zone.origin)), "A"


def all_queries(zones: list[Zone]) -> list[tuple[dns.name.Name, str]]:
    seen: dict[tuple[dns.name.Name, str], None] = {}
    for zone in zones:
        for query in _zone_queries(zone):
            seen.setdefault(query)
    seen.setdefault((longest_name(HAND), "TXT"))
    return list(seen)


# --- servers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built() -> None:
    """The release and the ASan build of the memory driver (incremental: fast when current)."""
    done = subprocess.run(["make", "-s", "-C", str(REPO_ROOT / "drivers"),
                           str(DRIVER_SO.relative_to(REPO_ROOT / "drivers")), str(ASAN_SO)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@dataclass
class Pair:
    native: Named
    memory: Named
    memory_target: Path
    zones: list[Zone]


def _memory_body(target: Path, so: Path = DRIVER_SO, connections: int = 2,
                 extra: str = "trace=yes") -> str:
    """While <target>/outage exists the memory backend fails like a database that is down."""
    args = dict(word.split("=", 1) for word in extra.split())
    return MEMORY.body(target, connections, library=so,
                       extra={**args, "outage_file": str(target / "outage")})


@pytest.fixture(scope="module")
def pair(run_dir: Path, built: None) -> Iterator[Pair]:
    zones = comparison_zones()
    with native.LOADER.database.server(run_dir / "native") as native_target, \
            LOADER.database.server(run_dir / "memory-store") as memory_target:
        native.LOADER.load(zones, native_target)
        LOADER.load([*zones, root_zone()], memory_target)
        native_body = NATIVE.body(native_target, run_dir / "named-native")
        with Named(run_dir / "named-native", native_body, threads=2) as native_ns, \
                Named(run_dir / "named-memory", _memory_body(memory_target),
                      threads=2) as memory_ns:
            yield Pair(native_ns, memory_ns, memory_target, zones)


def _log_since(ns: Named, offset: int) -> str:
    time.sleep(0.05)  # named writes its log lines before it sends the answer; be generous
    return ns.log_path.read_text(errors="replace")[offset:]


# --- the comparison --------------------------------------------------------------------------


def test_every_answer_matches_native(pair: Pair) -> None:
    queries = all_queries(pair.zones)
    servers = {"native": pair.native, "memory": pair.memory}
    result = compare_servers(servers, queries, pair.zones, transfers=False)["memory"]
    print(f"\n{result.summary()}")
    assert not result.differences, (
        f"{result.unexplained} of {len(queries)} answers differ from native; first "
        f"ones:\n" + "\n".join(result.differences[:5]))
    # The hand-built zones make every class of unsigned data occur (the root zone is tested on
    # its own; the signed-zone classes in tests/test_signed.py).
    assert set(result.classes) == UNSIGNED_PATH_CLASSES - {"root-zone"}, result.classes
    assert UNSIGNED_PATH_CLASSES <= set(BIND_CLASSES)


def test_over_tcp_too(pair: Pair) -> None:
    for qname, rdtype in [(HAND, "ANY"), (dns.name.from_text("x.y.w", HAND), "A"),
                          (dns.name.from_text("nx", HAND), "A")]:
        native_answer = reduce(pair.native.query(qname, rdtype, tcp=True, payload=UDP_PAYLOAD))
        memory_answer = reduce(pair.memory.query(qname, rdtype, tcp=True, payload=UDP_PAYLOAD))
        assert memory_answer == native_answer


def _reply_without_edns(named: Named, query: Query) -> Reply:
    """What a client without EDNS gets: at most 512 octets over UDP, then TCP if truncated."""
    udp = reduce(named.query(*query))
    return udp, (reduce(named.query(*query, tcp=True), tcp=True) if udp.tc else None)


def test_truncation_is_compared_over_tcp(pair: Pair) -> None:
    """Native BIND 9.18 renders the owner as its zone spells it and compresses case-sensitively,
    so a mixed-case query for a 255-octet name overflows 512 octets (TC=1, empty sections)
    where the DLZ answer, rendered with the query's spelling, fits: a size artifact, not a
    difference. BIND 9.20's native answer fits in 512 octets without TC by leaving out an
    additional-section RR (optional data) that the DLZ answer has room for. A truncation that
    the size does not explain still is one."""
    name = longest_name(dns.name.from_text("cov.test."))
    query: Query = (dns.name.Name([label.upper() for label in name.labels[:2]]
                                  + list(name.labels[2:])), "TXT")
    native_reply = _reply_without_edns(pair.native, query)
    memory_reply = _reply_without_edns(pair.memory, query)
    assert not memory_reply[0].tc and memory_reply[0].answer
    if pair.native.bind.version == "9.18":
        assert native_reply[0].tc and not native_reply[0].answer
        assert compare_answers(query, native_reply, memory_reply) is None
    else:
        native_answer, memory_answer = complete(native_reply), complete(memory_reply)
        assert not native_answer.tc
        assert native_answer.answer == memory_answer.answer
        assert native_answer.authority == memory_answer.authority
        assert native_answer.additional < memory_answer.additional
    full = complete(memory_reply)
    cut = dataclasses.replace(full, tc=True, answer=frozenset(), authority=frozenset(),
                              additional=frozenset())
    assert compare_answers(query, (full, None), (cut, full)) == (full, cut)


def test_zone_transfers_match_native(pair: Pair) -> None:
    for zone in pair.zones:
        memory_rrs = transfer(pair.memory, zone.origin)
        assert memory_rrs.rcode == "NOERROR"
        assert memory_rrs == transfer(pair.native, zone.origin), f"AXFR of {zone.origin} differs"


def test_zone_transfer_refused_outside_the_acl(pair: Pair) -> None:
    assert transfer(pair.memory, HAND, source="127.0.0.2").rcode == "REFUSED"


def test_root_zone_is_never_asked(run_dir: Path, pair: Pair, built: None) -> None:
    """The memory store holds the root zone, yet BIND never asks a DLZ driver for it."""
    root = root_zone()
    facts = ZoneFacts.of([root])
    with native.LOADER.database.server(run_dir / "native-root") as target:
        native.LOADER.load([root], target)
        body = NATIVE.body(target, run_dir / "named-native-root")
        with Named(run_dir / "named-native-root", body) as native_root:
            offset = len(pair.memory.log_path.read_text(errors="replace"))
            counts: Counter[str] = Counter()
            for owner in sorted({r.owner for r in root.records}):
                query: Query = (owner, "ANY")
                native_reply = ask(native_root, query)
                native_answer = complete(native_reply)
                assert native_answer.rcode == "NOERROR"
                assert native_answer.answer or native_answer.authority
                diff = compare_answers(query, native_reply, ask(pair.memory, query))
                assert diff is not None and classify(query, *diff, facts) == "root-zone", diff
                counts["root-zone"] += 1
            print(f"\nroot zone: {dict(counts)}")
    assert "findzonedb . " not in _log_since(pair.memory, offset)


def _fetches_for(pair: Pair, qname: dns.name.Name, rdtype: str) -> list[str]:
    offset = len(pair.memory.log_path.read_text(errors="replace"))
    pair.memory.query(qname, rdtype, payload=UDP_PAYLOAD)
    return re.findall(r"dlz_memory: fetch (\S+)", _log_since(pair.memory, offset))


@pytest.mark.parametrize("name, rdtype", [
    ("nx", "A"),                # NXDOMAIN
    ("q.exists.w", "A"),        # NXDOMAIN below an explicit name under a wildcard
    ("x.y.w", "TXT"),           # wildcard, no such type
    ("leaf.n.t", "A"),          # NODATA
    ("n.t", "TXT"),             # empty non-terminal
    ("x.y.z.a.b.c", "AAAA"),    # deep wildcard, no such type
])
def test_one_fetch_per_query(pair: Pair, name: str, rdtype: str) -> None:
    """Queries whose answer needs no other name cost exactly one backend round trip."""
    qname = dns.name.from_text(name, HAND)
    assert _fetches_for(pair, qname, rdtype) == [qname.to_text(omit_final_dot=True)]


def test_unknown_argument_stops_named(run_dir: Path, pair: Pair) -> None:
    body = _memory_body(pair.memory_target, extra="bogus=1")
    ns = Named(run_dir / "named-bad-arg", body)
    with pytest.raises(Exception, match="named"):
        with ns:
            pass
    assert "unknown argument 'bogus'" in ns.log_path.read_text(errors="replace")


def test_backend_outage_answers_servfail_then_recovers(pair: Pair) -> None:
    """A failing backend gives SERVFAIL (no crash, no hang); its return needs no restart."""
    outage = pair.memory_target / "outage"
    www = dns.name.from_text("www", HAND)
    outage.touch()
    time.sleep(0.2)  # memos of earlier queries expire (memo_ms=100): no answer from them
    try:
        for qname, rdtype in [(www, "A"), (HAND, "MX"), (dns.name.from_text("x.y.w", HAND), "A")]:
            assert pair.memory.query(qname, rdtype).rcode() == dns.rcode.SERVFAIL
        assert transfer(pair.memory, HAND).rcode != "NOERROR"
    finally:
        outage.unlink()
    assert compare_answers((www, "A"), ask(pair.native, (www, "A")),
                           ask(pair.memory, (www, "A"))) is None
    assert transfer(pair.memory, HAND) == transfer(pair.native, HAND)


def test_rndc_reload_rereads_the_data_file(run_dir: Path, pair: Pair) -> None:
    """An updated store reaches named through `rndc reload` (a new dlz_create)."""
    zone = hand_zones()[1]
    added = make_record(dns.name.from_text("added", zone.origin), 77, "TXT", '"after reload"')
    with LOADER.database.server(run_dir / "memory-reload") as target:
        LOADER.load(hand_zones(), target)
        with Named(run_dir / "named-reload", _memory_body(target, extra="")) as ns:
            # Before: the child zone's wildcard answers (TTL 300); after: the new record.
            assert ns.query(added.owner, "TXT").answer[0].ttl == 300
            LOADER.update(Zone(zone.origin, [*zone.records, added]), target)
            ns.reload()
            deadline = time.monotonic() + 30
            while ns.query(added.owner, "TXT").answer[0].ttl != 77:
                assert time.monotonic() < deadline, "reload did not show the update"
                time.sleep(0.1)


# --- memory safety ---------------------------------------------------------------------------


def _hammer(named: Named, queries: list[Query], workers: int = 4) -> None:
    """The queries spread over concurrent clients, so named's threads run the driver at once."""
    errors: list[BaseException] = []

    def work(part: list[Query]) -> None:
        try:
            for qname, rdtype in part:
                named.query(qname, rdtype, payload=UDP_PAYLOAD, timeout=10)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(queries[i::workers],))
               for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_asan_build_under_concurrent_queries(run_dir: Path, pair: Pair) -> None:
    """named (not instrumented) loads the ASan build with libasan preloaded; every ASan
    report fails the test."""
    asan_dir = run_dir / "asan"
    asan_dir.mkdir(exist_ok=True)
    body = _memory_body(pair.memory_target, so=ASAN_SO, connections=2, extra="memo_ms=50")
    queries = all_queries(pair.zones)[::3]
    outage = pair.memory_target / "outage"
    with Named(run_dir / "named-asan", body, threads=2, env=asan_environment(asan_dir)) as ns:
        _hammer(ns, queries)
        assert transfer(ns, HAND).rcode == "NOERROR"
        outage.touch()  # the failure paths too
        try:
            _hammer(ns, queries[:200])
        finally:
            outage.unlink()
        _hammer(ns, queries[:200])
        ns.reload()  # dlz_destroy and dlz_create while named runs
        _hammer(ns, queries[:400])
        log = ns.log_path
    reports = sorted(asan_dir.glob("asan*"))
    text = log.read_text(errors="replace")
    assert not reports, reports[0].read_text(errors="replace")[:4000]
    assert "AddressSanitizer" not in text
    assert "dlz_memory: dlz \"memory\" ready" in text


RACE_NAMES = [dns.name.from_text(f"race{i}", COVERAGE_ORIGIN) for i in range(8)]


def _race_update(i: int, key: TsigKey, state: dict[dns.name.Name, set[str]]
                 ) -> dns.update.UpdateMessage:
    """Update i of the race (a name added to, changed, or deleted by turns), and its effect
    on state (each name's A rdata)."""
    message = dns.update.UpdateMessage(COVERAGE_ORIGIN, keyring=key.keyring(),
                                       keyname=dns.name.from_text(key.name))
    name = RACE_NAMES[i % len(RACE_NAMES)]
    if i % 3 == 0:
        message.add(name, 300, "A", f"192.0.2.{i % 250}")
        state[name] = state.get(name, set()) | {f"192.0.2.{i % 250}"}
    elif i % 3 == 1:
        message.replace(name, 300, "A", f"198.51.100.{i % 250}")
        state[name] = {f"198.51.100.{i % 250}"}
    else:
        message.delete(name)
        state[name] = set()
    return message


def test_asan_build_reads_while_updates_commit(run_dir: Path, built: None) -> None:
    """named -n 4 reads the overlay of updated owners on every thread while updates commit
    into it (drivers/memory/mem_overlay.c): every update goes through, the names end as the
    updates left them, and no ASan report."""
    asan_dir = run_dir / "asan-updates"
    asan_dir.mkdir(exist_ok=True)
    key = TsigKey.generate("dlzbench-race")
    policy = NamedUpdatePolicy((COVERAGE_ORIGIN,), key)
    queries = [(name, "A") for name in RACE_NAMES] * 40 + [(COVERAGE_ORIGIN, "SOA")] * 40
    state: dict[dns.name.Name, set[str]] = {}
    with LOADER.database.server(run_dir / "memory-updates") as target:
        LOADER.load(coverage_zones(), target)
        body = policy.key_statements() + MEMORY.body(target, 4, library=ASAN_SO,
                                                     extra=policy.dlz_args())
        with Named(run_dir / "named-asan-updates", body, threads=4,
                   env=asan_environment(asan_dir)) as ns:
            readers = threading.Thread(target=_hammer, args=(ns, queries))
            readers.start()
            try:
                rcodes = {dns.rcode.to_text(dns.query.tcp(_race_update(i, key, state), ns.host,
                                                          port=ns.port, timeout=10).rcode())
                          for i in range(60)}
            finally:
                readers.join()
            final = {name: {rr.to_text() for rrset in ns.query(name, "A").answer
                            for rr in rrset} for name in RACE_NAMES}
            log = ns.log_path
    assert rcodes == {"NOERROR"}
    assert final == {name: state.get(name, set()) for name in RACE_NAMES}
    reports = sorted(asan_dir.glob("asan*"))
    assert not reports, reports[0].read_text(errors="replace")[:4000]
    assert "AddressSanitizer" not in log.read_text(errors="replace")


_OUR_CODE = stack_frames_of(DRIVER_SO)


@pytest.mark.slow
def test_valgrind_finds_nothing_in_the_driver(run_dir: Path, pair: Pair) -> None:
    if not os.path.exists("/usr/bin/valgrind"):
        pytest.skip("valgrind is not installed")
    body = _memory_body(pair.memory_target, connections=1, extra="")
    queries = all_queries(pair.zones)[::40]
    report = run_dir / "named-valgrind" / "valgrind.log"
    ns = Named(run_dir / "named-valgrind", body, wrapper=valgrind_wrapper(report))
    with ns:
        for qname, rdtype in queries:
            ns.query(qname, rdtype, payload=UDP_PAYLOAD, timeout=30)
        assert transfer(ns, HAND_CHILD).rcode == "NOERROR"
    log = report.read_text(errors="replace")
    assert "ERROR SUMMARY" in log
    found = valgrind_errors(log, _OUR_CODE)
    assert not found, "\n\n".join(found[:3])


def _verify(run_root: Path, *drivers: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", "verify", "--generate", "5",
                           "--servers", ",".join(drivers)], cwd=REPO_ROOT,
                          env=bench_env(run_root), capture_output=True, text=True,
                          timeout=600, check=False)


def test_verify_of_the_memory_driver_alone_compares_it_with_native(run_root: Path) -> None:
    done = _verify(run_root, "memory")
    assert done.returncode == 0, done.stderr[-2000:]
    judged = re.search(r"^memory: (\d+)/(\d+) identical", done.stdout, re.M)
    assert judged and int(judged[2]) > 0, done.stdout


def test_verify_of_native_alone_is_one_error_line(run_root: Path) -> None:
    done = _verify(run_root, "native")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: verify compares servers with native: --servers names no other"]
