"""The memory DLZ driver (and so the shared C core) against native BIND, answer by answer.

The same data set goes into zone files that named loads itself and into the memory store's
file that named reads through drivers/memory/dlz_memory.so. Both named answer the same
queries; rcode, AA/TC and the three sections (as sets of RRs, TTLs included) must be equal.
The only differences allowed are BIND's own DLZ-path differences (lib/dns/sdlz.c and
lib/ns/query.c, not the driver), each a named class that is counted and checked for its
exact shape:

  ds-parent-side     DS (or NSEC) at a delegation point: sdlz's find() stops at the NS and
                     gives the referral, and for a child zone the store also hosts, query.c
                     asks DLZ for the deepest zone (no DNS_GETDB_NOEXACT step to the parent):
                     the child's own NODATA. Native answers from the parent side.
  soa-nxdomain-ttl   NXDOMAIN to an SOA query: native zeroes the authority SOA's TTL
                     (zero-no-soa-ttl is a zone option; a DLZ answer has no dns_zone_t).
  any-at-ent         ANY at an empty non-terminal: sdlz's find() returns success for a node
                     without rdatasets when the type is ANY, and query.c answers SERVFAIL when
                     an ANY answer finds no rdataset; native answers NODATA.
  any-at-delegation  ANY at a delegation point: sdlz's find() returns DNS_R_ZONECUT and the NS
                     RRset lands in the answer section; native gives the referral.
  nsec-at-cname      NSEC at a CNAME owner: sdlz's find() follows the CNAME for every type but
                     CNAME; native's database lets NSEC coexist with CNAME (NODATA).
  cross-zone-chain   a CNAME/DNAME whose target is in another zone of the store: native stops
                     (query_validatezonedb: "limits our searching to the zone where the first
                     name was looked for"), which query.c skips for DLZ databases, so DLZ
                     follows the chain into the other zone.
  root-zone          names in the root zone: BIND never asks a DLZ driver for the root zone.

Then the ASan build under a concurrent query loop, and named under Valgrind.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

from bench.servers.named import NAMED, Named
from bench.servers.process import REPO_ROOT, ManagedProcess
from loaders import native
from loaders.generator import coverage_zones, longest_name
from loaders.memory import DRIVER_SO, STORE, data_file, dlz_clause_for
from loaders.model import Zone, empty_nonterminals, make_record

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


def ask(port: int, qname: dns.name.Name, rdtype: str, *, tcp: bool = False,
        source: str | None = None) -> dns.message.Message:
    query = dns.message.make_query(qname, rdtype, use_edns=0, payload=4096)
    query.flags &= ~dns.flags.RD
    send = dns.query.tcp if tcp else dns.query.udp
    return send(query, "127.0.0.1", port=port, timeout=10, source=source)


# --- comparing answers -----------------------------------------------------------------------

Rr = tuple[str, int, str, str]


def _rrs(section: list[dns.rrset.RRset], zero_soa_ttl: bool = False) -> frozenset[Rr]:
    out = set()
    for rrset in section:
        ttl = 0 if zero_soa_ttl and rrset.rdtype == dns.rdatatype.SOA else rrset.ttl
        for rd in rrset:
            out.add((rrset.name.to_text().lower(), ttl, dns.rdatatype.to_text(rrset.rdtype),
                     rd.to_text()))
    return frozenset(out)


@dataclass(frozen=True)
class View:
    """What is compared of a response."""

    rcode: str
    aa: bool
    tc: bool
    answer: frozenset[Rr]
    authority: frozenset[Rr]
    additional: frozenset[Rr]

    @classmethod
    def of(cls, msg: dns.message.Message, zero_soa_ttl: bool = False) -> View:
        return cls(dns.rcode.to_text(msg.rcode()), bool(msg.flags & dns.flags.AA),
                   bool(msg.flags & dns.flags.TC), _rrs(msg.answer),
                   _rrs(msg.authority, zero_soa_ttl), _rrs(msg.additional))


def _is_referral(view: View, qname: dns.name.Name) -> bool:
    owner = qname.to_text().lower()
    return (view.rcode == "NOERROR" and not view.aa and not view.answer
            and bool(view.authority)
            and all(rr[0] == owner and rr[2] in ("NS", "DS") for rr in view.authority))


@dataclass(frozen=True)
class DataFacts:
    """What the classes of known differences need to know about the data set."""

    origins: frozenset[dns.name.Name]
    delegations: frozenset[dns.name.Name]
    ents: frozenset[dns.name.Name]
    cnames: frozenset[dns.name.Name]

    @classmethod
    def of(cls, zones: list[Zone]) -> DataFacts:
        def owners(rdtype: str) -> frozenset[dns.name.Name]:
            return frozenset(r.owner for z in zones for r in z.records
                             if r.rdtype == rdtype and r.owner != z.origin)
        return cls(frozenset(z.origin for z in zones), owners("NS"),
                   frozenset(n for z in zones for n in empty_nonterminals(z)), owners("CNAME"))

    def zone_of(self, name: dns.name.Name) -> dns.name.Name | None:
        while name not in self.origins:
            if name == dns.name.root:
                return None
            name = name.parent()
        return name


def _is_servfail(view: View) -> bool:
    return (view.rcode == "SERVFAIL" and not view.aa and not view.answer and not view.authority
            and not view.additional)


def _is_child_nodata(view: View, qname: dns.name.Name) -> bool:
    owner = qname.to_text().lower()
    return (view.rcode == "NOERROR" and view.aa and not view.answer
            and all(rr[0] == owner and rr[2] == "SOA" for rr in view.authority))


def _owners(rrs: frozenset[Rr]) -> set[dns.name.Name]:
    return {dns.name.from_text(rr[0]) for rr in rrs}


def _cname_targets(msg: dns.message.Message) -> set[dns.name.Name]:
    """Targets of the CNAMEs in the answer that the answer does not itself continue."""
    owners = {rrset.name for rrset in msg.answer}
    return {rd.target for rrset in msg.answer if rrset.rdtype == dns.rdatatype.CNAME
            for rd in rrset if rd.target not in owners}


def _left_the_zone(qname: dns.name.Name, native_msg: dns.message.Message, dlz: View,
                   facts: DataFacts) -> bool:
    """Native stopped at a CNAME into another zone; DLZ only added that zone's records."""
    native_view = View.of(native_msg)
    targets = _cname_targets(native_msg)
    if len(targets) != 1 or not native_view.answer <= dlz.answer:
        return False
    target_zone = facts.zone_of(next(iter(targets)))
    if target_zone is None or target_zone == facts.zone_of(qname):
        return False
    extra = ((dlz.answer - native_view.answer) | (dlz.authority - native_view.authority)
             | (dlz.additional - native_view.additional))
    return (dlz.aa == native_view.aa and dlz.rcode in (native_view.rcode, "NXDOMAIN")
            and all(o.is_subdomain(target_zone) for o in _owners(extra)))


