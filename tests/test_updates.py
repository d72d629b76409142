"""RFC 2136 dynamic updates through the DLZ update path, against native BIND.

Native BIND and every writable DLZ driver load the coverage zones and take updates to cov.test
under one NamedUpdatePolicy (servers/update_policy.py: the key granted every name of the zone,
a second key named knows but grants nothing). Every update message goes to all of them, and then:
  - the names it changed answer as native BIND's do (bench.verify's comparison: a difference
    is allowed only in one of BIND's own DLZ-path classes), the SOA serial included;
  - a failed prerequisite (YXDOMAIN, YXRRSET, NXRRSET, NXDOMAIN) and a refused update (no key,
    a key not granted, an unknown key, a name outside the zone) answer the RCODE native BIND
    answers, and change nothing;
  - a record added two labels below a missing name makes the names between exist (NODATA),
    and deleting it makes them go again, as in native BIND;
  - a store failure in the middle of an update rolls all of it back (SERVFAIL), and an update
    while the store is down is SERVFAIL, nothing half-written;
  - an update touching a wildcard's owner after a miss below it (a delete, prerequisites, a
    duplicate add) is applied as native BIND applies it;
  - deletes and TTL changes of rows the loaders wrote (DHCID, HIP, CERT, IPSECKEY,
    NSEC3PARAM) and of rows in other spellings leave what native BIND leaves, and a delete that
    finds no stored row fails the update (SERVFAIL) rather than answer NOERROR;
  - the C normaliser of record text (drivers/common/rdtext.c, built alone as
    build/tools/rdtext_form) makes dnspython's and named's text of a sample of every type
    dnspython knows one text.
A writable driver is one row of WRITABLE (and of STORE_FAULTS and STORE_DOWN, how to make its
store fail one write, and fail altogether). bdbhpt's private mode takes no updates, and says so.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdata
import dns.rdatatype
import dns.tsig
import dns.update
import pytest

from base.errors import UserError
from base.paths import REPO_ROOT
from base.update_access import TsigKey
from bench.measure.serving import LoadedStore, loaded_store
from bench.verify.answers import Answer, ask, compare_answers, complete, transfer
from bench.verify.bind_classes import ZoneFacts
from bench.verify.compare import UNEXPLAINED, classify, classify_transfer, detail
from loaders.bdbhpt import read_mode
from servers import get_server
from servers.bindversion import selected
from servers.dlz import DlzNamed, stack_frames_of
from servers.named import Named, asan_environment, valgrind_errors, valgrind_wrapper
from servers.update_policy import NamedUpdatePolicy
from zonedata.derive import Query
from zonedata.generator import COVERAGE_ORIGIN, coverage_zones
from zonedata.model import Record, Zone, make_record, name_key

ZONE = COVERAGE_ORIGIN
KEY = TsigKey.generate("dlzbench-update")
OTHER_KEY = TsigKey.generate("dlzbench-other")  # known to named, granted nothing
UNKNOWN_KEY = TsigKey.generate("dlzbench-unknown")  # not known to named
POLICY = NamedUpdatePolicy((ZONE,), KEY, (OTHER_KEY,))
# DLZ drivers whose store takes updates.
WRITABLE = ["pg", "memory", "mysql", "bdbhpt-t", "bdbhpt-c"]
THREADS = 2


def _name(relative: str) -> dns.name.Name:
    return dns.name.from_text(relative, ZONE)


@dataclass
class Servers:
    zones: list[Zone]
    stores: dict[str, LoadedStore]
    named: dict[str, Named]


@pytest.fixture(scope="module")
def servers(run_dir: Path) -> Iterator[Servers]:
    zones = _with_stored_rows(coverage_zones())
    with ExitStack() as stack:
        stores, named = {}, {}
        for name in ["native", *WRITABLE]:
            kind = dataclasses.replace(get_server(name), updates=POLICY,
                                       **_server_options(name, run_dir))
            stores[name] = stack.enter_context(
                loaded_store(kind, lambda: iter(zones), run_dir / name))
            named[name] = stack.enter_context(stores[name].dns_server(run_dir / name,
                                                                      threads=THREADS))
        yield Servers(zones, stores, named)


MEMORY_SWITCHES = "memory-switches"


def _server_options(name: str, run_dir: Path) -> dict[str, dict[str, str]]:
    """The memory driver's switches for failing on demand (loaders/memory.py)."""
    if name != "memory":
        return {}
    switches = run_dir / MEMORY_SWITCHES
    switches.mkdir(parents=True, exist_ok=True)
    return {"options": {"outage_file": str(switches / "outage"),
                        "refuse_file": str(switches / "refuse")}}


# Rows every store holds besides the coverage zones. Of types whose text dnspython (the
# loaders) and named write differently: base64 in chunks or in one piece (DHCID, CERT,
# IPSECKEY), hexadecimal in lower or upper case (the HIP HIT, the NSEC3PARAM salt).
LOADER_ROWS = [
    make_record(_name("dhcid"), 300, "DHCID", "AAIBY2/AuCccgoJbsaxcQc9TUapptP69lOjxfNuVAA2kjEA="),
    make_record(_name("hip"), 300, "HIP",
                "2 200100107B1A74DF365639CC39F1D578 AwEAAbdxyhNuSutc5EMzxTs9LBPCIkOFH8cIvM4p9+L"
                "rV4e19WzK00+CI6zBCQTdtWsuxKbWIy87UOoJTwkUs7lBu+Upr1gsNrut79ryra+bSRGQb1slImA8"
                "YVJyuIDsj7kwzG7jnERNqnWxZ48AWkskmdHaVDP4BcelrTI3rMXdXF5D rvs.example.net."),
    make_record(_name("cert"), 300, "CERT",
                "PKIX 65535 RSASHA256 MIIBszCCARygAwIBAgIBADANBgkqhkiG9w0BAQUFADAAMB4XDTA5MDUy"
                "MjEwMzQxNVoXDTA5MDYyMTEwMzQxNVowADCBnzANBgkqhkiG9w0BAQEFAAOBjQAwgYkCgYEAxB2Y"
                "DUWSYo6sdPbm1Q=="),
    make_record(_name("ipseckey"), 300, "IPSECKEY",
                "10 1 2 192.0.2.38 AQNRU3mG7TVTO2BkR47usntb102uFJtugbo6BSGvgqt4AQ=="),
    make_record(_name("nsec3param"), 300, "NSEC3PARAM", "1 0 10 868BCF7ED4108929"),
    make_record(_name("ipseckey-ttl"), 300, "IPSECKEY",
                "10 3 2 gw.example.net. AQNRU3mG7TVTO2BkR47usntb102uFJtugbo6BSGvgqt4AQ=="),
]
# Rows in a spelling the loaders never write, as a database lent with --store-url may hold
# them (Record's text is stored as it is): named reads each as the same record as native
# BIND's zone file does, and writes it back in its own form.
FOREIGN_ROWS = [
    Record(_name("upper-aaaa"), 300, "AAAA", "2001:DB8:0:0::ABCD"),
    Record(_name("relative-mx"), 300, "MX", "010 Mail"),  # relative to the zone
    Record(_name("unquoted-txt"), 300, "TXT", r"unquoted words\ and\032blanks"),
]
# A row the stored-form normaliser cannot relate to named's text of it: RFC 3597's generic
# form of a type named knows (named writes 192.0.2.9).
GENERIC_ROW = Record(_name("generic-a"), 300, "A", "\\# 4 C0000209")


def _with_stored_rows(zones: list[Zone]) -> list[Zone]:
    return [dataclasses.replace(z, records=[*z.records, *LOADER_ROWS, *FOREIGN_ROWS,
                                            GENERIC_ROW])
            if z.origin == ZONE else z for z in zones]


# --- sending ----------------------------------------------------------------------------------


def update(key: TsigKey | None = KEY, zone: dns.name.Name = ZONE) -> dns.update.UpdateMessage:
    if key is None:
        return dns.update.UpdateMessage(zone)
    return dns.update.UpdateMessage(zone, keyring=key.keyring(),
                                    keyname=dns.name.from_text(key.name))


