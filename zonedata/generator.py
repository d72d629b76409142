"""Synthetic zone data: the coverage set, the scalable generator and the shape of Appendix B of
seed 000 (Principled Technologies' BIND/dnsperf report, ../shared/seeds/000_33657d98ece48af8.txt).

Everything here is deterministic for a seed and builds records through `model.make_record`, so
every record has been parsed (validated) by dnspython and is in the model's canonical text.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping

import dns.name

from zonedata.model import Record, Zone, make_record

# Share of non-apex "slots" per kind in `generate`; a slot yields one to three records.
DEFAULT_MIX: dict[str, float] = {
    "a": 0.30, "aaaa": 0.10, "mx": 0.05, "txt": 0.12, "cname": 0.10, "ptr": 0.03,
    "srv": 0.06, "wildcard": 0.06, "delegation": 0.06, "ent": 0.12,
}

_TTLS = (300, 3600, 86400)
_SOA_TIMERS = "3600 900 604800 300"
_DS_DIGEST = "2BB183AF5F22588179A53B0A98631FAD1A292118C9A1E76E39F0DAD7A1D50E93"
_SSHFP_DIGEST = "123456789ABCDEF67890123456789ABCDEF67890"


def _name(origin: dns.name.Name, *labels: bytes | str) -> dns.name.Name:
    """`labels` (leftmost first, raw octets, no escaping) prepended to origin."""
    raw = [label.encode() if isinstance(label, str) else label for label in labels]
    return dns.name.Name([*raw, *origin.labels])


def _rel(origin: dns.name.Name, text: str) -> dns.name.Name:
    """A name written in presentation form relative to origin ('@' is the origin)."""
    return dns.name.from_text(text, origin)


def _apex(origin: dns.name.Name, serial: int, ns: list[dns.name.Name],
          ttl: int = 3600) -> list[Record]:
    """SOA and NS RRset at the apex; the SOA names the first name server."""
    soa = f"{ns[0]} {_rel(origin, 'hostmaster')} {serial} {_SOA_TIMERS}"
    return [make_record(origin, ttl, "SOA", soa),
            *(make_record(origin, ttl, "NS", str(target)) for target in ns)]


# --- the coverage set ----------------------------------------------------------------------

COVERAGE_ORIGIN = dns.name.from_text("cov.test.")
CHILD_ORIGIN = dns.name.from_text("child.cov.test.")
AWKWARD_ORIGIN = dns.name.Name([b"we.ird\"zone's\\x", b"test", b""])
REVERSE_ORIGIN = dns.name.from_text("2.0.192.in-addr.arpa.")

# Labels (raw octets) every store, driver and file format must carry unchanged.
AWKWARD_LABELS: tuple[bytes, ...] = (
    b"a.b", b"sl/ash", b"..", b"sp ace", b'q"uote', b"q'uote", b"per%cent", b"a*b",
    b"nul\x00byte", b"\xff\x7f", b"'; DROP TABLE records; --", b"back\\slash", b"@", b"$",
    b"(", b";", b")paren", b"x" * 63,
)


def coverage_zones(seed: int = 1) -> list[Zone]:
    """A few small zones covering every record type and every awkward name the suite supports."""
    serial = 2024010100 + seed
    return [
        Zone(COVERAGE_ORIGIN, _coverage_main(COVERAGE_ORIGIN, serial)),
        Zone(CHILD_ORIGIN, _coverage_child(CHILD_ORIGIN, serial)),
        Zone(AWKWARD_ORIGIN, _coverage_awkward_zone(AWKWARD_ORIGIN, serial)),
        Zone(REVERSE_ORIGIN, _coverage_reverse(REVERSE_ORIGIN, serial)),
        Zone(dns.name.root, _coverage_root(serial)),
    ]


def _coverage_main(o: dns.name.Name, serial: int) -> list[Record]:
    return [
        *_apex(o, serial, [_rel(o, "ns1"), _rel(o, "ns2")]),
        *_coverage_apex_extras(o),
        *_coverage_hosts(o),
        *_coverage_aliases(o),
        *_coverage_other_types(o),
        *_coverage_delegations(o),
        *_coverage_wildcards_and_ents(o),
        *_coverage_awkward_owners(o),
        *_coverage_bulk(o),
    ]


def _coverage_apex_extras(o: dns.name.Name) -> list[Record]:
    return [
        make_record(o, 3600, "MX", f"10 {_rel(o, 'mail')}"),
        make_record(o, 3600, "MX", f"20 {_rel(o, 'Mail2')}"),
        make_record(o, 600, "TXT", '"v=spf1 -all"'),
        make_record(o, 600, "TXT", r'"one" "two \"quoted\"" "semi;colon" "back\\slash"'
                                   r' "\000\255\127binary" "it' "'" r's" "(paren)" "$ @"'),
        make_record(o, 3600, "CAA", '0 issue "ca.example.net"'),
        make_record(o, 300, "A", "192.0.2.1"),
        make_record(o, 300, "AAAA", "2001:db8::1"),
    ]


def _coverage_hosts(o: dns.name.Name) -> list[Record]:
    """Address records, with differing TTLs between owners of the same type."""
    return [
        make_record(_rel(o, "ns1"), 86400, "A", "192.0.2.53"),
        make_record(_rel(o, "ns2"), 86400, "A", "192.0.2.54"),
        make_record(_rel(o, "ns2"), 86400, "AAAA", "2001:db8::54"),
        make_record(_rel(o, "mail"), 3600, "A", "192.0.2.25"),
        make_record(_rel(o, "Mail2"), 7200, "A", "192.0.2.26"),
        make_record(_rel(o, "www"), 300, "A", "192.0.2.80"),
        make_record(_rel(o, "www"), 300, "A", "192.0.2.81"),
        make_record(_rel(o, "www"), 600, "AAAA", "2001:db8::80"),
        make_record(_rel(o, "MiXeD.CaSe"), 60, "A", "192.0.2.99"),
        make_record(_rel(o, "sip"), 3600, "A", "192.0.2.60"),
        make_record(_rel(o, "txt2"), 60, "TXT", '"short ttl"'),
    ]


def _coverage_aliases(o: dns.name.Name) -> list[Record]:
    """CNAMEs (one chain of three), a DNAME and PTRs, some pointing at awkward names."""
    return [
        make_record(_rel(o, "alias"), 3600, "CNAME", str(_rel(o, "www"))),
        make_record(_rel(o, "c1"), 300, "CNAME", str(_rel(o, "c2"))),
        make_record(_rel(o, "c2"), 600, "CNAME", str(_rel(o, "c3"))),
        make_record(_rel(o, "c3"), 900, "CNAME", str(_rel(o, "www"))),
        make_record(_rel(o, "upper"), 3600, "CNAME", "WwW.CoV.TeSt."),
        make_record(_rel(o, "weird-alias"), 3600, "CNAME", str(_name(o, b"a.b"))),
        make_record(_rel(o, "ptr"), 3600, "PTR", str(_name(o, b"sp ace"))),
        make_record(_rel(o, "dname"), 3600, "DNAME", "example.net."),
    ]


def _coverage_other_types(o: dns.name.Name) -> list[Record]:
    return [
        make_record(_rel(o, "_sip._tcp"), 3600, "SRV", f"10 60 5060 {_rel(o, 'sip')}"),
        make_record(_rel(o, "_sip._tcp"), 3600, "SRV", f"20 0 5060 {_rel(o, 'www')}"),
        make_record(_rel(o, "naptr"), 3600, "NAPTR",
                    r'100 10 "U" "E2U+sip" "!^.*$!sip:info@cov.test!" .'),
        make_record(_rel(o, "sshfp"), 3600, "SSHFP", f"1 1 {_SSHFP_DIGEST}"),
        make_record(_rel(o, "hinfo"), 3600, "HINFO", '"PC-Intel" "Linux 6"'),
        make_record(_rel(o, "loc"), 3600, "LOC",
                    "52 22 23.000 N 4 53 32.000 E -2.00m 1m 10000m 10m"),
        make_record(_rel(o, "caa"), 3600, "CAA", '128 issuewild ";"'),
        make_record(_rel(o, "mx-only"), 1800, "MX", f"0 {_rel(o, 'mail')}"),
    ]


def _coverage_delegations(o: dns.name.Name) -> list[Record]:
    """In-zone glue (sub), sibling glue (sub2 served by ns.sub), out-of-zone NS, the child zone."""
    return [
        make_record(_rel(o, "sub"), 3600, "NS", str(_rel(o, "ns.sub"))),
        make_record(_rel(o, "sub"), 3600, "DS", f"12345 8 2 {_DS_DIGEST}"),
        make_record(_rel(o, "ns.sub"), 3600, "A", "192.0.2.200"),
        make_record(_rel(o, "ns.sub"), 3600, "AAAA", "2001:db8::200"),
        make_record(_rel(o, "sub2"), 7200, "NS", str(_rel(o, "ns.sub"))),
        make_record(_rel(o, "sub2"), 7200, "NS", "ns.example.net."),
        make_record(_rel(o, "ext"), 3600, "NS", "ns1.example.net."),
        make_record(_rel(o, "ext"), 3600, "NS", "ns2.example.net."),
        make_record(_rel(o, "child"), 3600, "NS", str(_rel(o, "ns1.child"))),
        make_record(_rel(o, "ns1.child"), 3600, "A", "192.0.2.210"),
    ]


def _coverage_wildcards_and_ents(o: dns.name.Name) -> list[Record]:
    """`*.w` with an explicit sibling; `a.b.c` with neither `b.c` nor `c` (two ENTs)."""
    return [
        make_record(_rel(o, "*.w"), 300, "A", "192.0.2.100"),
        make_record(_rel(o, "*.w"), 300, "TXT", '"wildcard"'),
        make_record(_rel(o, "*.w"), 300, "MX", f"10 {_rel(o, 'mail')}"),
        make_record(_rel(o, "explicit.w"), 300, "A", "192.0.2.101"),
        make_record(_rel(o, "a.b.c"), 3600, "A", "192.0.2.102"),
        make_record(_rel(o, "deep.x.y.z.ent"), 3600, "TXT", '"under four ENTs"'),
    ]


def _coverage_awkward_owners(o: dns.name.Name) -> list[Record]:
    """One owner per awkward label, a name of exactly 255 octets, awkward names in rdata."""
    records = [make_record(_name(o, label), 3600, "TXT", f'"label {i}"')
               for i, label in enumerate(AWKWARD_LABELS)]
    records.append(make_record(_name(o, b"a.b"), 3600, "A", "192.0.2.120"))
    records.append(make_record(_name(o, b"sp ace"), 3600, "A", "192.0.2.121"))
    records.append(make_record(_name(o, b"leaf", b"x\x00y", b"$("), 3600, "A", "192.0.2.122"))
    records.append(make_record(_name(o, b"star", b"a*b"), 3600, "AAAA", "2001:db8::122"))
    records.append(make_record(longest_name(o), 3600, "TXT", '"255 octets"'))
    return records


def _coverage_bulk(o: dns.name.Name) -> list[Record]:
    """Plain hosts so that the set is a few hundred records (zone transfers span messages)."""
    records = []
    for i in range(1, 121):
        owner, ttl = _rel(o, f"bulk{i:03d}"), _TTLS[i % len(_TTLS)]
        records.append(make_record(owner, ttl, "A", f"198.51.100.{i}"))
        if i % 3 == 0:
            records.append(make_record(owner, ttl, "AAAA", f"2001:db8:100::{i:x}"))
        if i % 5 == 0:
            records.append(make_record(owner, 60, "TXT", f'"bulk host {i}" "second string"'))
    return records


def longest_name(origin: dns.name.Name) -> dns.name.Name:
    """A name under origin of exactly 255 octets in wire form (the DNS maximum)."""
    labels: list[bytes] = []
    room = 255 - len(origin.to_wire())
    while room > 64:
        labels.append(b"l" * 63)
        room -= 64
    labels.append(b"m" * (room - 1))
    return _name(origin, *labels)


def _coverage_child(o: dns.name.Name, serial: int) -> list[Record]:
    return [
        *_apex(o, serial, [_rel(o, "ns1")], ttl=1800),
        make_record(_rel(o, "ns1"), 3600, "A", "192.0.2.210"),
        make_record(_rel(o, "www"), 300, "A", "192.0.2.211"),
        make_record(_rel(o, "Host.Deep"), 300, "AAAA", "2001:db8::211"),
    ]


def _coverage_awkward_zone(o: dns.name.Name, serial: int) -> list[Record]:
    return [
        *_apex(o, serial, [_rel(o, "ns")]),
        make_record(_rel(o, "ns"), 3600, "A", "192.0.2.220"),
        make_record(o, 3600, "TXT", '"zone name with \\. \\" \' and \\\\"'),
        make_record(_rel(o, "www"), 300, "CNAME", str(o)),
        make_record(_name(o, b"q'uote"), 300, "A", "192.0.2.221"),
        make_record(_rel(o, "*"), 300, "TXT", '"apex wildcard"'),
    ]


def _coverage_reverse(o: dns.name.Name, serial: int) -> list[Record]:
    targets = {1: "cov.test.", 25: "mail.cov.test.", 53: "ns1.cov.test.",
               80: "www.cov.test.", 81: "www.cov.test.", 99: "MiXeD.CaSe.cov.test.",
               120: str(_name(COVERAGE_ORIGIN, b"a.b"))}
    return [
        *_apex(o, serial, [_rel(COVERAGE_ORIGIN, "ns1"), _rel(COVERAGE_ORIGIN, "ns2")]),
        *(make_record(_rel(o, str(host)), 3600, "PTR", target) for host, target in targets.items()),
        make_record(_rel(o, "0/25"), 3600, "NS", "ns1.cov.test."),
    ]


def _coverage_root(serial: int) -> list[Record]:
    o = dns.name.root
    return [
        *_apex(o, serial, [_rel(o, "a.root-servers.test")], ttl=86400),
        make_record(_rel(o, "a.root-servers.test"), 86400, "A", "192.0.2.4"),
        make_record(_rel(o, "a.root-servers.test"), 86400, "AAAA", "2001:db8::4"),
        make_record(o, 86400, "TXT", '"the root zone"'),
        make_record(_rel(o, "tld"), 172800, "NS", "ns.tld."),
        make_record(_rel(o, "tld"), 86400, "DS", f"54321 13 2 {_DS_DIGEST}"),
        make_record(_rel(o, "ns.tld"), 172800, "A", "192.0.2.5"),
    ]


# --- the scalable generator ----------------------------------------------------------------


def zone_name(index: int, suffix: str = "bench.test") -> dns.name.Name:
    """Name of zone `index` of `generate` (any zone can be named without generating others)."""
    return dns.name.from_text(f"z{index:06d}.{suffix}.")


def generate(zones: int, records: int = 10, seed: int = 1,
             mix: Mapping[str, float] = DEFAULT_MIX, suffix: str = "bench.test") -> Iterator[Zone]:
    """`zones` zones of about `records` records each, one at a time (memory stays flat)."""
    kinds, weights = _mix_table(mix)
    for index in range(zones):
        yield _build_zone(index, records, seed, kinds, weights, suffix)


def generate_zone(index: int, records: int = 10, seed: int = 1,
                  mix: Mapping[str, float] = DEFAULT_MIX, suffix: str = "bench.test") -> Zone:
    """Zone `index` of `generate(...)` with the same arguments, without generating the others."""
    kinds, weights = _mix_table(mix)
    return _build_zone(index, records, seed, kinds, weights, suffix)


def _mix_table(mix: Mapping[str, float]) -> tuple[list[str], list[float]]:
    unknown = set(mix) - set(_SLOT_BUILDERS)
    if unknown:
        raise ValueError(f"unknown record kinds in mix: {', '.join(sorted(unknown))}")
    kinds = [kind for kind in _SLOT_BUILDERS if mix.get(kind, 0) > 0]
    if not kinds:
        raise ValueError("the record mix gives no kind a positive share")
    return kinds, [mix[kind] for kind in kinds]


# The scalable generator writes rdata text directly in dnspython's canonical form instead of
# parsing it through make_record: a million zones stream in about a minute instead of ten.
# tests/test_generator.py checks every record against make_record's parse of the same text.

def _at(origin: dns.name.Name, text: str) -> dns.name.Name:
    """origin's descendant `text` (plain dot-separated labels, nothing to escape)."""
    return dns.name.Name([*(label.encode() for label in text.split(".")), *origin.labels])