def known_difference(qname: dns.name.Name, rdtype: str, native_msg: dns.message.Message,
                     dlz_msg: dns.message.Message, facts: DataFacts) -> str | None:
    """The allowed class a difference falls in, checked for its exact shape; None if none."""
    dlz, native_view = View.of(dlz_msg), View.of(native_msg)
    name = qname.canonicalize()
    if rdtype in ("DS", "NSEC") and name in facts.delegations and (
            _is_referral(dlz, qname) or (name in facts.origins and _is_child_nodata(dlz, qname))):
        return "ds-parent-side"
    if (rdtype == "SOA" and native_view.rcode == "NXDOMAIN"
            and View.of(native_msg, zero_soa_ttl=True) == View.of(dlz_msg, zero_soa_ttl=True)
            and all(r.ttl == 0 for r in native_msg.authority
                    if r.rdtype == dns.rdatatype.SOA)):
        return "soa-nxdomain-ttl"
    if rdtype == "ANY" and name in facts.ents and _is_servfail(dlz):
        return "any-at-ent"
    if (rdtype == "ANY" and name in facts.delegations and _is_referral(native_view, qname)
            and not dlz.aa and not dlz.authority
            and dlz.answer == {rr for rr in native_view.authority if rr[2] == "NS"}):
        return "any-at-delegation"
    if (rdtype == "NSEC" and name in facts.cnames and not native_view.answer
            and {rr[2] for rr in dlz.answer if rr[0] == qname.to_text().lower()} == {"CNAME"}):
        return "nsec-at-cname"
    if _left_the_zone(qname, native_msg, dlz, facts):
        return "cross-zone-chain"
    return None


def compare(native_port: int, dlz_port: int, queries: list[tuple[dns.name.Name, str]],
            zones: list[Zone]) -> tuple[Counter[str], list[str]]:
    facts = DataFacts.of(zones)
    counts: Counter[str] = Counter()
    problems: list[str] = []
    for qname, rdtype in queries:
        native_msg, dlz_msg = ask(native_port, qname, rdtype), ask(dlz_port, qname, rdtype)
        counts["queries"] += 1
        if View.of(native_msg) == View.of(dlz_msg):
            continue
        kind = known_difference(qname, rdtype, native_msg, dlz_msg, facts)
        if kind is not None:
            counts[kind] += 1
            continue
        problems.append(f"{qname} {rdtype}\n--- native:\n{native_msg}\n--- memory driver:\n"
                        f"{dlz_msg}")
    return counts, problems


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
    outage = f"outage_file={target / 'outage'}"
    return dlz_clause_for(so, data_file(target), connections, f"{extra} {outage}".strip())