def send(named: Named, message: dns.message.Message, tcp: bool = True) -> str:
    """The response's RCODE; a TSIG error of the response by its exception's name."""
    how = dns.query.tcp if tcp else dns.query.udp
    try:
        response = how(message, named.host, port=named.port, timeout=10)
    except dns.tsig.PeerError as exc:
        return type(exc).__name__
    return dns.rcode.to_text(response.rcode())


def send_all(servers: Servers, make: Callable[[], dns.message.Message], tcp: bool = True
             ) -> dict[str, str]:
    """The same update (a new message each, signed afresh) to every server: their RCODEs."""
    return {name: send(named, make(), tcp) for name, named in servers.named.items()}


def same_rcodes(rcodes: dict[str, str], expected: str) -> None:
    assert rcodes["native"] == expected, rcodes
    assert all(rcode == rcodes["native"] for rcode in rcodes.values()), rcodes


# --- comparing --------------------------------------------------------------------------------


def answers_differ(servers: Servers, driver: str, queries: list[Query]) -> list[str]:
    """The queries the driver answers otherwise than native BIND, beyond BIND's own DLZ-path
    classes (as `bench verify` judges them)."""
    facts = ZoneFacts.of(servers.zones)
    classes = get_server(driver).known_classes()
    wrong = []
    for query in queries:
        diff = compare_answers(query, ask(servers.named["native"], query),
                               ask(servers.named[driver], query))
        if diff is not None and classify(query, *diff, facts, classes) == UNEXPLAINED:
            wrong.append(detail(query, diff))
    return wrong


def assert_as_native(servers: Servers, queries: list[Query]) -> None:
    for driver in WRITABLE:
        wrong = answers_differ(servers, driver, queries)
        assert not wrong, f"{driver}:\n" + "\n".join(wrong)


def answer(named: Named, name: dns.name.Name, rdtype: str) -> Answer:
    return complete(ask(named, (name, rdtype)))


def serials(servers: Servers) -> dict[str, int]:
    out = {}
    for name, named in servers.named.items():
        soa = [rr for rr in answer(named, ZONE, "SOA").answer if rr[2] == "SOA"]
        assert len(soa) == 1, (name, soa)
        out[name] = int(soa[0][3].split()[2])
    return out


@contextmanager
def changes_nothing(servers: Servers, probes: list[Query]) -> Iterator[None]:
    """The block leaves the probes' answers and every SOA serial as they were."""
    before = {name: [answer(n, *q) for q in probes] for name, n in servers.named.items()}
    serial = serials(servers)
    yield
    assert serials(servers) == serial
    for name, named in servers.named.items():
        assert [answer(named, *q) for q in probes] == before[name], name


SENTINEL = _name("sentinel")


def with_sentinel(message: dns.update.UpdateMessage) -> dns.update.UpdateMessage:
    """The message adds a record that must not exist after it failed."""
    message.add(SENTINEL, 300, "TXT", '"must not be written"')
    return message


# --- a successful update ----------------------------------------------------------------------

CHANGED = ["new", "www", "mail", "sip", "sshfp", "loc", "caa", "quoted", "@"]
CHANGED_TYPES = ["A", "AAAA", "TXT", "SSHFP", "LOC", "CAA", "MX", "SOA"]


def add_change_delete() -> dns.message.Message:
    m = update()
    m.add(_name("new"), 300, "A", "192.0.2.150")
    m.add(_name("www"), 300, "TXT", '"added by an update"')
    m.replace(_name("mail"), 1800, "A", "192.0.2.27")  # change: delete the RRset, add
    m.delete(_name("sip"))  # every RRset of the name: NXDOMAIN after
    m.delete(_name("www"), "A", "192.0.2.81")  # one RR
    m.delete(_name("sshfp"), "SSHFP", "1 1 123456789ABCDEF67890123456789ABCDEF67890")
    m.delete(_name("loc"), "LOC")  # an RRset, which named deletes RR by RR
    m.delete(_name("caa"))
    m.add(_name("quoted"), 60, "TXT", r'"semi;colon" "q\"uote" "back\\slash" "\200"')
    m.add(ZONE, 300, "TXT", '"apex, added"')
    return m


def test_add_change_delete_answer_as_native(servers: Servers) -> None:
    before = serials(servers)
    same_rcodes(send_all(servers, add_change_delete), "NOERROR")
    after = serials(servers)
    assert after["native"] == before["native"] + 1, (before, after)
    assert after == {name: after["native"] for name in after}, after
    assert_as_native(servers, [(_name(n) if n != "@" else ZONE, t)
                               for n in CHANGED for t in CHANGED_TYPES])
    for driver in WRITABLE:
        wrong = transfer_differs(servers, driver)
        assert wrong is None, f"{driver}: {wrong}"


def transfer_differs(servers: Servers, driver: str) -> str | None:
    native = transfer(servers.named["native"], ZONE)
    other = transfer(servers.named[driver], ZONE)
    if native == other:
        return None
    classes = get_server(driver).known_classes()
    diff = (native, other)
    return None if classify_transfer(ZONE, *diff, classes) != UNEXPLAINED else \
        detail((ZONE, "AXFR"), diff)


def stored_zones(loaded: LoadedStore) -> list[Zone] | None:
    """What the store holds now, as its loader reads it: for bdbhpt the home of the server's
    mode, the only one its updates change (schemas/bdb.md); None for memory, whose updates
    stay in named and never reach its file (schemas/memory.md)."""
    if loaded.loader.name == "memory":
        return None
    if loaded.loader.name == "bdbhpt":
        return read_mode(loaded.target, loaded.server.options["mode"])
    return list(loaded.loader.read_back(loaded.target))


def test_records_are_stored_as_the_loaders_write_them(servers: Servers) -> None:
    """What an update wrote reads back in the loaders' form (zonedata.model.from_rdata)."""
    same_rcodes(send_all(servers, _stored_form_update), "NOERROR")
    expected = {(name_key(r.owner), r.ttl, r.rdtype, r.rdata) for r in STORED_FORM}
    for driver in WRITABLE:
        zones = stored_zones(servers.stores[driver])
        if zones is None:
            continue
        zone = next(z for z in zones if z.origin == ZONE)
        assert expected <= set(zone.canonical()), driver


STORED_FORM = [
    make_record(_name("form"), 300, "TXT", r'"a;b" "q\"x" "\200\001" "it' + "'" + 's"'),
    make_record(_name("form"), 300, "SSHFP", "1 2 " + "AB" * 32),
    # A target sharing no suffix with the zone: dnspython compresses it to nothing, so the
    # case on the wire is this one (a compressed suffix takes the zone name's spelling).
    make_record(_name("form"), 300, "MX", "10 Mail.Example.Net."),
    make_record(_name("form"), 300, "AAAA", "2001:DB8:0:0:0:0:0:1"),
    make_record(_name("form"), 300, "CAA", '0 issue "ca.example.net; x=1"'),
]


def _stored_form_update() -> dns.message.Message:
    m = update()
    for r in STORED_FORM:
        m.add(r.owner, r.ttl, r.rdtype, r.rdata)
    return m


def test_a_lookup_right_after_the_update_sees_it(servers: Servers) -> None:
    """No memo of the driver serves data older than a committed update, the apex (which
    named reads through the update zone without asking findzonedb) included."""
    for i in range(5):
        for driver in WRITABLE:
            answer(servers.named[driver], ZONE, "TXT")  # a memo of the apex's rows
        value = f'"round {i}"'
        same_rcodes(send_all(servers, lambda v=value: _add_apex_txt(v)), "NOERROR")
        for driver in WRITABLE:
            txts = {rr[3] for rr in answer(servers.named[driver], ZONE, "TXT").answer}
            assert value in txts, (driver, txts)


def _add_apex_txt(value: str) -> dns.message.Message:
    m = update()
    m.add(ZONE, 300, "TXT", value)
    return m


# --- empty non-terminals ---------------------------------------------------------------------


ENT_QUERIES = [(_name(n), t) for n in ["x.y.newent", "y.newent", "newent", "q.p", "p",
                                       "a.b.c", "b.c", "c"] for t in ["TXT", "A"]]


def _ent_adds() -> dns.message.Message:
    m = update()
    m.add(_name("x.y.newent"), 300, "TXT", '"two labels below a missing name"')
    m.add(_name("p"), 300, "TXT", '"p"')
    m.add(_name("q.p"), 300, "TXT", '"q.p"')
    return m