def _build_zone(index: int, records: int, seed: int, kinds: list[str], weights: list[float],
                suffix: str) -> Zone:
    """Apex (SOA, two NS with addresses), then slots drawn from the mix until `records`.

    The generator is seeded by (seed, index), not by earlier zones, so any zone can be built alone.
    """
    rng = random.Random(f"dlzbench:{seed}:{index}")
    origin = zone_name(index, suffix)
    ns1, ns2 = _at(origin, "ns1"), _at(origin, "ns2")
    soa = f"{ns1} {_at(origin, 'hostmaster')} {2024010100 + seed} {_SOA_TIMERS}"
    out = [Record(origin, 3600, "SOA", soa), Record(origin, 3600, "NS", str(ns1)),
           Record(origin, 3600, "NS", str(ns2)),
           Record(ns1, 3600, "A", _ipv4(rng)), Record(ns2, 3600, "A", _ipv4(rng))]
    slot = 0
    while len(out) < records:
        kind = rng.choices(kinds, weights)[0]
        out += _SLOT_BUILDERS[kind](origin, slot, rng)
        slot += 1
    return Zone(origin, out)


def _ipv4(rng: random.Random) -> str:
    return f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"


def _ipv6(rng: random.Random) -> str:
    # Both groups non-zero, so this is already the canonical (RFC 5952) spelling.
    return f"2001:db8:{rng.randrange(1, 65536):x}::{rng.randrange(1, 65536):x}"