@pytest.fixture(scope="module")
def pair(run_dir: Path, built: None) -> Iterator[Pair]:
    zones = comparison_zones()
    with native.STORE.server(run_dir / "native") as native_target, \
            STORE.server(run_dir / "memory-store") as memory_target:
        native.STORE.load(zones, native_target)
        STORE.load([*zones, root_zone()], memory_target)
        native_body = native.STORE.dlz_clause("native", native_target, 2, 1)
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
    counts, problems = compare(pair.native.port, pair.memory.port, queries, pair.zones)
    print(f"\nmemory driver vs native: {dict(counts)}")
    assert not problems, (f"{len(problems)} of {len(queries)} answers differ from native; "
                          f"first ones:\n" + "\n".join(problems[:5]))


def test_over_tcp_too(pair: Pair) -> None:
    for qname, rdtype in [(HAND, "ANY"), (dns.name.from_text("x.y.w", HAND), "A"),
                          (dns.name.from_text("nx", HAND), "A")]:
        native_msg = ask(pair.native.port, qname, rdtype, tcp=True)
        assert View.of(ask(pair.memory.port, qname, rdtype, tcp=True)) == View.of(native_msg)


def _axfr(port: int, zone: dns.name.Name, source: str = "127.0.0.1") -> frozenset[Rr]:
    rrs: set[Rr] = set()
    for msg in dns.query.xfr("127.0.0.1", zone, port=port, timeout=20, source=source,
                             relativize=False):
        rrs |= _rrs(msg.answer)
    return frozenset(rrs)


def test_zone_transfers_match_native(pair: Pair) -> None:
    for zone in pair.zones:
        assert _axfr(pair.memory.port, zone.origin) == _axfr(pair.native.port, zone.origin), \
            f"AXFR of {zone.origin} differs"


def test_zone_transfer_refused_outside_the_acl(pair: Pair) -> None:
    with pytest.raises(dns.query.TransferError) as refused:
        _axfr(pair.memory.port, HAND, source="127.0.0.2")
    assert refused.value.rcode == dns.rcode.REFUSED


def test_root_zone_is_never_asked(run_dir: Path, pair: Pair, built: None) -> None:
    """The memory store holds the root zone, yet BIND never asks a DLZ driver for it."""
    root = root_zone()
    with native.STORE.server(run_dir / "native-root") as target:
        native.STORE.load([root], target)
        body = native.STORE.dlz_clause("native", target, 1, 1)
        with Named(run_dir / "named-native-root", body) as native_root:
            offset = len(pair.memory.log_path.read_text(errors="replace"))
            counts: Counter[str] = Counter()
            for owner in sorted({r.owner for r in root.records}):
                native_view = View.of(ask(native_root.port, owner, "ANY"))
                dlz_view = View.of(ask(pair.memory.port, owner, "ANY"))
                assert native_view.rcode == "NOERROR"
                assert native_view.answer or native_view.authority
                assert dlz_view.rcode == "REFUSED", f"{owner}: {dlz_view}"
                counts["root-zone"] += 1
            print(f"\nroot zone: {dict(counts)}")
    assert "findzonedb . " not in _log_since(pair.memory, offset)


def _fetches_for(pair: Pair, qname: dns.name.Name, rdtype: str) -> list[str]:
    offset = len(pair.memory.log_path.read_text(errors="replace"))
    ask(pair.memory.port, qname, rdtype)
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
            assert ask(pair.memory.port, qname, rdtype).rcode() == dns.rcode.SERVFAIL
        with pytest.raises(dns.exception.DNSException):
            _axfr(pair.memory.port, HAND)
    finally:
        outage.unlink()
    assert View.of(ask(pair.memory.port, www, "A")) == View.of(ask(pair.native.port, www, "A"))
    assert _axfr(pair.memory.port, HAND) == _axfr(pair.native.port, HAND)


def test_rndc_reload_rereads_the_data_file(run_dir: Path, pair: Pair) -> None:
    """An updated store reaches named through `rndc reload` (a new dlz_create)."""
    zone = hand_zones()[1]
    added = make_record(dns.name.from_text("added", zone.origin), 77, "TXT", '"after reload"')
    with STORE.server(run_dir / "memory-reload") as target:
        STORE.load(hand_zones(), target)
        with Named(run_dir / "named-reload", _memory_body(target, extra="")) as ns:
            # Before: the child zone's wildcard answers (TTL 300); after: the new record.
            assert ask(ns.port, added.owner, "TXT").answer[0].ttl == 300
            STORE.update(Zone(zone.origin, [*zone.records, added]), target)
            ns.reload()
            deadline = time.monotonic() + 30
            while ask(ns.port, added.owner, "TXT").answer[0].ttl != 77:
                assert time.monotonic() < deadline, "reload did not show the update"
                time.sleep(0.1)