def _ent_deletes() -> dns.message.Message:
    m = update()
    m.delete(_name("p"))  # p keeps q.p below it: NODATA
    m.delete(_name("x.y.newent"))  # the last name below newent: all three go
    m.delete(_name("a.b.c"))  # the coverage zone's two ENTs go with it
    return m


def _ent_last_delete() -> dns.message.Message:
    m = update()
    m.delete(_name("q.p"))
    return m


def test_empty_non_terminals_follow_adds_and_deletes(servers: Servers) -> None:
    same_rcodes(send_all(servers, _ent_adds), "NOERROR")
    for name in ["y.newent", "newent"]:
        got = answer(servers.named["native"], _name(name), "TXT")
        assert got.rcode == "NOERROR" and not got.answer, (name, got.describe())
    assert_as_native(servers, ENT_QUERIES)

    same_rcodes(send_all(servers, _ent_deletes), "NOERROR")
    assert answer(servers.named["native"], _name("p"), "TXT").rcode == "NOERROR"
    for name in ["y.newent", "newent", "b.c", "c"]:
        assert answer(servers.named["native"], _name(name), "TXT").rcode == "NXDOMAIN", name
    assert_as_native(servers, ENT_QUERIES)

    same_rcodes(send_all(servers, _ent_last_delete), "NOERROR")
    assert answer(servers.named["native"], _name("p"), "TXT").rcode == "NXDOMAIN"
    assert_as_native(servers, ENT_QUERIES)


# --- wildcards ------------------------------------------------------------------------------
# sdlz looks for a wildcard after every name it does not find; native BIND's update code sees
# the name itself only. A lookup of "*.<ancestor>" inside an update is then either one of
# sdlz's probes or the update's own lookup of the wildcard's owner, and must never be taken
# for the other (modelled on BIND's nsupdate system test, which updates wildcard owners).


def rrs(named: Named, name: dns.name.Name, rdtype: str) -> list[tuple[int, str]]:
    """Every RR of the answer (TTL, rdata), one per RR as it came off the wire: an RR served
    twice, or with two TTLs, stays visible (a parsed RRset would merge them)."""
    query = dns.message.make_query(name, rdtype)
    query.flags &= ~dns.flags.RD
    response = dns.query.tcp(query, named.host, port=named.port, timeout=10,
                             one_rr_per_rrset=True)
    return sorted((rrset.ttl, rd.to_text()) for rrset in response.answer
                  if rrset.rdtype == dns.rdatatype.from_text(rdtype) for rd in rrset)


def assert_rrs_as_native(servers: Servers, queries: list[Query]) -> None:
    """Each driver serves exactly native BIND's RRs (count and TTLs too) for the queries."""
    for name, rdtype in queries:
        native = rrs(servers.named["native"], name, rdtype)
        for driver in WRITABLE:
            assert rrs(servers.named[driver], name, rdtype) == native, (driver, name, rdtype)


def _wildcard(label: str) -> dns.update.UpdateMessage:
    """`*.<label>` made with a TXT and an A record."""
    m = update()
    m.add(_name(f"*.{label}"), 300, "TXT", '"wild"')
    m.add(_name(f"*.{label}"), 300, "A", "192.0.2.30")
    return m


def _wildcard_queries(label: str) -> list[Query]:
    return [(_name(f"{n}{label}"), t) for n in ["*.", "x.", "y.", ""] for t in ["TXT", "A"]]


def test_a_wildcard_rrset_deleted_after_an_add_below_it(servers: Servers) -> None:
    """'add x.wa A' then 'delete *.wa TXT' in one message: the TXT goes, as in native BIND,
    and stops being served at every name the wildcard covers."""
    same_rcodes(send_all(servers, lambda: _wildcard("wa")), "NOERROR")

    def add_then_delete() -> dns.message.Message:
        m = update()
        m.add(_name("x.wa"), 300, "A", "192.0.2.31")
        m.delete(_name("*.wa"), "TXT")
        return m

    before = serials(servers)
    same_rcodes(send_all(servers, add_then_delete), "NOERROR")
    assert not answer(servers.named["native"], _name("y.wa"), "TXT").answer
    assert serials(servers) == {name: s + 1 for name, s in before.items()}
    assert_as_native(servers, _wildcard_queries("wa"))
    assert_rrs_as_native(servers, _wildcard_queries("wa"))


@pytest.mark.parametrize(("case", "rcode"), [("absent name, present wildcard", "NOERROR"),
                                             ("present name under a wildcard", "NXDOMAIN"),
                                             ("present RRset under a wildcard", "NXRRSET")])
def test_prerequisites_see_the_wildcard_owner_and_only_it(servers: Servers, case: str,
                                                          rcode: str) -> None:
    """'x.wb not in use' then '*.wb TXT exists' holds (native BIND: NOERROR), and a wildcard
    makes no name below it exist for a prerequisite."""
    same_rcodes(send_all(servers, lambda: _wildcard("wb")), "NOERROR")
    marker = _name(f"marker-{case.split()[0]}-{rcode}.wb-result")

    def prerequisites() -> dns.message.Message:
        m = update()
        if case == "absent name, present wildcard":
            m.absent(_name("x.wb"))
            m.present(_name("*.wb"), "TXT")
        elif case == "present name under a wildcard":
            m.present(_name("x.wb"))
        else:
            m.present(_name("x.wb"), "TXT")
        m.add(marker, 300, "TXT", '"the prerequisites held"')
        return m

    same_rcodes(send_all(servers, prerequisites), rcode)
    assert_as_native(servers, [(marker, "TXT"), *_wildcard_queries("wb")])


def test_an_add_at_a_wildcard_after_a_miss_is_checked_for_duplicates(servers: Servers) -> None:
    """After a name under the wildcard was not found, adding the wildcard's own TXT again is a
    duplicate (named ignores it), and adding it with another TTL changes the RRset's TTL."""
    same_rcodes(send_all(servers, lambda: _wildcard("wc")), "NOERROR")

    def add_again(ttl: int) -> dns.message.Message:
        m = update()
        m.add(_name("x.wc"), 300, "A", "192.0.2.32")
        m.add(_name("*.wc"), ttl, "TXT", '"wild"')
        return m

    for ttl in (300, 600):
        same_rcodes(send_all(servers, lambda t=ttl: add_again(t)), "NOERROR")
        assert rrs(servers.named["native"], _name("*.wc"), "TXT") == [(ttl, '"wild"')]
        assert_as_native(servers, _wildcard_queries("wc"))
        assert_rrs_as_native(servers, _wildcard_queries("wc"))


# --- deletes of stored rows ------------------------------------------------------------------
# named deletes an RR by handing the driver its own text of the RR it read (subrdataset); the
# driver finds the stored row that means that record (modelled on PowerDNS's dyndns regression
# tests, which delete records the backend was loaded with).


def _delete_rr(record: Record) -> Callable[[], dns.message.Message]:
    def make() -> dns.message.Message:
        m = update()
        m.delete(record.owner, record.rdtype, record.rdata)
        return m
    return make


def _delete_rrset(record: Record) -> Callable[[], dns.message.Message]:
    def make() -> dns.message.Message:
        m = update()
        m.delete(record.owner, record.rdtype)
        return m
    return make


@pytest.mark.parametrize("record", LOADER_ROWS[:5], ids=lambda r: r.rdtype)
def test_a_loader_written_row_is_deleted(servers: Servers, record: Record) -> None:
    """Deleting one RR that the loaders wrote: gone everywhere, the serial raised once."""
    before = serials(servers)
    same_rcodes(send_all(servers, _delete_rr(record)), "NOERROR")
    assert answer(servers.named["native"], record.owner, record.rdtype).rcode == "NXDOMAIN"
    assert serials(servers) == {name: s + 1 for name, s in before.items()}
    assert_as_native(servers, [(record.owner, record.rdtype), (record.owner, "ANY")])
    assert_rrs_as_native(servers, [(record.owner, record.rdtype)])


