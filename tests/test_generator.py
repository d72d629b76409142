"""The generator, the coverage set, Appendix B and sampled query files."""

from __future__ import annotations

import itertools
import shutil
import subprocess
import tracemalloc
from collections import Counter
from pathlib import Path

import dns.name
import pytest

from base.errors import UserError
from bench.commands.cli import main as bench_main
from zonedata.derive import derive_queries
from zonedata.generator import (
    AWKWARD_LABELS,
    appendix_b,
    coverage_zones,
    generate,
    generate_zone,
    zone_name,
)
from zonedata.model import Zone, canonical_set, empty_nonterminals, make_record
from zonedata.queries import (
    NXDOMAIN_PREFIX,
    QuerySampler,
    parse_mix,
    read_query_file,
    split_count,
    write_query_file,
)
from zonedata.zonefiles import read_zone_dir, write_zone_file, zone_file_name, zone_file_text

COVERAGE_TYPES = {"SOA", "NS", "A", "AAAA", "MX", "TXT", "CNAME", "PTR", "SRV", "CAA", "NAPTR",
                  "SSHFP", "DS", "HINFO", "LOC", "DNAME"}


def all_records(zones: list[Zone]):
    return [(zone, r) for zone in zones for r in zone.records]


def owners(zones: list[Zone]) -> set[dns.name.Name]:
    return {r.owner for zone in zones for r in zone.records}


def assert_apex_shape(zone: Zone) -> None:
    apex = [r.rdtype for r in zone.records if r.owner == zone.origin]
    assert apex.count("SOA") == 1, zone.origin
    assert "NS" in apex, zone.origin
    assert sum(r.rdtype == "SOA" for r in zone.records) == 1, zone.origin


def assert_rrset_ttls_equal(zone: Zone) -> None:
    ttls: dict[tuple[dns.name.Name, str], set[int]] = {}
    for r in zone.records:
        ttls.setdefault((r.owner, r.rdtype), set()).add(r.ttl)
    assert all(len(v) == 1 for v in ttls.values()), zone.origin


# --- generate ------------------------------------------------------------------------------


@pytest.mark.check
def test_same_seed_same_bytes_other_seed_other_bytes():
    def text(seed: int) -> str:
        return "".join(zone_file_text(z) for z in generate(40, 12, seed=seed))

    assert text(1) == text(1)
    assert text(1) != text(2)


@pytest.mark.check
def test_zone_i_can_be_built_alone():
    stream = list(generate(25, 15, seed=9))
    assert [z.origin for z in stream] == [zone_name(i) for i in range(25)]
    assert zone_name(42) == dns.name.from_text("z000042.bench.test.")
    assert generate_zone(17, 15, seed=9).canonical() == stream[17].canonical()


@pytest.mark.check
def test_generated_zones_have_the_mix():
    zones = list(generate(60, 20, seed=3))
    types = {r.rdtype for _, r in all_records(zones)}
    assert {"SOA", "NS", "A", "AAAA", "MX", "TXT", "CNAME", "PTR", "SRV"} <= types
    names = owners(zones)
    assert any(n.labels[0] == b"*" for n in names), "wildcards"
    assert any(r.rdtype == "NS" and r.owner != z.origin for z, r in all_records(zones))
    assert any(empty_nonterminals(z) for z in zones), "empty non-terminals"
    for zone in zones:
        assert_apex_shape(zone)
        assert_rrset_ttls_equal(zone)
        assert 20 <= len(zone.records) <= 24
    mean = sum(len(z.records) for z in zones) / len(zones)
    assert 20 <= mean <= 22