# --- memory safety ---------------------------------------------------------------------------


def _hammer(port: int, queries: list[tuple[dns.name.Name, str]], workers: int = 4) -> None:
    """The queries spread over concurrent clients, so named's threads run the driver at once."""
    errors: list[BaseException] = []

    def work(part: list[tuple[dns.name.Name, str]]) -> None:
        try:
            for qname, rdtype in part:
                ask(port, qname, rdtype)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(queries[i::workers],))
               for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_asan_build_under_concurrent_queries(run_dir: Path, pair: Pair,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """named (not instrumented) loads the ASan build with libasan preloaded; named's own
    leaks at exit are not ours, so LeakSanitizer is off; every other report fails the test."""
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                             text=True, check=True).stdout.strip()
    asan_dir = run_dir / "asan"
    asan_dir.mkdir(exist_ok=True)
    monkeypatch.setenv("LD_PRELOAD", libasan)
    monkeypatch.setenv("ASAN_OPTIONS", f"detect_leaks=0:abort_on_error=0:log_path={asan_dir}/asan")
    body = _memory_body(pair.memory_target, so=ASAN_SO, connections=2, extra="memo_ms=50")
    queries = all_queries(pair.zones)[::3]
    outage = pair.memory_target / "outage"
    with Named(run_dir / "named-asan", body, threads=2) as ns:
        _hammer(ns.port, queries)
        assert _axfr(ns.port, HAND)
        outage.touch()  # the failure paths too
        try:
            _hammer(ns.port, queries[:200])
        finally:
            outage.unlink()
        _hammer(ns.port, queries[:200])
        ns.reload()  # dlz_destroy and dlz_create while named runs
        _hammer(ns.port, queries[:400])
        log = ns.log_path
    reports = sorted(asan_dir.glob("asan*"))
    text = log.read_text(errors="replace")
    assert not reports, reports[0].read_text(errors="replace")[:4000]
    assert "AddressSanitizer" not in text
    assert "dlz_memory: dlz \"memory\" ready" in text


class ValgrindNamed(Named):
    """named under Valgrind memcheck: slow, so one thread and long time-outs."""

    def __init__(self, run_dir: Path, body: str) -> None:
        super().__init__(run_dir, body, threads=1)
        self.valgrind_log = self.run_dir / "valgrind.log"

    def start(self) -> None:
        argv = ["valgrind", "--tool=memcheck", "--num-callers=40", "--keep-debuginfo=yes",
                "--leak-check=full", "--show-leak-kinds=definite",
                f"--log-file={self.valgrind_log}",
                NAMED, "-f", "-n", "1", "-c", str(self.conf_path), "-L", str(self.log_path)]
        self._proc = ManagedProcess("named under valgrind", argv, self.log_path,
                                    cwd=self.run_dir)
        self._proc.start()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.stop(timeout=180)


_OUR_CODE = re.compile(r"dlz_memory\.so|drivers/(common|memory)/|[(/](core|pool|rowset|args|"
                       r"emit|log|names|dlz_memory)\.c:")


def _valgrind_errors_in_our_code(log: str) -> list[str]:
    """Valgrind reports (blank-line separated) whose stack passes through our code."""
    blocks = re.split(r"\n==\d+== \n", log)
    return [b for b in blocks if _OUR_CODE.search(b) and re.search(
        r"Invalid (read|write|free)|uninitialised|Mismatched|definitely lost|overlap", b)]


@pytest.mark.slow
def test_valgrind_finds_nothing_in_the_driver(run_dir: Path, pair: Pair) -> None:
    if not os.path.exists("/usr/bin/valgrind"):
        pytest.skip("valgrind is not installed")
    body = _memory_body(pair.memory_target, connections=1, extra="")
    queries = all_queries(pair.zones)[::40]
    ns = ValgrindNamed(run_dir / "named-valgrind", body)
    with ns:
        for qname, rdtype in queries:
            ask(ns.port, qname, rdtype)
        assert _axfr(ns.port, HAND_CHILD)
    log = ns.valgrind_log.read_text(errors="replace")
    assert "ERROR SUMMARY" in log
    found = _valgrind_errors_in_our_code(log)
    assert not found, "\n\n".join(found[:3])