def test_a_ttl_change_of_a_loader_written_ipseckey(servers: Servers) -> None:
    """An add of the same IPSECKEY with another TTL: named deletes the stored RR and adds it
    again; it is then served once, with the new TTL."""
    record = LOADER_ROWS[5]

    def new_ttl() -> dns.message.Message:
        m = update()
        m.add(record.owner, 900, record.rdtype, record.rdata)
        return m

    same_rcodes(send_all(servers, new_ttl), "NOERROR")
    assert [ttl for ttl, _ in rrs(servers.named["native"], record.owner, "IPSECKEY")] == [900]
    assert_as_native(servers, [(record.owner, "IPSECKEY")])
    assert_rrs_as_native(servers, [(record.owner, "IPSECKEY")])


@pytest.mark.parametrize("record", FOREIGN_ROWS, ids=lambda r: str(r.owner).split(".")[0])
def test_a_row_in_another_spelling_is_deleted(servers: Servers, record: Record) -> None:
    """A row the loaders would have written otherwise (upper case, a name relative to the
    zone, a leading zero, strings unquoted): its RRset deleted, as in native BIND."""
    assert_as_native(servers, [(record.owner, record.rdtype)])  # served alike before
    same_rcodes(send_all(servers, _delete_rrset(record)), "NOERROR")
    assert answer(servers.named["native"], record.owner, record.rdtype).rcode == "NXDOMAIN"
    assert_as_native(servers, [(record.owner, record.rdtype)])


def test_a_delete_that_matches_no_stored_row_fails_the_update(servers: Servers) -> None:
    """named says the RR exists (it read it from the driver), but no stored row's text can be
    told to be that RR: the update is SERVFAIL and rolled back, the serial unchanged; it never
    answers NOERROR with the record still there."""
    def delete_generic() -> dns.message.Message:
        m = with_sentinel(update())  # written first, then rolled back
        m.delete(_name("txt2"))
        m.delete(GENERIC_ROW.owner, "A")
        return m

    probes = [*PROBES, (GENERIC_ROW.owner, "A")]
    drivers = Servers(servers.zones, servers.stores,
                      {d: n for d, n in servers.named.items() if d != "native"})
    with changes_nothing(drivers, probes):
        rcodes = send_all(drivers, delete_generic)
        assert set(rcodes.values()) == {"SERVFAIL"}, rcodes
    assert answer(servers.named["memory"], GENERIC_ROW.owner, "A").answer


# --- updates that change nothing -------------------------------------------------------------

PROBES = [(SENTINEL, "TXT"), (_name("www"), "A"), (_name("txt2"), "TXT")]


def _prereq(kind: str) -> dns.message.Message:
    m = update()
    if kind == "YXDOMAIN":
        m.absent(_name("www"))  # name not in use
    elif kind == "YXRRSET":
        m.absent(_name("www"), "A")  # RRset does not exist
    elif kind == "NXRRSET":
        m.present(_name("www"), "MX")  # RRset exists (value independent)
    elif kind == "NXRRSET-value":
        m.present(_name("www"), "A", "192.0.2.99")  # RRset exists (value dependent)
    elif kind == "NXDOMAIN":
        m.present(_name("no-such-name"))  # name in use
    m.delete(_name("txt2"))
    return with_sentinel(m)


@pytest.mark.parametrize("kind", ["YXDOMAIN", "YXRRSET", "NXRRSET", "NXRRSET-value",
                                  "NXDOMAIN"])
def test_a_failed_prerequisite_changes_nothing(servers: Servers, kind: str) -> None:
    with changes_nothing(servers, PROBES):
        same_rcodes(send_all(servers, lambda: _prereq(kind)), kind.split("-")[0])


def _signed_by(key: TsigKey | None) -> Callable[[], dns.message.Message]:
    def make() -> dns.message.Message:
        m = update(key)
        m.delete(_name("txt2"))
        return with_sentinel(m)
    return make


def _outside_the_zone() -> dns.message.Message:
    m = update()
    m.add(dns.name.from_text("outside.example.net."), 300, "A", "192.0.2.1")
    return with_sentinel(m)


@pytest.mark.parametrize(("case", "make", "tcp", "expected"), [
    ("unsigned over TCP", _signed_by(None), True, "REFUSED"),
    ("unsigned over UDP", _signed_by(None), False, "REFUSED"),
    ("a key not granted", _signed_by(OTHER_KEY), True, "REFUSED"),
    ("a key named does not know", _signed_by(UNKNOWN_KEY), True, "PeerBadKey"),
    ("a name outside the zone", _outside_the_zone, True, "NOTZONE"),
])
def test_a_refused_update_changes_nothing(servers: Servers, case: str,
                                          make: Callable[[], dns.message.Message], tcp: bool,
                                          expected: str) -> None:
    with changes_nothing(servers, PROBES):
        same_rcodes(send_all(servers, make, tcp), expected)


# --- store failures ----------------------------------------------------------------------------

FAIL_TEXT = '"the store refuses this row"'


@contextmanager
def _pg_refuses_a_row(loaded: LoadedStore) -> Iterator[None]:
    """A trigger makes PostgreSQL refuse to insert a record with FAIL_TEXT (an error of the
    store in the middle of the update's transaction)."""
    with loaded.loader.database.connect(loaded.target) as conn:
        conn.execute(f"""
            CREATE FUNCTION dlzbench_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.data = '{FAIL_TEXT}' THEN RAISE EXCEPTION 'refused by the test'; END IF;
                RETURN NEW;
            END $$""")
        conn.execute("CREATE TRIGGER dlzbench_refuse BEFORE INSERT ON records "
                     "FOR EACH ROW EXECUTE FUNCTION dlzbench_refuse()")
        conn.commit()
    try:
        yield
    finally:
        with loaded.loader.database.connect(loaded.target) as conn:
            conn.execute("DROP TRIGGER dlzbench_refuse ON records")
            conn.execute("DROP FUNCTION dlzbench_refuse()")
            conn.commit()


@contextmanager
def _mysql_refuses_a_row(loaded: LoadedStore) -> Iterator[None]:
    """A trigger makes MariaDB refuse to insert a record with FAIL_TEXT."""
    def run(statement: str) -> None:
        conn = loaded.loader.database.connect(loaded.target)
        try:
            conn.cursor().execute(statement)
        finally:
            conn.close()

    run("CREATE TRIGGER dlzbench_refuse BEFORE INSERT ON records FOR EACH ROW "
        f"IF NEW.data = '{FAIL_TEXT}' THEN SIGNAL SQLSTATE '45000' "
        "SET MESSAGE_TEXT = 'refused by the test'; END IF")
    try:
        yield
    finally:
        run("DROP TRIGGER dlzbench_refuse")


@contextmanager
def _memory_refuses_a_row(loaded: LoadedStore) -> Iterator[None]:
    """The memory driver's refuse_file names FAIL_TEXT."""
    refuse = Path(loaded.server.options["refuse_file"])
    refuse.write_text(FAIL_TEXT + "\n")
    try:
        yield
    finally:
        refuse.unlink()


# A transaction of another process that holds the write lock of the zone's owner list (of its
# live generation) in the transactional home until stdin closes: an update that adds a name
# waits for it (lock_timeout_ms) after its first writes, and fails.
HOLD_OWNER_LIST = """
import sys
from berkeleydb import db
from loaders.bdbhpt import DATA_FILE, ENV_FLAGS
env = db.DBEnv()
env.open(sys.argv[1], ENV_FLAGS["transactional"], 0o644)
zones, lists = db.DB(env), db.DB(env)
zones.open(DATA_FILE, "dns_zone", db.DB_UNKNOWN, db.DB_AUTO_COMMIT)
lists.open(DATA_FILE, "dns_xfr", db.DB_UNKNOWN, db.DB_AUTO_COMMIT)
txn = env.txn_begin()
gen = zones.get(sys.argv[2].encode(), txn=txn)
lists.put(gen, lists.get(gen, txn=txn, flags=db.DB_RMW), txn=txn)
print("holding", flush=True)
sys.stdin.read()
txn.abort()
"""