def _assert_named_checkzone_loads(zone: Zone, directory: Path) -> None:
    checkzone = shutil.which("named-checkzone") or "/usr/sbin/named-checkzone"
    path = directory / zone_file_name(zone.key)
    write_zone_file(zone, path)
    done = subprocess.run([checkzone, "-i", "local", zone.origin.to_text(), str(path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{zone.origin}: {done.stdout}{done.stderr}"


def test_generated_zones_pass_named_checkzone(tmp_path):
    for zone in [*generate(5, 30, seed=4), *appendix_b(40, seed=4)]:
        _assert_named_checkzone_loads(zone, tmp_path)


def _peak_bytes(zones: int) -> int:
    tracemalloc.start()
    try:
        for _zone in generate(zones, 10, seed=5):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.check
def test_generated_text_is_what_dnspython_parses_it_to():
    """The scalable generator skips make_record for speed: its text must be canonical anyway."""
    for zone in generate(300, records=20):
        for record in zone.records:
            assert make_record(record.owner, record.ttl, record.rdtype, record.rdata) == record


@pytest.mark.check
def test_generate_memory_stays_flat():
    small, large = _peak_bytes(200), _peak_bytes(2000)
    assert large < small * 1.5 + 64 * 1024, (small, large)


@pytest.mark.check
def test_unknown_mix_kind_is_refused():
    with pytest.raises(ValueError, match="unknown record kinds"):
        next(generate(1, mix={"a": 1.0, "bogus": 1.0}))


# --- coverage set --------------------------------------------------------------------------


@pytest.mark.check
def test_coverage_has_every_type_and_valid_records():
    zones = coverage_zones()
    assert {r.rdtype for _, r in all_records(zones)} >= COVERAGE_TYPES
    assert 200 <= len(all_records(zones)) <= 600
    for zone, r in all_records(zones):
        # Canonical: dnspython parses the text back to the same text.
        assert make_record(r.owner, r.ttl, r.rdtype, r.rdata) == r
        assert r.owner.is_subdomain(zone.origin)
    for zone in zones:
        assert_apex_shape(zone)
        assert_rrset_ttls_equal(zone)


@pytest.mark.check
def test_coverage_has_every_awkward_name():
    zones = coverage_zones()
    labels = {label for name in owners(zones) for label in name.labels}
    for label in AWKWARD_LABELS:
        assert label in labels, label
    for needed in (b"a.b", b"sl/ash", b"..", b"sp ace", b'q"uote', b"q'uote", b"per%cent",
                   b"_sip", b"_tcp", b"a*b", b"\xff\x7f", b"'; DROP TABLE records; --",
                   b"back\\slash", b"@", b"$", b"(", b";", b"x" * 63):
        assert needed in labels, needed
    assert any(b"\x00" in label for label in labels)
    assert any(len(name.to_wire()) == 255 for name in owners(zones))
    assert any(any(ch.isupper() for ch in str(n)) for n in owners(zones)), "mixed-case owners"
    assert any(any(ch.isupper() for ch in r.rdata) and r.rdtype == "CNAME"
               for _, r in all_records(zones)), "mixed-case rdata"


@pytest.mark.check
def test_coverage_structure():
    zones = {z.origin: z for z in coverage_zones()}
    origins = set(zones)
    assert dns.name.root in origins
    assert any(o.is_subdomain(dns.name.from_text("in-addr.arpa.")) for o in origins)
    assert any(b"." in label or b"'" in label for o in origins for label in o.labels)
    cov = zones[dns.name.from_text("cov.test.")]
    # Parent and child both present; the parent delegates the child.
    child = dns.name.from_text("child.cov.test.")
    assert child in origins
    assert any(r.owner == child and r.rdtype == "NS" for r in cov.records)
    by_owner: dict[dns.name.Name, set[str]] = {}
    for r in cov.records:
        by_owner.setdefault(r.owner, set()).add(r.rdtype)
    # Wildcard, ENTs (a.b.c without b.c and c), DS at a delegation, glue in and beside it.
    assert dns.name.from_text("*.w.cov.test.") in by_owner
    ents = set(empty_nonterminals(cov))
    assert {dns.name.from_text("b.c.cov.test."), dns.name.from_text("c.cov.test.")} <= ents
    assert {"NS", "DS"} <= by_owner[dns.name.from_text("sub.cov.test.")]
    assert "A" in by_owner[dns.name.from_text("ns.sub.cov.test.")]
    sibling = [r for r in cov.records
               if r.owner == dns.name.from_text("sub2.cov.test.") and r.rdtype == "NS"]
    assert "ns.sub.cov.test." in {r.rdata for r in sibling}, "sibling glue"
    # A CNAME chain: some CNAME target owns a CNAME itself.
    cname_targets = {r.rdata for r in cov.records if r.rdtype == "CNAME"}
    assert any("CNAME" in by_owner.get(dns.name.from_text(t), set()) for t in cname_targets)
    # Differing TTLs between RRsets of one type.
    assert len({r.ttl for r in cov.records if r.rdtype == "A"}) > 1
    # The reverse zone has PTRs, the root zone a delegation.
    assert any(r.rdtype == "PTR" for o, z in zones.items() if "arpa" in str(o) for r in z.records)
    assert any(r.rdtype == "NS" and r.owner != dns.name.root for r in zones[dns.name.root].records)


@pytest.mark.check
def test_coverage_depends_on_seed_only():
    assert canonical_set(coverage_zones(3)) == canonical_set(coverage_zones(3))
    assert canonical_set(coverage_zones(3)) != canonical_set(coverage_zones(4))


# --- Appendix B ----------------------------------------------------------------------------


@pytest.mark.check
def test_derived_queries_ask_soa_at_names_that_do_not_exist():
    """Two names below every apex, none of them in the data, are asked for SOA (where native
    BIND's NXDOMAIN carries the SOA with TTL 0); nowhere else is SOA asked below an owner."""
    zones = coverage_zones()
    owners = {r.owner for z in zones for r in z.records} | {
        name for z in zones for name in empty_nonterminals(z)}
    asked = [name for name, rdtype in derive_queries(zones) if rdtype == "SOA"
             and name not in owners]
    for zone in zones:
        below = [name for name in asked if name.is_subdomain(zone.origin)
                 and not any(name.is_subdomain(z.origin) and len(z.origin) > len(zone.origin)
                             for z in zones)]
        assert sorted(len(name) - len(zone.origin) for name in below) == [1, 2], zone.origin
    assert len(asked) == 2 * len(zones)


@pytest.mark.check
def test_appendix_b_forward_and_reverse_match():
    zones = list(appendix_b(700, seed=2))
    forward, reverse = zones[0], zones[1:]
    assert forward.origin == dns.name.from_text("pti.")
    addresses = {r.rdata: r.owner for r in forward.records
                 if r.rdtype == "A" and r.owner.labels[0].startswith(b"h")}
    assert len(addresses) == 700
    ptrs = {}
    for zone in reverse:
        assert_apex_shape(zone)
        for r in zone.records:
            if r.rdtype == "PTR":
                octets = [label.decode() for label in r.owner.labels[:4]]
                ptrs[".".join(reversed(octets))] = dns.name.from_text(r.rdata)
    assert ptrs == addresses
    assert [z.key for z in appendix_b(700, seed=2)] == [z.key for z in zones]


# --- query files ---------------------------------------------------------------------------


class ModelIndex:
    """Every name of a data set with its types, to judge sampled queries."""

    def __init__(self, zones: list[Zone]) -> None:
        self.types: dict[dns.name.Name, set[str]] = {}
        for zone in zones:
            for r in zone.records:
                self.types.setdefault(r.owner, set()).add(r.rdtype)
            for ent in empty_nonterminals(zone):
                self.types.setdefault(ent, set())

    def covered_by_wildcard(self, name: dns.name.Name) -> bool:
        ancestor = name.parent()
        while True:
            if dns.name.Name([b"*", *ancestor.labels]) in self.types:
                return True
            if ancestor == dns.name.root:
                return False
            ancestor = ancestor.parent()


def classify(index: ModelIndex, name: dns.name.Name, rdtype: str) -> str:
    if name not in index.types:
        assert name.labels[0].startswith(NXDOMAIN_PREFIX.encode())
        assert not index.covered_by_wildcard(name), name
        return "nxdomain"
    present = index.types[name]
    if rdtype in present:
        return "hit"
    assert "CNAME" not in present, name
    return "nodata"


@pytest.mark.check
def test_query_file_has_the_mix_and_is_right(tmp_path):
    zones = [*coverage_zones(), *generate(30, 15, seed=6)]
    path = tmp_path / "queries.txt"
    mix = {"hit": 0.7, "nxdomain": 0.2, "nodata": 0.1}
    passed = list(write_query_file(iter(zones), path, 1000, mix, seed=6))
    assert canonical_set(passed) == canonical_set(zones)
    queries = read_query_file(path)
    assert len(queries) == 1000
    index = ModelIndex(zones)
    kinds = Counter(classify(index, dns.name.from_text(name), rdtype) for name, rdtype in queries)
    assert split_count(1000, mix) == {"hit": 700, "nxdomain": 200, "nodata": 100, "unknown": 0}
    assert kinds == Counter(split_count(1000, mix))
    # Names dnsperf 2.10 would misread (\DDD other than \000) never appear.
    text = path.read_text()
    assert text.isascii()
    assert all(esc == "\\000" for esc in _decimal_escapes(text))


def _decimal_escapes(text: str) -> list[str]:
    return [text[i:i + 4] for i in range(len(text) - 3)
            if text[i] == "\\" and text[i + 1:i + 4].isdigit() and text[i - 1] != "\\"]


@pytest.mark.check
def test_query_file_is_deterministic(tmp_path):
    def sample(seed: int) -> str:
        sampler = QuerySampler(300, seed=seed)
        for _ in sampler.watch(itertools.chain(coverage_zones(), generate(20, 12))):
            pass
        out = tmp_path / f"q{seed}.txt"
        sampler.write(out)
        return out.read_text()

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)


@pytest.mark.check
def test_query_file_avoids_referrals_and_aliases():
    sampler = QuerySampler(4000, {"hit": 0.5, "nodata": 0.5}, seed=1)
    sampler.observe(coverage_zones()[0])
    names = {name for name, _ in sampler.queries()}
    for bad in ("ns.sub.cov.test.", "sub.cov.test.", "ns1.child.cov.test.", "ext.cov.test."):
        assert bad not in names
    assert "c1.cov.test." not in {n for n, t in sampler.queries() if t != "CNAME"}


@pytest.mark.check
def test_mix_parsing_and_rounding():
    assert parse_mix("hit=8,nxdomain=1,nodata=1") == {"hit": 0.8, "nxdomain": 0.1, "nodata": 0.1,
                                                      "unknown": 0.0}
    assert parse_mix("hit=1") == {"hit": 1.0, "nxdomain": 0.0, "nodata": 0.0, "unknown": 0.0}
    assert parse_mix("hit=1,unknown=1")["unknown"] == 0.5
    with pytest.raises(UserError):
        parse_mix("hits=1")
    with pytest.raises(UserError):
        parse_mix("hit=x")
    assert sum(split_count(7, {"hit": 1 / 3, "nxdomain": 1 / 3, "nodata": 1 / 3}).values()) == 7


@pytest.mark.check
def test_read_query_file_rejects_garbage(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text("# comment\nwww.example. A\n\nonly-one-field\n")
    with pytest.raises(UserError, match=r"q.txt:4: expected"):
        read_query_file(path)


# --- the generate command ------------------------------------------------------------------


@pytest.mark.check
def test_generate_command_writes_zones_and_queries(tmp_path, capsys):
    out = tmp_path / "data"
    argv = ["generate", "--zones", "12", "--records", "12", "--coverage", "--appendix-b", "30",
            "--out", str(out), "--queries", "200", "--shard", "3"]
    assert bench_main(argv) == 0
    printed = capsys.readouterr().out
    assert "wrote 19 zones" in printed and "200 queries" in printed
    zones = list(read_zone_dir(out))
    assert len(zones) == 19
    assert len(read_query_file(out / "queries.txt")) == 200
    expected = [*coverage_zones(), *appendix_b(30), *generate(12, 12)]
    assert canonical_set(zones) == canonical_set(expected)
    # A second run into the same directory is refused rather than mixed in.
    assert bench_main(argv) == 1
    assert "not an empty directory" in capsys.readouterr().err


@pytest.mark.check
def test_generate_command_needs_a_source(tmp_path, capsys):
    assert bench_main(["generate", "--out", str(tmp_path / "x")]) == 1
    assert "nothing to generate" in capsys.readouterr().err


@pytest.mark.check
def test_generate_output_is_byte_identical_for_a_seed(tmp_path):
    for run in ("a", "b"):
        assert bench_main(["generate", "--zones", "15", "--seed", "7", "--out",
                           str(tmp_path / run), "--queries", "50"]) == 0
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*"))
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*"))
    assert files_a == files_b
    for rel in files_a:
        a, b = tmp_path / "a" / rel, tmp_path / "b" / rel
        assert a.is_dir() or a.read_bytes() == b.read_bytes()


def test_a_large_zone_keeps_every_rrset_within_bind_limit(tmp_path):
    """BIND 9.18.28+ refuses a zone with an RRset of over 100 records (max-records-per-type);
    the data-size shapes make zones of 100,000 records."""
    zone = generate_zone(0, 20_000, seed=1)
    sizes = Counter((record.owner, record.rdtype) for record in zone.records)
    assert max(sizes.values()) <= 100
    _assert_named_checkzone_loads(zone, tmp_path)