def _ttl(rng: random.Random) -> int:
    return rng.choice(_TTLS)


def _slot_a(o: dns.name.Name, slot: int, rng: random.Random) -> list[Record]:
    owner, ttl = _at(o, f"host{slot}"), _ttl(rng)
    return [Record(owner, ttl, "A", _ipv4(rng)) for _ in range(rng.choice((1, 1, 2)))]


def _slot_aaaa(o: dns.name.Name, slot: int, rng: random.Random) -> list[Record]:
    return [Record(_at(o, f"v6host{slot}"), _ttl(rng), "AAAA", _ipv6(rng))]


# Only the first slots may put their MX at the apex: BIND 9.18.28+ refuses a zone with an RRset
# of over 100 records (max-records-per-type, CVE-2024-1737), and a zone of 100,000 records drew
# 1,800 apex MX. A slot adds at least one record after the apex's five, so zones of up to 69
# records (the suite's 10 per zone among them) are unchanged by this bound.
_APEX_MX_SLOTS = 64


def _slot_mx(o: dns.name.Name, slot: int, rng: random.Random) -> list[Record]:
    mail = _at(o, f"mail{slot}")
    at_apex = slot % 2 == 0 and slot < _APEX_MX_SLOTS
    # The preference is 16 bits; the modulus keeps large zones' MX valid.
    return [Record(o if at_apex else _at(o, f"mx{slot}"), 3600, "MX",
                   f"{10 + slot % 65000} {mail}"),
            Record(mail, _ttl(rng), "A", _ipv4(rng))]