@contextmanager
def _holding(script: str, loaded: LoadedStore) -> Iterator[None]:
    """script run in a process of its own on the transactional home, until the block ends."""
    home = Path(loaded.target) / "transactional"
    holder = subprocess.Popen([sys.executable, "-c", script, str(home), name_key(ZONE)],
                              cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        yield
    finally:
        holder.communicate("")


# How each writable driver's store is made to fail one write of an update. None for bdbhpt-c:
# a concurrent data store has no lock time-out, so another writer's lock makes an update wait
# rather than fail, and its update writes a copy nobody reads before the commit's one put.
STORE_FAULTS = {"pg": _pg_refuses_a_row, "mysql": _mysql_refuses_a_row,
                "memory": _memory_refuses_a_row,
                "bdbhpt-t": lambda loaded: _holding(HOLD_OWNER_LIST, loaded)}


@pytest.mark.parametrize("driver", [d for d in WRITABLE if d in STORE_FAULTS])
def test_a_store_error_mid_update_rolls_all_of_it_back(servers: Servers, driver: str) -> None:
    named = servers.named[driver]

    def failing() -> dns.message.Message:
        m = with_sentinel(update())  # written first, then rolled back
        m.delete(_name("txt2"))
        m.add(_name("refused"), 300, "TXT", FAIL_TEXT)
        return m

    log_start = named.log_path.stat().st_size
    with changes_nothing(servers, PROBES):
        with STORE_FAULTS[driver](servers.stores[driver]):
            assert send(named, failing()) == "SERVFAIL"
    same_rcodes(send_all(servers, lambda: _add_apex_txt('"after the failure"')), "NOERROR")
    # Both said, though a moment apart: the store's reason and the rollback it caused (errors
    # are rate-limited per kind of message, not one a second for the whole driver).
    log = named.log_path.read_bytes()[log_start:].decode(errors="replace")
    lines = [line for line in log.splitlines() if f"dlz_{named_driver(driver)}:" in line]
    assert any("the update is rolled back" in line for line in lines), lines
    if driver in ("pg", "mysql"):
        assert any("refused by the test" in line for line in lines), lines


def named_driver(server: str) -> str:
    """The name the server's driver logs under (dlz_<name>: ...)."""
    kind = get_server(server)
    assert isinstance(kind, DlzNamed), server
    return kind.library_file.parent.name


def _until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@contextmanager
def _server_stopped(loaded: LoadedStore) -> Iterator[None]:
    loaded.target.stop()
    try:
        yield
    finally:
        loaded.target.start()


@contextmanager
def _memory_outage(loaded: LoadedStore) -> Iterator[None]:
    """The memory driver's outage_file exists: every call fails, as with a database down."""
    outage = Path(loaded.server.options["outage_file"])
    outage.touch()
    try:
        yield
    finally:
        outage.unlink()


# A transaction of another process that holds the write lock of the zone's dns_zone entry in
# the transactional home until stdin closes: every read of the zone waits (lock_timeout_ms)
# and fails, as with a writer stuck inside its transaction.
HOLD_ZONE = """
import sys
from berkeleydb import db
from loaders.bdbhpt import DATA_FILE, ENV_FLAGS
env = db.DBEnv()
env.open(sys.argv[1], ENV_FLAGS["transactional"], 0o644)
zones = db.DB(env)
zones.open(DATA_FILE, "dns_zone", db.DB_UNKNOWN, db.DB_AUTO_COMMIT)
txn = env.txn_begin()
key = sys.argv[2].encode()
zones.put(key, zones.get(key, txn=txn, flags=db.DB_RMW), txn=txn)
print("holding", flush=True)
sys.stdin.read()
txn.abort()
"""


# How each writable driver's store is made unavailable for a while.
STORE_DOWN = {"pg": _server_stopped, "mysql": _server_stopped, "memory": _memory_outage,
              "bdbhpt-t": lambda loaded: _holding(HOLD_ZONE, loaded)}


@pytest.mark.parametrize("driver", [d for d in WRITABLE if d in STORE_DOWN])
def test_an_update_while_the_store_is_down_is_servfail(servers: Servers, driver: str) -> None:
    loaded, named = servers.stores[driver], servers.named[driver]
    before = answer(named, SENTINEL, "TXT")
    with STORE_DOWN[driver](loaded):
        # Additions only: named checks a deletion of a whole name (a meta type) against the
        # policy by reading the name first, and answers a failed read there REFUSED itself
        # (ns/update.c: "rejected by secure update"), before the update reaches the driver.
        assert send(named, with_sentinel(update())) == "SERVFAIL"
    assert _until(lambda: answer(named, SENTINEL, "TXT").rcode != "SERVFAIL", 30)
    assert answer(named, SENTINEL, "TXT") == before
    # The update connection the outage broke is replaced: the next update goes through.
    same_rcodes(send_all(servers, lambda: _add_apex_txt('"after the outage"')), "NOERROR")


# --- who reads and who writes (pg) ------------------------------------------------------------


def _pg_sessions(loaded: LoadedStore) -> list[str]:
    """The user of every session of the pg driver's pool (application_name dlz_pg), sorted."""
    with loaded.loader.database.connect(loaded.target) as conn:
        rows = conn.execute("SELECT usename FROM pg_stat_activity "
                            "WHERE application_name = 'dlz_pg'").fetchall()
    return sorted(user for (user,) in rows)


def test_pg_reads_as_the_reader_and_only_its_update_connection_writes(servers: Servers) -> None:
    """With update_zones, the pg driver's queries and transfers run on connections logged in
    as dlz_reader, which may only read, and the update connection alone logs in as dlz_writer
    (issue 38: every connection logged in as the writer)."""
    same_rcodes(send_all(servers, lambda: _add_apex_txt('"written by the writer"')), "NOERROR")
    named = servers.named["pg"]
    for rdtype in ("SOA", "NS", "TXT"):
        assert answer(named, ZONE, rdtype).rcode == "NOERROR"
    sessions = _pg_sessions(servers.stores["pg"])
    assert sessions.count("dlz_writer") == 1 and set(sessions) == {"dlz_reader", "dlz_writer"}, \
        sessions


def test_an_update_whose_writer_cannot_log_in_takes_no_query_down(servers: Servers,
                                                                  run_dir: Path) -> None:
    """The update connection logs in as a role of its own; when it cannot (here a role whose
    password named was not given), the update is SERVFAIL, nothing is written, and queries
    are answered as before: the store is not taken for down on an update's account
    (drivers/common/pool.c: pool_checkout_update)."""
    loaded = servers.stores["pg"]
    kind = dataclasses.replace(get_server("pg"), updates=POLICY)
    body = kind.body(loaded.target, THREADS, extra={"writer_user": "dlz_unknown"})
    with Named(run_dir / "named-pg-no-writer", body, threads=THREADS,
               env=kind.client_env(loaded.target)) as named:
        assert send(named, with_sentinel(update())) == "SERVFAIL"
        assert answer(named, ZONE, "SOA").rcode == "NOERROR"
        assert answer(named, SENTINEL, "TXT").rcode == "NXDOMAIN"
        log = named.log_path.read_text(errors="replace")
    assert "cannot connect to the backend for an update" in log, log[-2000:]


# --- a store that cannot take updates while named serves -------------------------------------


def test_bdbhpt_private_mode_refuses_updates(servers: Servers, run_dir: Path) -> None:
    """A private Berkeley DB environment has no locking: asking for updates is a one-line
    error before anything starts, and the driver itself refuses update_zones at start-up."""
    private = dataclasses.replace(get_server("bdbhpt-p"), updates=POLICY)
    target = servers.stores["bdbhpt-t"].target  # the loader wrote every mode's home
    with pytest.raises(UserError, match="private mode takes no updates"):
        private.client_env(target)
    body = get_server("bdbhpt-p").body(target, 1, extra=POLICY.dlz_args())
    named = Named(run_dir / "named-bdbhpt-p-updates", POLICY.key_statements() + body)
    with pytest.raises(Exception, match="named"):
        with named:
            pass
    assert "mode=private takes no updates" in named.log_path.read_text(errors="replace")


# --- unsigned updates (the benchmark's rows without TSIG) --------------------------------------

UNSIGNED_POLICY = NamedUpdatePolicy((ZONE,), KEY, unsigned=True)


def _unsigned_add() -> dns.message.Message:
    m = update(None)
    m.add(_name("unsigned"), 300, "TXT", '"no key"')
    m.replace(_name("www"), 300, "A", "192.0.2.77")
    return m


@pytest.mark.parametrize("driver", WRITABLE)
def test_unsigned_updates_over_tcp_when_granted(run_dir: Path, driver: str) -> None:
    """update_unsigned=yes against native BIND's allow-update { any; }: an unsigned update
    over TCP is taken by both and answers alike; over UDP named refuses it for the DLZ zone
    before the driver is asked (a zone with an update policy), where native takes it."""
    zones = coverage_zones()
    named = {}
    with ExitStack() as stack:
        for name in ["native", driver]:
            kind = dataclasses.replace(get_server(name), updates=UNSIGNED_POLICY)
            loaded = stack.enter_context(loaded_store(kind, lambda: iter(zones),
                                                      run_dir / f"unsigned-{name}"))
            named[name] = stack.enter_context(loaded.dns_server(run_dir / f"unsigned-{name}",
                                                                threads=1))
        pair = Servers(zones, {}, named)
        same_rcodes(send_all(pair, _unsigned_add), "NOERROR")
        wrong = answers_differ(pair, driver, [(_name("unsigned"), "TXT"), (_name("www"), "A"),
                                              (ZONE, "SOA")])
        assert not wrong, "\n".join(wrong)
        assert send(named[driver], _unsigned_add(), tcp=False) == "REFUSED"


# --- memory checking ---------------------------------------------------------------------------

VALGRIND_SUPPRESSIONS = Path(__file__).parent / "data" / "valgrind.supp"
# As in test_drivers.py: libasan preloaded into a libpq client deadlocks in glibc's locale locks.
ASAN_IMPOSSIBLE = {"pg": "libasan preloaded into a libpq client deadlocks; pg is checked under "
                         "Valgrind"}
# Driver arguments for a named many times slower under Valgrind: the pg driver's connect
# deadline of 1 s was passed on this loaded machine (mysql has the same deadline).
VALGRIND_ARGS = {driver: {"connect_timeout_ms": "20000", "query_timeout_ms": "20000"}
                 for driver in ("pg", "mysql")}


def _valgrind_updates() -> list[tuple[dns.message.Message, str]]:
    """Updates through every path of update.c: adds with new ENTs, a change, deletes that
    settle markers, a wildcard's owner after a miss below it, deletes of rows in other
    spellings, a TTL change, a failed prerequisite, a refused key, a delete that finds no row
    (on a store holding the stored rows too: _with_stored_rows)."""
    adds, change, deletes, rows = update(), update(), update(), update()
    adds.add(_name("v.w.vg"), 300, "TXT", '"valgrind"')
    adds.add(_name("vg"), 300, "SSHFP", "1 1 " + "AB" * 20)
    change.replace(_name("www"), 300, "A", "192.0.2.88")
    deletes.delete(_name("v.w.vg"))
    deletes.delete(_name("vg"), "SSHFP", "1 1 " + "AB" * 20)
    deletes.delete(_name("loc"), "LOC")
    rows.add(_name("x.w"), 300, "A", "192.0.2.31")
    rows.delete(_name("*.w"), "TXT")
    for record in [*LOADER_ROWS[:5], *FOREIGN_ROWS]:
        rows.delete(record.owner, record.rdtype)
    rows.add(LOADER_ROWS[5].owner, 900, LOADER_ROWS[5].rdtype, LOADER_ROWS[5].rdata)
    failed = update()
    failed.present(_name("no-such-name"))
    failed.add(SENTINEL, 300, "TXT", '"x"')
    no_row = with_sentinel(update())
    no_row.delete(GENERIC_ROW.owner, "A")
    return [(adds, "NOERROR"), (change, "NOERROR"), (deletes, "NOERROR"), (rows, "NOERROR"),
            (failed, "NXDOMAIN"), (_signed_by(OTHER_KEY)(), "REFUSED"), (no_row, "SERVFAIL")]


@pytest.mark.slow
@pytest.mark.parametrize("driver", WRITABLE)
def test_valgrind_finds_nothing_in_the_update_path(run_dir: Path, driver: str) -> None:
    """named under Valgrind takes updates through the driver (its own store, so that the
    comparisons above are left alone); any memcheck error in our code fails the test."""
    if not Path("/usr/bin/valgrind").exists():
        pytest.skip("valgrind is not installed")
    kind = dataclasses.replace(get_server(driver), updates=POLICY)
    assert isinstance(kind, DlzNamed)
    report = run_dir / f"valgrind-updates-{driver}.log"
    with loaded_store(kind, lambda: iter(_with_stored_rows(coverage_zones())),
                      run_dir / f"vg-{driver}") as loaded:
        body = kind.body(loaded.target, 1, extra=VALGRIND_ARGS.get(driver, {}))
        with Named(run_dir / f"vg-{driver}" / "named", body, env=kind.client_env(loaded.target),
                   wrapper=valgrind_wrapper(report, [VALGRIND_SUPPRESSIONS])) as named:
            for message, expected in _valgrind_updates():
                assert send(named, message) == expected
            assert answer(named, _name("www"), "A").rcode == "NOERROR"
            assert answer(named, _name("w.vg"), "TXT").rcode == "NXDOMAIN"
    log = report.read_text(errors="replace")
    assert "ERROR SUMMARY" in log
    found = valgrind_errors(log, stack_frames_of(kind.library_file))
    assert not found, "\n\n".join(found[:3])


@pytest.fixture(scope="module")
def asan_built() -> None:
    done = subprocess.run(["make", "-s", f"-j{os.cpu_count() or 1}", "-C",
                           str(REPO_ROOT / "drivers"), "asan"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("driver", WRITABLE)
def test_asan_build_takes_updates(run_dir: Path, request: pytest.FixtureRequest,
                                  driver: str) -> None:
    """named loads the driver's AddressSanitizer build (libasan preloaded) and takes the same
    updates; any ASan report fails the test."""
    if driver in ASAN_IMPOSSIBLE:
        pytest.skip(ASAN_IMPOSSIBLE[driver])
    request.getfixturevalue("asan_built")  # compiled only for a driver that needs it
    kind = dataclasses.replace(get_server(driver), updates=POLICY)
    assert isinstance(kind, DlzNamed)
    asan = REPO_ROOT / "build" / "asan" / kind.library_file.parent.name / kind.library_file.name
    asan_dir = run_dir / f"asan-{driver}"
    asan_dir.mkdir(exist_ok=True)
    with loaded_store(kind, lambda: iter(_with_stored_rows(coverage_zones())),
                      asan_dir / "store") as loaded:
        body = kind.body(loaded.target, THREADS, library=asan)
        env = {**asan_environment(asan_dir), **kind.client_env(loaded.target)}
        with Named(asan_dir / "named", body, threads=THREADS, env=env) as named:
            for message, expected in _valgrind_updates():
                assert send(named, message) == expected
            log = named.log_path
    reports = sorted(asan_dir.glob("asan*"))
    assert not reports, reports[0].read_text(errors="replace")[:4000]
    assert "AddressSanitizer" not in log.read_text(errors="replace")


# --- the stored form of record text ------------------------------------------------------------
# An update stores named's text of a record in the loaders' form, and finds the row of a record
# named deletes by comparing the two texts in that form (drivers/common/rdtext.c). For a sample
# of every type dnspython knows (and variants where the two write differently), the C
# normaliser must make dnspython's text and named's text of the record one and the same text,
# which dnspython reads back as the same record. named's text is named-rrchecker -p's: it
# writes with dns_rdata_totext, the very style (flags 0, width 60, no origin) in which sdlz
# hands an update's RR to a driver (lib/dns/sdlz.c modrdataset).

_KEY = ("AwEAAbdxyhNuSutc5EMzxTs9LBPCIkOFH8cIvM4p9+LrV4e19WzK00+CI6zBCQTdtWsuxKbWIy87UOoJTwkUs7lBu"
        "+Upr1gsNrut79ryra+bSRGQb1slImA8YVJyuIDsj7kwzG7jnERNqnWxZ48AWkskmdHaVDP4BcelrTI3rMXdXF5D")
_SIG = ("MxFcby9k/yvedMfQgKzhH5er0Mu/vILz45IkskceFGgiWCn/GxHhai6VAuHAoNUz4YoU1tVfSCSqQYn6//11U6N"
        "ld80jEeC8aTrO+KKmCaY=")
_IPSEC = "AQNRU3mG7TVTO2BkR47usntb102uFJtugbo6BSGvgqt4AQ=="
_SHA256 = "26584835CA80C81C91999F31CFAF2A0E89D4FF1C8FAFD0DDB31A85C719277C13"
_SHA384 = ("FEBE3D4CE2EC2FFA4BA99D46CD69D6D29711E55217057BEE7EB1A7B6"
           "41A47BA7FED2DD5B97AE499FAFA4F22C6BD647DE")
_HIT = "200100107B1A74DF365639CC39F1D578"
_PGP = ("mQINBFit2jsBEADrbl5vjVxYeAE0g0IDYCBpHirv1Sjlqxx5gjtPhb2YhvyDMXjqwh2lAWq7JLgxZgu4uUa4gCbyjR"
        "AD8Ws7yPE4v4hfmfu/sA+9A1sEBOyJzeOtVbnnw4QnA4FlygWu2kMh9KmeNnh5dGXXqzK+HXuFEmzgebmmqtJYrHk8"
        "Zb1OILRscuWh2ISYJa8/qpo1i0Je88Z2uFsAeGsU+FLnx/mGyGtm5Ap26PygFaFhXe8lx9y1btRpBxk6aVy4X+5rcE"
        "WQ/v5HkTnFaHUzi/nOaCgIuzIUD6AbbKV7wnrlI9KHk29Eo/ooeCEBY7JzJCR+gSiaE+yHWgfFHG4+3oOmEfXnNnW8"
        "Yw==")

STORED_FORM_SAMPLES: list[tuple[str, str]] = [
    ("A", "192.0.2.1"),
    ("NS", "Ns1.Example.NET."),
    ("NS", r"\(odd\).name\.with\@.example."),
    ("CNAME", "Target.Example."),
    ("SOA", "ns1.example. Hostmaster.example. 2024010101 3600 900 1209600 300"),
    ("SOA", "ns1.example. hostmaster.example. 4294967295 0 0 0 0"),
    ("WKS", "10.0.0.1 6 0 1 2 21 23"),
    ("WKS", "192.0.2.1 17 53 67 68"),
    ("PTR", r"\000\255x.example."),
    ("HINFO", '"Generic PC clone" "NetBSD-1.4"'),
    ("HINFO", '"" ""'),
    ("MX", "10 Mail.example."),
    ("MX", "0 ."),
    ("TXT", r'"foo bar" "q\"uote" "semi;colon" "\000\255\127" "back\\slash"'),
    ("TXT", r'"" "\(x" "a\;b" "tab\009x"'),
    ("RP", "mbox.example. txt.example."),
    ("RP", ". ."),
    ("AFSDB", "1 afs.example."),
    ("X25", '"311061700956"'),
    ("ISDN", '"150862028003217" "004"'),
    ("RT", "10 relay.example."),
    ("NSAP", "0x47.0005.80.005A00.0000.0001.E133.FFFFFF000161.00"),
    ("NSAP-PTR", "foo.example."),
    ("PX", "10 map822.example. mapx400.example."),
    ("GPOS", '"-22.6882" "116.8652" "250.0"'),
    ("AAAA", "2001:db8::1:0:0:1"),
    ("AAAA", "::ffff:192.0.2.1"),
    ("AAAA", "::1"),
    ("AAAA", "::192.0.2.1"),
    ("LOC", "60 9 0.000 N 24 39 0.000 E 10.00m 20.00m 2000.00m 20.00m"),
    ("LOC", "52 22 23.000 N 4 53 32.000 E -2.00m"),
    ("LOC", "1 2 3.5 S 4 5 6.25 W 10.5m 0.5m"),
    ("LOC", "42 N 71 W 0m 1m 10000m 10m"),
    ("LOC", "0 0 0.000 N 0 0 0.000 E -100000.00m 90000000.00m 90000000.00m 90000000.00m"),
    ("LOC", "90 S 180 W 42849672.95m 0m 0m 0m"),
    ("SRV", "10 60 5060 sip.example."),
    ("NAPTR", r'100 10 "U" "E2U+sip" "!^.*$!sip:info@example.com!" .'),
    ("NAPTR", '100 50 "s" "http+I2L+I2C+I2R" "" _http._tcp.gatech.edu.'),
    ("KX", "10 kdc.example."),
    ("CERT", f"PKIX 65535 RSASHA256 {_SIG}"),
    ("CERT", f"65534 65535 254 {_SIG}"),
    # 4, 6, 7: names only dnspython knows (ECC, DSANSEC3SHA1 ...) or only named (NSEC3DSA ...)
    *(("CERT", f"1 0 {alg} AAAA") for alg in (0, 4, 6, 7, 9, 16, 252, 255)),
    *(("CERT", f"{kind} 0 8 AAAA") for kind in ("URI", "OID", "IACPKIX", 9, 65535)),
    ("DNAME", "dname-target.example."),
    ("APL", "1:192.168.32.0/21 !1:192.168.38.0/28 2:2001:db8::/32"),
    ("APL", ""),
    ("DS", f"12892 5 2 {_SHA256}"),
    ("DS", f"1 13 4 {_SHA384}"),
    ("SSHFP", f"4 2 {_SHA256}"),
    ("IPSECKEY", f"10 1 2 192.0.2.38 {_IPSEC}"),
    ("IPSECKEY", f"10 0 2 . {_IPSEC}"),
    ("IPSECKEY", f"10 2 2 2001:db8::1 {_IPSEC}"),
    ("IPSECKEY", f"10 3 2 Gw.Example.net. {_KEY}"),
    ("RRSIG", f"A 8 3 3600 20300102030405 20200102030405 2143 example. {_SIG}"),
    ("RRSIG", "TYPE65280 13 0 0 20300102030405 20200102030405 0 . MxFcby9k"),
    ("NSEC", "a.secure.example. NS SOA MX RRSIG DNSKEY LOC NSEC TYPE1234"),
    ("NSEC", ". A"),
    ("DNSKEY", f"257 3 8 {_KEY}"),
    ("DHCID", "AAIBY2/AuCccgoJbsaxcQc9TUapptP69lOjxfNuVAA2kjEA="),
    ("NSEC3", "1 1 10 D2CF0294C020CE6C 8FPNS2UCT7FBS643THP2B77PEQ77K6IU A NS SOA MX AAAA RRSIG"),
    ("NSEC3", "1 0 0 - 8FPNS2UCT7FBS643THP2B77PEQ77K6IU"),
    ("NSEC3PARAM", "1 0 10 868BCF7ED4108929"),
    ("NSEC3PARAM", "1 0 0 -"),
    ("TLSA", f"3 1 1 {_SHA256}"),
    ("TLSA", "3 1 2 " + "AB" * 64),
    ("SMIMEA", f"3 1 1 {_SHA256}"),
    ("HIP", f"2 {_HIT} {_KEY} rvs1.example.com. rvs2.example.com."),
    ("HIP", f"2 {_HIT} {_KEY}"),
    ("NINFO", '"ninfo text" "two"'),
    ("CDS", f"12892 5 2 {_SHA256}"),
    ("CDNSKEY", f"257 3 8 {_KEY}"),
    ("OPENPGPKEY", _PGP),
    ("CSYNC", "66 3 A NS AAAA"),
    ("CSYNC", "0 0"),
    ("ZONEMD", f"2018031500 1 1 {_SHA384}"),
    ("ZONEMD", "2018031500 1 240 " + "AB" * 20),
    ("SVCB", '1 Svc1.example. alpn="h2,h3" port=8004 ipv4hint=192.0.2.1,192.0.2.2 ech="Zm9vYmFy"'
             ' key65333=ex1'),
    ("SVCB", '1 . dohpath="/dns-query{?dns}" alpn=h2'),
    ("SVCB", r'1 . alpn="h\\,2,h3" key7="/q{?dns}"'),
    ("SVCB", r'1 . key65000="a\"b" port=53'),
    ("HTTPS", "1 . alpn=h3 mandatory=alpn,port port=8443 ipv6hint=2001:db8::1 no-default-alpn"),
    ("HTTPS", "0 svc.example."),
    ("SPF", '"v=spf1 -all"'),
    ("NID", "10 0014:4fff:ff20:ee64"),
    ("NID", "10 FFFF:0000:0001:0A0B"),
    ("L32", "10 10.1.2.0"),
    ("L64", "10 2001:0DB8:1140:1000"),
    ("L64", "10 0000:0000:0000:0000"),
    ("LP", "10 l64-subnet1.example.com."),
    ("EUI48", "00-00-5E-00-53-2A"),
    ("EUI64", "00-00-5E-EF-10-00-00-2A"),
    ("URI", '10 1 "ftp://ftp1.example.com/public"'),
    ("CAA", '0 issue "ca.example.net; policy=ev"'),
    ("CAA", r'0 issue "ca.example.net; x=\"y\""'),
    ("CAA", r'0 tbs "\000\031"'),  # dnspython reads CAA values as UTF-8: no byte >= 0x80
    ("AVC", '"app-name:WOLFGANG|app-class:OAM|business=yes"'),
    ("AMTRELAY", "10 0 3 Amtrelays.example.com."),
    ("AMTRELAY", "0 1 0 ."),
    ("AMTRELAY", "128 0 1 203.0.113.15"),
    ("AMTRELAY", "10 0 2 2600:1f16:17c:3950:47ac:cb79:62ba:702e"),
    ("RESINFO", "qnamemin exterr=15,16,17 infourl=https://resolver.example.com/guide"),
    ("WALLET", '"BTC" "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"'),
    ("DLV", f"12892 5 2 {_SHA256}"),
    ("TYPE65280", r"\# 3 ABCDEF"),
]


# (type, a row's text, named's text of a record, whether that is the row's record) in ZONE.
MATCH_FORM_CASES = [
    ("AAAA", "2001:DB8:0:0::ABCD", "2001:db8::abcd", True),
    ("MX", "010 Mail", "10 Mail.cov.test.", True),  # relative to the zone, as named reads it
    ("MX", "10 @", "10 cov.test.", True),
    ("SOA", "ns1 hostmaster 2024010101 1H 15M 1W 5m",
     "ns1.cov.test. hostmaster.cov.test. 2024010101 3600 900 604800 300", True),
    ("TXT", r"unquoted words\ and\032blanks", '"unquoted" "words and blanks"', True),
    ("DS", "12345 RSASHA256 2 ABCDEF 0123", "12345 8 2 ABCDEF0123", True),
    ("NS", r"\065b.Example.", "Ab.Example.", True),
    ("CNAME", "WWW.COV.TEST.", "www.cov.test.", True),  # names compare without case
    ("CERT", "1 0 NSEC3RSASHA1 AAAA", "PKIX 0 NSEC3RSASHA1 AAAA", True),
    ("TXT", '"A"', '"a"', False),  # strings keep their case
    ("DHCID", "AAIB", "aaib", False),  # base64 too
    ("AAAA", "2001:db8::1", "2001:db8::2", False),
    ("MX", "10 mail.", "10 mail.cov.test.", False),
    ("A", r"\# 4 C0000209", "192.0.2.9", False),  # the generic form: not related (fails safe)
]


@pytest.mark.parametrize(("rdtype", "row", "named", "same"), MATCH_FORM_CASES)
def test_the_match_form_tells_which_row_named_means(
        match_form: Callable[[list[tuple[str, str]]], list[str]], rdtype: str, row: str,
        named: str, same: bool) -> None:
    """A delete finds the row of the RR named names by their match forms (rdtext.c)."""
    of_row, of_named = match_form([(rdtype, row), (rdtype, named)])
    assert (of_row == of_named) == same, (of_row, of_named)


def _named_rrchecker(rdtype: str, text: str) -> subprocess.CompletedProcess[str]:
    """named-rrchecker -p of the BIND the suite runs, given the record."""
    argv = selected(need_drivers=False).command(["/usr/bin/named-rrchecker", "-p"],
                                                with_drivers=False)
    return subprocess.run(argv, input=f"IN {rdtype} {text}\n", capture_output=True, text=True,
                          check=False, timeout=60)


def _named_text(rdtype: str, text: str) -> str:
    """named's text of the record."""
    done = _named_rrchecker(rdtype, text)
    assert done.returncode == 0, (rdtype, text, done.stderr)
    return done.stdout.rstrip("\n").split("\t", 2)[2]


RDTEXT_FORM = REPO_ROOT / "build" / "tools" / "rdtext_form"


@pytest.fixture(scope="module")
def rdtext_built() -> None:
    """drivers/tools/rdtext_form.c, built with AddressSanitizer and UndefinedBehaviorSanitizer."""
    built = subprocess.run(["make", "-s", "-C", str(REPO_ROOT / "drivers"), "tools"],
                           capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stdout + built.stderr


def _rdtext_forms(args: list[str], pairs: list[tuple[str, str]]) -> list[str]:
    """The C normaliser's form of each (type, text) pair."""
    done = subprocess.run([str(RDTEXT_FORM), *args], capture_output=True, text=True, check=False,
                          input="".join(f"{rdtype}\t{text}\n" for rdtype, text in pairs),
                          timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.split("\n")[:-1]
    assert len(out) == len(pairs), done.stdout
    return out


@pytest.fixture(scope="module")
def stored_form(rdtext_built: None) -> Callable[[list[tuple[str, str]]], list[str]]:
    """rdata_store_form of (type, text) pairs."""
    return lambda pairs: _rdtext_forms([], pairs)


@pytest.fixture(scope="module")
def match_form(rdtext_built: None) -> Callable[[list[tuple[str, str]]], list[str]]:
    """rdata_match_form of (type, text) pairs in ZONE."""
    return lambda pairs: _rdtext_forms(["--match", name_key(ZONE)], pairs)


@pytest.mark.parametrize(("rdtype", "text"), STORED_FORM_SAMPLES,
                         ids=[f"{t}-{i}" for i, (t, _) in enumerate(STORED_FORM_SAMPLES)])
def test_the_stored_form_of_dnspython_and_named_text_is_one(
        stored_form: Callable[[list[tuple[str, str]]], list[str]], rdtype: str,
        text: str) -> None:
    record = dns.rdata.from_text("IN", rdtype, text)
    loaders = record.to_text(origin=None, relativize=False)  # zonedata.model.from_rdata's
    named = _named_text(rdtype, text)
    from_loaders, from_named = stored_form([(rdtype, loaders), (rdtype, named)])
    assert from_named == from_loaders, f"loaders: {loaders}\nnamed:   {named}"
    assert dns.rdata.from_text("IN", rdtype, from_named) == record, from_named
    assert stored_form([(rdtype, from_named)]) == [from_named]  # a fixed point


@pytest.mark.parametrize("text", [
    "0 N 0 E 99999999999999999999m",  # beyond a long: strtol saturates, then * 100
    "0 N 0 E 1m 92233720368547758m",
    "0 N 0 E 1m 1m 1m 9223372036854775807.99m",
    "0 N 0 E 42849672.96m",  # named's bounds, each passed by the least step
    "0 N 0 E 42849673m",
    "0 N 0 E -100000.01m",
    "0 N 0 E 0m 90000001m",
    "0 N 0 E 0m 1m 90000001m",
    "0 N 0 E 0m 1m 1m 90000001.00m",
    "0 N 0 E 0m -1m",  # a negative size
])
def test_the_stored_form_keeps_loc_text_beyond_loc_s_range(
        stored_form: Callable[[list[tuple[str, str]]], list[str]], text: str) -> None:
    """LOC lengths beyond what RFC 1876 can hold (altitude -100000.00 m to 42849672.95 m,
    sizes and precisions up to 90000000 m) are no LOC named reads (named-rrchecker refuses
    each): the text stays as it is, and nothing overflows (the tool aborts on any undefined
    behaviour)."""
    assert _named_rrchecker("LOC", text).returncode != 0
    assert stored_form([("LOC", text)]) == [text]


@pytest.mark.parametrize("blank", [" ", "\t", "\t ", " \t\t", "  "])
def test_the_generic_form_is_read_after_any_blank(
        stored_form: Callable[[list[tuple[str, str]]], list[str]], blank: str) -> None:
    """RFC 3597's "\\#" followed by a tab or several blanks is the generic form to named as
    after one space: the stored form of the text is that of named's text of it, and a fixed
    point (docs/method/fuzz.md, "What the harnesses found")."""
    text = f"\\#{blank}3{blank}ABCDEF"
    named = _named_text("TYPE65280", text)
    assert named == "\\# 3 ABCDEF"
    ours, of_named = stored_form([("TYPE65280", text), ("TYPE65280", named)])
    assert ours == of_named == "\\# 3 abcdef"
    assert stored_form([("TYPE65280", ours)]) == [ours]
