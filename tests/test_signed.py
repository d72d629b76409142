"""Signed zones (issue 14): signed with BIND's own tools, held by every store, answered with the
DO bit, and what a validating resolver makes of a DLZ answer.

The first group runs BIND's signing tools only (no server): the signed coverage set, the
record types it adds through the model and the stores' record encodings, and the one-line
failures that leave nothing behind. The rest start servers, over one load of the signed set
into each store for the module: every store's round trip of it, verify with the DO bit against
native BIND, and `delv` with a trust anchor for the test zone's KSK against native BIND and the
PostgreSQL driver.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import dns.name
import pytest

from base.errors import UserError
from bench.commands import cli
from bench.measure.loading import timed_load
from bench.measure.serving import LoadedStore, serving
from bench.verify.answers import Answer, ask, complete
from bench.verify.bind_classes import BIND_CLASSES, DNSSEC_TYPES, ZoneFacts
from bench.verify.compare import (
    REFERENCE_SERVERS,
    UNEXPLAINED,
    classify,
    classify_transfer,
    compare_servers,
)
from loaders import get_loader
from loaders.berkeley import decode_records, encode_lines, record_line
from loaders.ldap import parse_record_value, record_value
from servers import DLZ_CEILING, SERVERS, get_server, store_names
from servers.dnsserver import DnsServer
from servers.named import Named
from tests.at_once import entered_at_once
from zonedata.derive import derive_queries
from zonedata.generator import CHILD_ORIGIN, COVERAGE_ORIGIN, coverage_zones, generate
from zonedata.model import Zone, canonical_set, make_record
from zonedata.signing import (
    KEYS_DIR,
    TRUST_ANCHORS_FILE,
    SigningOptions,
    check_signed,
    sign_zones,
    trust_anchors_text,
)
from zonedata.zonefiles import read_zone_dir, zone_files

SIGNED_TYPES = {"DNSKEY", "RRSIG", "NSEC"}


def signed_copy(zones: list[Zone], out: Path, nsec3: bool = False) -> list[Zone]:
    sign_zones(zones, out, SigningOptions(nsec3=nsec3))
    return list(read_zone_dir(out))


@pytest.fixture(scope="module")
def signed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("signed") / "coverage"
    sign_zones(coverage_zones(), out)
    return out


@pytest.fixture(scope="module")
def signed(signed_dir: Path) -> list[Zone]:
    return list(read_zone_dir(signed_dir))


# --- signing (BIND's tools, no server) --------------------------------------------------------


def test_every_zone_is_signed_and_keeps_its_records(signed: list[Zone]) -> None:
    unsigned = canonical_set(coverage_zones())
    for zone in signed:
        check_signed(zone)
        types = {r.rdtype for r in zone.records}
        assert SIGNED_TYPES <= types, zone.origin
        kept = [rec for rec in zone.canonical() if rec[2] not in DNSSEC_TYPES - {"DS"}]
        assert kept == unsigned[zone.key], zone.origin
    assert {z.key for z in signed} == set(unsigned)


def test_keys_and_trust_anchors_are_beside_the_data(signed_dir: Path,
                                                    signed: list[Zone]) -> None:
    keys = signed_dir / KEYS_DIR
    for zone in signed:
        stem = "K" + ("." if zone.origin == dns.name.root else "")
        assert any(p.name.startswith(stem) and p.suffix == ".private" for p in keys.rglob("K*"))
    anchors = (keys / TRUST_ANCHORS_FILE).read_text()
    assert sorted(anchors.splitlines()) == sorted(trust_anchors_text(signed).splitlines())
    assert f'"{COVERAGE_ORIGIN}" static-key 257 3 13 ' in anchors
    # The keys directory is no zone: reading the directory finds the zone files only.
    assert len(list(zone_files(signed_dir))) == len(signed)


def test_new_types_round_trip_through_the_model_and_the_record_encodings(
        signed: list[Zone]) -> None:
    seen = set()
    for zone in signed:
        for r in zone.records:
            if r.rdtype not in DNSSEC_TYPES:
                continue
            seen.add(r.rdtype)
            assert make_record(r.owner, r.ttl, r.rdtype, r.rdata) == r
            assert parse_record_value(record_value(r.rdtype, r.ttl, r.rdata)) == (
                r.rdtype, r.ttl, r.rdata)
            assert decode_records(r.owner, encode_lines([record_line(r)])) == [r]
    assert seen >= {"DNSKEY", "RRSIG", "NSEC", "DS"}


def test_nsec3_signing_adds_the_chain_and_its_parameters(tmp_path: Path) -> None:
    zones = signed_copy([coverage_zones()[1], *generate(2, 10, 1)], tmp_path / "nsec3",
                        nsec3=True)
    for zone in zones:
        types = {r.rdtype for r in zone.records}
        assert {"NSEC3", "NSEC3PARAM", "DNSKEY", "RRSIG"} <= types and "NSEC" not in types
        assert [r.rdata for r in zone.records if r.rdtype == "NSEC3PARAM"] == ["1 0 0 -"]
        for r in zone.records:
            if r.rdtype in ("NSEC3", "NSEC3PARAM"):
                assert make_record(r.owner, r.ttl, r.rdtype, r.rdata) == r


def test_a_signing_failure_names_the_zone_and_leaves_nothing(tmp_path: Path) -> None:
    """dnssec-signzone 9.18 cannot add NSEC3 for a 255-octet owner (`*.` + it is too long)."""
    out = tmp_path / "out"
    with pytest.raises(UserError) as failure:
        sign_zones(coverage_zones(), out, SigningOptions(nsec3=True))
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith(f"signing zone {COVERAGE_ORIGIN}: dnssec-signzone failed")
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_signed_input_and_unsigned_expectations_are_one_line_errors(
        tmp_path: Path, signed: list[Zone]) -> None:
    with pytest.raises(UserError, match=r"^zone cov\.test\. is signed already \(it holds "):
        sign_zones([z for z in signed if z.origin == COVERAGE_ORIGIN], tmp_path / "again")
    assert not (tmp_path / "again").exists()
    with pytest.raises(UserError, match=r"^zone cov\.test\. is not signed: no KSK"):
        check_signed(coverage_zones()[0])
    no_keys = [z for z in signed if z.origin == CHILD_ORIGIN][0]
    stripped = Zone(no_keys.origin, [r for r in no_keys.records if r.rdtype != "DNSKEY"])
    with pytest.raises(UserError, match=r"^zone child\.cov\.test\. is not signed: no KSK"):
        check_signed(stripped)


def test_generate_signed_and_the_data_options(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gen"
    assert cli.main(["generate", "--coverage", "--signed", "--queries", "20", "--shard", "1",
                     "--out", str(out)]) == 0
    assert (out / KEYS_DIR / TRUST_ANCHORS_FILE).is_file() and (out / "queries.txt").is_file()
    for zone in read_zone_dir(out):
        check_signed(zone)
    # --nsec3 fails on the coverage set (see above): one line, and no output directory.
    assert cli.main(["generate", "--coverage", "--signed", "--nsec3", "--out",
                     str(tmp_path / "gen3")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: signing zone cov.test.: ")
    assert not (tmp_path / "gen3").exists()
    assert cli.main(["generate", "--coverage", "--nsec3", "--out", str(tmp_path / "x")]) == 1
    assert "--nsec3 only applies to --signed" in capsys.readouterr().err
    # --signed on unsigned zone files: the zone is named before any store is started.
    plain = tmp_path / "plain"
    assert cli.main(["generate", "--coverage", "--queries", "0", "--out", str(plain)]) == 0
    assert cli.main(["verify", "--zones", str(plain), "--signed", "--servers", "memory"]) == 1
    assert "is not signed" in capsys.readouterr().err
    # A server that cannot serve a signed zone is refused before anything is signed.
    assert cli.main(["verify", "--coverage", "--sign", "--servers", "pdns-lmdb"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: verify of signed data cannot measure pdns-lmdb: PowerDNS serves "
                   "stored RRSIGs only for zones marked PRESIGNED in its domain metadata, which "
                   "its stores do not set"], err


# --- every store holds the signed data (servers) ----------------------------------------------


class HeldStores:
    """Every store holding the signed set, each started and loaded once for the module when
    first asked for: the round trip reads it back, and every server over it answers from it
    (a store's servers only read it, as `scale` serves one load to all of them). A store's
    server (PostgreSQL, MariaDB, slapd) and its load cost seconds; a named over it far less."""

    def __init__(self, run_dir: Path, signed: list[Zone], stack: ExitStack) -> None:
        self.run_dir, self.signed, self.stack = run_dir, signed, stack
        self.stores: dict[str, LoadedStore] = {}

    def store(self, name: str) -> LoadedStore:
        """The store `name` holding the signed set (its LoadedStore names its first server)."""
        if name not in self.stores:
            loader = get_loader(name)
            target = self.stack.enter_context(loader.database.server(self.run_dir / f"rt-{name}"))
            first_server = next(s for s in SERVERS if s.store == name)
            stats = timed_load(loader, self.signed, target)
            self.stores[name] = LoadedStore(first_server, loader, target, stats)
        return self.stores[name]

    def named(self, server: str, run_dir: Path, *, threads: int = 1) -> DnsServer:
        """The server (not started) over its store."""
        kind = get_server(server)
        return replace(self.store(kind.store), server=kind).dns_server(run_dir, threads=threads)


@pytest.fixture(scope="module")
def held(run_dir: Path, signed: list[Zone]) -> Iterator[HeldStores]:
    with ExitStack() as stack:
        yield HeldStores(run_dir, signed, stack)


@pytest.mark.parametrize("store_name", store_names())
def test_every_store_round_trips_the_signed_set(store_name: str, held: HeldStores,
                                                signed: list[Zone]) -> None:
    loaded = held.store(store_name)
    store = loaded.loader
    assert loaded.load.records == sum(len(z.records) for z in signed)
    # as_held: what the store's own representation changes (pdns_lmdb: a NUL in a label).
    assert canonical_set(store.read_back(loaded.target)) == canonical_set(
        store.as_held(z) for z in signed)


# --- verify with the DO bit (servers) ---------------------------------------------------------

# BIND's DLZ drivers: what BIND's DLZ path does with signed data is this file's question (the
# other servers are judged by their own classes, measured on unsigned data).
DRIVERS = [s.name for s in SERVERS
           if s.same_answers_as == DLZ_CEILING and s.name not in REFERENCE_SERVERS and s.is_built()]
# What the signed coverage set must show through BIND's DLZ path, each at least once.
EXPECTED_CLASSES = {"unsigned-answer", "unsigned-wildcard", "nodata-no-proof",
                    "nxdomain-no-proof", "referral-no-ds", "referral-no-proof",
                    "dnssec-type-unsigned", "rrsig-ttl", "rrsig-at-delegation"}


@pytest.fixture(scope="module")
def fleet(run_dir: Path, held: HeldStores) -> Iterator[dict[str, Named]]:
    with ExitStack() as stack:
        yield entered_at_once(stack, {d: held.named(d, run_dir / f"do-{d}", threads=2)
                                      for d in [*REFERENCE_SERVERS, *DRIVERS]})


def test_native_answers_with_signatures_when_do_is_set(fleet: dict[str, Named]) -> None:
    """The DO bit reaches BIND: native BIND signs, and without DO it does not."""
    query = (dns.name.from_text("www.cov.test."), "A")
    with_do = complete(ask(fleet["native"], query, dnssec=True))
    without = complete(ask(fleet["native"], query))
    assert any(rr[2] == "RRSIG" for rr in with_do.answer)
    assert not any(rr[2] == "RRSIG" for rr in without.answer)


def test_verify_with_do_on_signed_coverage(fleet: dict[str, Named], signed: list[Zone]) -> None:
    results = compare_servers(fleet, derive_queries(signed), signed, dnssec=True)
    for name, comparison in results.items():
        assert comparison.unexplained == 0, (
            f"{name}: " + "\n".join(comparison.differences[:5]))
        assert set(comparison.classes) <= set(BIND_CLASSES), name
    memory = results["memory"]
    assert EXPECTED_CLASSES <= set(memory.classes), memory.summary()
    # Identical answers remain where nothing is signed: the root zone's refusal aside, a
    # DLZ answer to a DO query differs from native BIND's wherever native signs.
    assert memory.identical < memory.total


def test_verify_without_do_on_signed_coverage(fleet: dict[str, Named], signed: list[Zone]) -> None:
    """Without DO the signed set answers as the unsigned one did, beyond the explicit
    RRSIG and ANY queries and the transfers: query.c turns an RRSIG query into ANY whether
    or not DO is set, so rrsig-ttl and rrsig-at-delegation occur without it too."""
    results = compare_servers(fleet, derive_queries(signed), signed)
    for name, comparison in results.items():
        assert comparison.unexplained == 0, name
    assert set(results["memory"].classes) <= {
        "root-zone", "ds-parent-side", "soa-nxdomain-ttl", "any-at-ent", "any-at-delegation",
        "nsec-at-cname", "cross-zone-chain", "rrsig-ttl", "rrsig-at-delegation",
        "any-hides-dnssec"}


def test_verify_with_do_on_nsec3_zones(run_dir: Path, tmp_path: Path) -> None:
    """NSEC3: hashed owner names exist for DLZ and not for native BIND; negative answers lose
    their NSEC3 proofs."""
    zones = signed_copy([coverage_zones()[1], *generate(3, 10, 1)], tmp_path / "nsec3",
                        nsec3=True)
    with ExitStack() as stack:
        named = {d: stack.enter_context(serving(d, lambda: iter(zones), run_dir / f"n3-{d}"))
                 .server for d in REFERENCE_SERVERS}
        results = compare_servers(named, derive_queries(zones), zones, dnssec=True)
    memory = results["memory"]
    assert memory.unexplained == 0, "\n".join(memory.differences[:5])
    assert {"nsec3-owner", "nxdomain-no-proof", "nodata-no-proof"} <= set(memory.classes)


# Servers other than BIND that `run --signed` measures: they read the signed zone files
# themselves (NSD, Knot), so they answer with DO as any DNSSEC server does.
OTHERS = [s.name for s in SERVERS if s.same_answers_as is None and s.name not in REFERENCE_SERVERS
          and s.cannot_serve_signed is None and s.is_built()]


def test_other_servers_answer_the_signed_set_with_do_within_their_classes(
        run_dir: Path, signed: list[Zone], held: HeldStores, fleet: dict[str, Named]) -> None:
    assert OTHERS, "no NSD or Knot"
    _answer_within_their_classes(OTHERS, signed, run_dir / "o", held, fleet["native"],
                                 dnssec=True)


def _answer_within_their_classes(names: list[str], signed: list[Zone], run_dir: Path,
                                 held: HeldStores, native: Named, *,
                                 dnssec: bool = False) -> None:
    """Each server against native BIND (the fleet's) over the signed set: no unexplained
    difference, only its own classes, and every class it has for signed data seen."""
    with ExitStack() as stack:
        servers = {"native": native, **entered_at_once(
            stack, {d: held.named(d, run_dir / d) for d in names})}
        results = compare_servers(servers, derive_queries(signed), signed, dnssec=dnssec)
    for name, comparison in results.items():
        assert comparison.unexplained == 0, (
            f"{name}: " + "\n".join(comparison.differences[:8]))
        seen = {part for cls in comparison.classes for part in cls.split("+")}
        assert seen <= set(get_server(name).known_classes()), comparison.summary()
        # Each class seen only with signed data occurs here (the others: tests/test_others.py).
        assert set(get_server(name).dnssec_classes) <= seen, comparison.summary()


# The PowerDNS rows: their stores mark no zone PRESIGNED, so `run --signed` leaves them out, but
# without the DO bit they serve a signed zone's records as data, as they would a copy of any
# signed zone (`verify --zones` over signed zone files).
PDNS_ROWS = [s.name for s in SERVERS if s.cannot_serve_signed is not None and s.is_built()]


def test_powerdns_answers_the_signed_set_without_do_within_its_classes(
        run_dir: Path, signed: list[Zone], held: HeldStores, fleet: dict[str, Named]) -> None:
    assert PDNS_ROWS, "no PowerDNS row"
    _answer_within_their_classes(PDNS_ROWS, signed, run_dir / "p", held, fleet["native"])


# --- a validating resolver: delv with a trust anchor for the test zone's KSK -------------------


def delv(named: Named, anchors: Path, qname: str, rdtype: str) -> str:
    done = subprocess.run(["delv", "@127.0.0.1", "-p", str(named.port), "-a", str(anchors),
                           f"+root={COVERAGE_ORIGIN}", qname, rdtype],
                          capture_output=True, text=True, timeout=60, check=False)
    return done.stdout + done.stderr


def test_delv_validates_native_and_finds_the_dlz_answer_bogus(
        fleet: dict[str, Named], signed: list[Zone], tmp_path: Path) -> None:
    """Native BIND's answer is fully validated; the same data through the PostgreSQL driver
    (the fleet's, serving the signed set) has no RRSIG, so a resolver holding the zone's KSK
    cannot validate it: bogus."""
    assert shutil.which("delv"), "delv (bind9-dnsutils) is missing"
    cov = [z for z in signed if z.origin == COVERAGE_ORIGIN]
    anchors = tmp_path / "cov-anchor.conf"
    anchors.write_text(trust_anchors_text(cov))
    secure = delv(fleet["native"], anchors, "www.cov.test.", "A")
    assert "; fully validated" in secure and "192.0.2.80" in secure, secure
    bogus = delv(fleet["pg"], anchors, "www.cov.test.", "A")
    assert "fully validated" not in bogus, bogus
    assert "resolution failed" in bogus, bogus


# --- the classes' shapes, on answers written out by hand (no server) ----------------------------


def _answer(rcode: str = "NOERROR", aa: bool = True, answer: tuple = (), authority: tuple = (),
            additional: tuple = ()) -> Answer:
    return Answer(rcode, aa, False, frozenset(answer), frozenset(authority),
                  frozenset(additional))


_SIG = "13 3 300 20270101000000 20260101000000 1 cov.test. AAAA"
_SOA = ("cov.test.", 300, "SOA", "ns1.cov.test. hostmaster.cov.test. 1 3600 900 604800 300")
_FACTS = ZoneFacts(frozenset({COVERAGE_ORIGIN}), frozenset(), frozenset(), frozenset(),
                   frozenset({dns.name.from_text("abc.cov.test.")}))


@pytest.mark.check
def test_signed_shapes_are_named_and_anything_else_is_the_drivers() -> None:
    www = dns.name.from_text("www.cov.test.")
    a_rr = ("www.cov.test.", 300, "A", "192.0.2.80")
    native = _answer(answer=(a_rr, ("www.cov.test.", 300, "RRSIG", f"A {_SIG}")))
    assert classify((www, "A"), native, _answer(answer=(a_rr,)), _FACTS) == "unsigned-answer"
    # One record missing besides the signature: the driver's.
    assert classify((www, "A"), native, _answer(), _FACTS) == UNEXPLAINED
    nsec = ("cov.test.", 300, "NSEC", "www.cov.test. NS SOA RRSIG NSEC DNSKEY")
    nx = _answer("NXDOMAIN", authority=(_SOA, nsec, ("cov.test.", 300, "RRSIG", f"NSEC {_SIG}")))
    assert classify((www, "A"), nx, _answer("NXDOMAIN", authority=(_SOA,)),
                    _FACTS) == "nxdomain-no-proof"
    ns_rr = ("sub.cov.test.", 3600, "NS", "ns.sub.cov.test.")
    ds_rr = ("sub.cov.test.", 3600, "DS", "12345 8 2 AA")
    referral = _answer(aa=False, authority=(ns_rr, ds_rr,
                                            ("sub.cov.test.", 3600, "RRSIG", f"DS {_SIG}")))
    sub = dns.name.from_text("x.sub.cov.test.")
    assert classify((sub, "A"), referral, _answer(aa=False, authority=(ns_rr,)),
                    _FACTS) == "referral-no-ds"
    hashed = dns.name.from_text("abc.cov.test.")
    assert classify((hashed, "NSEC3"), nx, _answer(answer=(("abc.cov.test.", 300, "NSEC3",
                                                            "1 0 0 - DEF A"),)),
                    _FACTS) == "nsec3-owner"


@pytest.mark.check
def test_rrsig_ttls_merged_at_a_name_are_the_rrsig_ttl_class() -> None:
    sigs = (("www.cov.test.", 300, "RRSIG", f"A {_SIG}"),
            ("www.cov.test.", 60, "RRSIG", f"NSEC {_SIG}"))
    native = _answer(answer=sigs)
    merged = _answer(answer=tuple((o, 60, t, d) for o, _, t, d in sigs))
    www = dns.name.from_text("www.cov.test.")
    assert classify((www, "RRSIG"), native, merged, _FACTS) == "rrsig-ttl"
    assert classify_transfer(COVERAGE_ORIGIN, native, merged) == "rrsig-ttl"
    assert classify_transfer(COVERAGE_ORIGIN, native, _answer(answer=sigs[:1])) == UNEXPLAINED


@pytest.mark.check
def test_rrsig_query_at_a_delegation_is_the_rrsig_at_delegation_class() -> None:
    """Native refers; DLZ answers the parent side's RRSIG there with the apex NS."""
    sub = dns.name.from_text("sub.cov.test.")
    facts = replace(_FACTS, delegations=frozenset({sub}))
    ns_rr = ("sub.cov.test.", 3600, "NS", "ns.sub.cov.test.")
    nsec = ("sub.cov.test.", 300, "NSEC", "www.cov.test. NS RRSIG NSEC")
    nsec_sig = ("sub.cov.test.", 300, "RRSIG", f"NSEC {_SIG}")
    native = _answer(aa=False, authority=(ns_rr, nsec, nsec_sig))
    apex_ns = ("cov.test.", 3600, "NS", "ns1.cov.test.")
    glue = ("ns1.cov.test.", 3600, "A", "192.0.2.1")
    dlz = _answer(aa=False, answer=(nsec_sig,), authority=(apex_ns,), additional=(glue,))
    assert classify((sub, "RRSIG"), native, dlz, facts) == "rrsig-at-delegation"
    # A signature over a child-side type, or the child's NS in the authority: the driver's.
    child_sig = ("sub.cov.test.", 300, "RRSIG", f"A {_SIG}")
    assert classify((sub, "RRSIG"), native, replace(dlz, answer=frozenset({child_sig})),
                    facts) == UNEXPLAINED
    assert classify((sub, "RRSIG"), native, replace(dlz, authority=frozenset({ns_rr})),
                    facts) == UNEXPLAINED
    # Not a delegation in the data: the driver's too.
    assert classify((sub, "RRSIG"), native, dlz, _FACTS) == UNEXPLAINED