def _slot_txt(o: dns.name.Name, slot: int, rng: random.Random) -> list[Record]:
    text = f'"v=token{rng.randrange(10**9)}" "slot {slot}"'
    return [Record(_at(o, f"txt{slot}"), _ttl(rng), "TXT", text)]


def _slot_cname(o: dns.name.Name, slot: int, rng: random.Random) -> list[Record]:
    target = _at(o, f"target{slot}")
    return [Record(_at(o, f"alias{slot}"), _ttl(rng), "CNAME", str(target)),
            Record(target, _ttl(rng), "A", _ipv4(rng))]


def _slot_ptr(o: dns.name.Name, slot: int, rng: random.Random) -> list[Record]:
    return [Record(_at(o, f"{slot}.ptr"), _ttl(rng), "PTR", str(_at(o, f"host{slot}")))]


def _slot_srv(o: dns.name.Name, slot: int, rng: random.Random) -> list[Record]:
    target = _at(o, f"srv{slot}")
    return [Record(_at(o, f"_svc{slot}._tcp"), 3600, "SRV",
                   f"10 {rng.randrange(100)} {rng.randrange(1, 65536)} {target}"),
            Record(target, _ttl(rng), "A", _ipv4(rng))]


def _slot_wildcard(o: dns.name.Name, slot: int, rng: random.Random) -> list[Record]:
    return [Record(_at(o, f"*.wild{slot}"), _ttl(rng), "A", _ipv4(rng))]


def _slot_delegation(o: dns.name.Name, slot: int, rng: random.Random) -> list[Record]:
    ns = _at(o, f"ns.sub{slot}")
    return [Record(_at(o, f"sub{slot}"), 86400, "NS", str(ns)),
            Record(ns, 86400, "A", _ipv4(rng))]


def _slot_ent(o: dns.name.Name, slot: int, rng: random.Random) -> list[Record]:
    """`leaf.mid.ent<slot>`: two empty non-terminals above one record."""
    return [Record(_at(o, f"leaf.mid.ent{slot}"), _ttl(rng), "A", _ipv4(rng))]


_SLOT_BUILDERS = {
    "a": _slot_a, "aaaa": _slot_aaaa, "mx": _slot_mx, "txt": _slot_txt, "cname": _slot_cname,
    "ptr": _slot_ptr, "srv": _slot_srv, "wildcard": _slot_wildcard,
    "delegation": _slot_delegation, "ent": _slot_ent,
}


# --- Appendix B of seed 000 (Principled Technologies' report) ------------------------------

APPENDIX_B_ORIGIN = dns.name.from_text("pti.")


def appendix_b(hosts: int, seed: int = 1) -> Iterator[Zone]:
    """One forward zone `pti.` of A records, then one reverse zone per /16 with their PTRs.

    Addresses are consecutive in 10.0.0.0/8 from a seed-chosen start, so the reverse zones can be
    produced block by block without holding an address map.
    """
    if hosts > 1 << 24:
        raise ValueError("appendix_b supports at most 2**24 hosts (one 10/8 network)")
    start = random.Random(f"dlzbench-appendix-b:{seed}").randrange(1 << 24)
    origin = APPENDIX_B_ORIGIN
    ns = _rel(origin, "ns1")
    forward = [*_apex(origin, 2024010100 + seed, [ns]),
               make_record(ns, 3600, "A", "192.0.2.53")]
    forward += [make_record(_appendix_b_host(i), 3600, "A", _appendix_b_address(start, i))
                for i in range(hosts)]
    yield Zone(origin, forward)
    yield from _appendix_b_reverse(hosts, start, seed, ns)


def _appendix_b_host(i: int) -> dns.name.Name:
    return dns.name.from_text(f"h{i:07d}.pti.")


def _appendix_b_address(start: int, i: int) -> str:
    value = (start + i) % (1 << 24)
    return f"10.{value >> 16}.{(value >> 8) & 255}.{value & 255}"


def _appendix_b_reverse(hosts: int, start: int, seed: int,
                        ns: dns.name.Name) -> Iterator[Zone]:
    """Reverse zones in address order; each holds the PTRs of the hosts inside its /16."""
    i = 0
    while i < hosts:
        value = (start + i) % (1 << 24)
        block = value >> 16
        count = min(hosts - i, (1 << 16) - (value & 0xFFFF))
        origin = dns.name.from_text(f"{block}.10.in-addr.arpa.")
        records = _apex(origin, 2024010100 + seed, [ns])
        for j in range(i, i + count):
            octets = _appendix_b_address(start, j).split(".")
            owner = dns.name.from_text(f"{octets[3]}.{octets[2]}.{origin}")
            records.append(make_record(owner, 3600, "PTR", str(_appendix_b_host(j))))
        yield Zone(origin, records)
        i += count
