"""The private slapd, the dlz LDAP schema and the `ldap` store's two load paths."""

from __future__ import annotations

import dataclasses
import stat
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import dns.name
import ldap
import pytest

from base.errors import UserError
from base.process import new_run_dir
from bench.measure.loading import timed_load
from databases.slapd import LdapServer, ensure_suffix_entry
from loaders.ldap import (
    INDEXES,
    LOADER,
    SCHEMA_FILE,
    SUFFIX,
    filter_value,
    node_dn,
    node_entries,
    zone_attrs,
    zone_dn,
)
from servers import get_server
from servers.dlz import DlzNamed
from zonedata.model import Zone, canonical_set, make_record


def _slapd(base: Path, *, indexes: Sequence[str] = INDEXES,
           schema_files: Sequence[Path] = (SCHEMA_FILE,), log_level: str = "0") -> LdapServer:
    return LdapServer(new_run_dir("slapd", base), suffix=SUFFIX, schema_files=schema_files,
                 indexes=indexes, log_level=log_level)


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


@pytest.fixture(scope="module")
def store_target(run_dir: Path) -> Iterator[LdapServer]:
    with LOADER.database.server(new_run_dir("store", run_dir)) as target:
        yield target


@pytest.fixture
def fresh_target(run_dir: Path) -> Iterator[LdapServer]:
    """A store with no zones yet, so that its first load takes the slapadd path."""
    with LOADER.database.server(new_run_dir("fresh", run_dir)) as target:
        yield target


# -- the server ---------------------------------------------------------------------------

def test_start_answers_and_stop_leaves_nothing(run_dir: Path) -> None:
    slapd = _slapd(run_dir)
    with slapd:
        assert slapd.version().startswith("slapd 2.5.")
        conn = slapd.connect()
        assert conn.whoami_s() == f"dn:{slapd.bind_dn}"
        conn.unbind_s()
        over_socket = ldap.initialize(slapd.ldapi_uri)
        over_socket.simple_bind_s(slapd.bind_dn, slapd.password)
        over_socket.unbind_s()
        pids = slapd.pids()
        assert pids and all(_alive(p) for p in pids)
        assert slapd.uri.startswith("ldap://127.0.0.1:")
    assert not any(_alive(p) for p in pids)
    assert slapd.pids() == []
    with pytest.raises(ldap.SERVER_DOWN):
        ldap.initialize(slapd.uri).simple_bind_s(slapd.bind_dn, slapd.password)


def test_wrong_password_is_refused(run_dir: Path) -> None:
    with _slapd(run_dir) as slapd, pytest.raises(ldap.INVALID_CREDENTIALS):
        ldap.initialize(slapd.uri).simple_bind_s(slapd.bind_dn, "wrong")


def test_two_instances_are_independent(run_dir: Path) -> None:
    with _slapd(run_dir) as one, _slapd(run_dir) as two:
        assert one.port != two.port
        ensure_suffix_entry(one)
        assert one.connect().search_s(SUFFIX, ldap.SCOPE_BASE)
        with pytest.raises(ldap.NO_SUCH_OBJECT):
            two.connect().search_s(SUFFIX, ldap.SCOPE_BASE)


def test_restart_keeps_port_and_data(run_dir: Path) -> None:
    with _slapd(run_dir) as slapd:
        ensure_suffix_entry(slapd)
        port, old_pids = slapd.port, slapd.pids()
        slapd.restart()
        assert slapd.port == port
        assert not any(_alive(p) for p in old_pids)
        assert slapd.connect().search_s(SUFFIX, ldap.SCOPE_BASE)


def test_bad_config_raises_user_error_with_slapds_words(run_dir: Path) -> None:
    slapd = _slapd(run_dir, indexes=["noSuchAttribute eq"])
    with pytest.raises(UserError, match='index attribute "noSuchAttribute" undefined'):
        slapd.start()
    assert slapd.pids() == []


@pytest.mark.check
def test_missing_schema_file_is_a_user_error(run_dir: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        _slapd(run_dir, schema_files=[run_dir / "nope.schema"])


def test_schema_is_loaded(run_dir: Path) -> None:
    with _slapd(run_dir) as slapd:
        conn = slapd.connect()
        subschema = conn.search_s("cn=Subschema", ldap.SCOPE_BASE, "(objectClass=*)",
                                  ["attributeTypes", "objectClasses"])[0][1]
        types = b"\n".join(subschema["attributeTypes"])
        classes = b"\n".join(subschema["objectClasses"])
        for name in (b"dlzId", b"dlzZoneName", b"dlzOwner", b"dlzZone", b"dlzRecord",
                     b"dlzXfrClient"):
            assert b"NAME '" + name + b"'" in types
        assert b"NAME 'dlzZoneEntry'" in classes and b"NAME 'dlzNodeEntry'" in classes


# -- filters and indexes ------------------------------------------------------------------

# Keys with every character that means something in a filter or a DN, and their near misses.
HOSTILE_KEYS = ["*.h.test", "a*b.h.test", "ab.h.test", "axb.h.test", "a.h.test",
                "\\(x\\).h.test", "x.h.test", "\\\\.h.test", "b\\,c+d=e;f<g>h.h.test",
                'q\\"u.h.test', "nul\\000.h.test", "h.test"]


def _zone_keys_matching(conn: ldap.ldapobject.LDAPObject, value: str | bytes) -> list[str]:
    found = conn.search_s(SUFFIX, ldap.SCOPE_SUBTREE, f"(dlzZoneName={filter_value(value)})",
                          ["dlzZoneName"])
    return [attrs["dlzZoneName"][0].decode() for _, attrs in found]


def test_escaped_filter_matches_only_the_exact_key(store_target: LdapServer) -> None:
    conn = store_target.connect()
    for key in HOSTILE_KEYS:
        conn.add_s(zone_dn(key), list(zone_attrs(key, 1).items()))
    for key in HOSTILE_KEYS:
        assert _zone_keys_matching(conn, key) == [key]
    assert _zone_keys_matching(conn, "*") == []
    assert _zone_keys_matching(conn, "a.h.test\x00") == []
    assert _zone_keys_matching(conn, b"nul\x00.h.test") == []
    assert _zone_keys_matching(conn, "é.h.test") == []
    assert _zone_keys_matching(conn, "H.TEST") == []  # keys are matched case-exactly


def test_driver_searches_are_indexed(run_dir: Path) -> None:
    with _slapd(run_dir, log_level="stats,filter") as slapd:
        ensure_suffix_entry(slapd)
        LOADER.update(_awkward_zone(), slapd)
        conn = slapd.connect()
        start = slapd.log_path.stat().st_size
        names = ["deep.er.sub.awk.test", "er.sub.awk.test", "sub.awk.test", "awk.test", "test"]
        terms = [f"(dlzZoneName={filter_value(n)})" for n in names]
        terms += [f"(dlzOwner={filter_value(p + n)})" for n in names for p in ("", "*.")]
        found = conn.search_s(SUFFIX, ldap.SCOPE_SUBTREE, f"(|{''.join(terms)})",
                              ["dlzZoneName", "dlzOwner", "dlzZone", "dlzRecord"])
        # The zone, its apex, *.sub, deep.er.sub and the ENTs er.sub and sub.
        assert len(found) == 6
        conn.search_s(SUFFIX, ldap.SCOPE_SUBTREE, "(dlzZone=awk.test)", ["dlzRecord"])
        conn.search_s(SUFFIX, ldap.SCOPE_SUBTREE, "(dlzZoneName=awk.test)", ["dlzXfrClient"])
        indexed_log = slapd.log_path.read_bytes()[start:]
        # A filter on an attribute without an index is what the check must catch.
        conn.search_s(SUFFIX, ldap.SCOPE_SUBTREE, "(dlzRecord=A 300 192.0.2.1)", ["1.1"])
        unindexed_log = slapd.log_path.read_bytes()[start + len(indexed_log):]
    assert b"SRCH base=" in indexed_log and b"not indexed" not in indexed_log
    assert b"(dlzRecord) not indexed" in unindexed_log


# -- the store ----------------------------------------------------------------------------

def _awkward_zone(serial: int = 1) -> Zone:
    """A small zone with escaped, wildcard, long and empty-non-terminal owners."""
    origin = dns.name.from_text("awk.test")
    long_label = bytes(range(0x80, 0x80 + 63))
    rows = [
        ("awk.test", 3600, "SOA", f"ns.awk.test. h.awk.test. {serial} 7200 900 1209600 300"),
        ("awk.test", 3600, "NS", "ns.awk.test."),
        ("ns.awk.test", 300, "A", "192.0.2.1"),
        ("*.sub.awk.test", 60, "TXT", '"a  b" "c\\"d" "\\255\\000"'),
        ("*.sub.awk.test", 60, "TXT", '"a b"'),
        ("deep.er.sub.awk.test", 60, "AAAA", "2001:db8::1"),
        ("we\\.ird\\032n\\(a\\)me.awk.test", 60, "CNAME", "ns.awk.test."),
        ("x.awk.test", 60, "APL", ""),
    ]
    records = [make_record(dns.name.from_text(o), t, k, r) for o, t, k, r in rows]
    long_owner = dns.name.Name((long_label,) * 3 + origin.labels)
    records.append(make_record(long_owner, 60, "A", "192.0.2.2"))
    return Zone(origin, records)


def _changed(zone: Zone) -> Zone:
    new = make_record(dns.name.from_text("new.awk.test"), 5, "MX", "10 ns.awk.test.")
    kept = [r for r in zone.records if r.rdtype != "TXT"]
    return dataclasses.replace(zone, records=[*kept, new])


def test_awkward_zone_through_slapadd_and_online_replace(fresh_target: LdapServer) -> None:
    zone = _awkward_zone()
    pids_before = fresh_target.pids()
    stats = timed_load(LOADER, [zone], fresh_target)
    assert (stats.zones, stats.records) == (1, len(zone.records))
    # The first load went through slapadd: slapd was stopped and started again.
    assert set(fresh_target.pids()).isdisjoint(pids_before)
    assert canonical_set(LOADER.read_back(fresh_target)) == canonical_set([zone])
    LOADER.load([_changed(zone)], fresh_target)
    assert canonical_set(LOADER.read_back(fresh_target)) == canonical_set([_changed(zone)])
    LOADER.load([zone], fresh_target)
    assert canonical_set(LOADER.read_back(fresh_target)) == canonical_set([zone])


def test_ent_markers_are_stored_and_dropped_on_read_back(fresh_target: LdapServer) -> None:
    zone = _awkward_zone()
    LOADER.load([zone], fresh_target)
    conn = fresh_target.connect()
    for owner in ("er.sub.awk.test", "sub.awk.test"):
        entry = conn.search_s(node_dn(zone.key, owner, 1), ldap.SCOPE_BASE)[0][1]
        assert entry["dlzRecord"] == [b"ENT 0 "]
    assert not [r for z in LOADER.read_back(fresh_target) for r in z.records if r.rdtype == "ENT"]


def test_zone_twice_in_one_bulk_load_is_refused(fresh_target: LdapServer) -> None:
    with pytest.raises(UserError, match="appears twice"):
        LOADER.load([_awkward_zone(), _awkward_zone(2)], fresh_target)
    assert list(LOADER.read_back(fresh_target)) == []


def test_entries_of_other_generations_are_ignored_then_removed(store_target: LdapServer) -> None:
    zone = _awkward_zone()
    LOADER.update(zone, store_target)  # live generation g
    conn = store_target.connect()
    live = int(conn.search_s(zone_dn(zone.key), ldap.SCOPE_BASE)[0][1]["dlzGeneration"][0])
    # What an interrupted replace leaves behind: entries of generation g+1, never made live.
    stray_zone = Zone(zone.origin, [make_record(dns.name.from_text("stray.awk.test"), 1, "A",
                                                "192.0.2.9")])
    [(stray, attrs)] = node_entries(stray_zone, live + 1, SUFFIX).items()
    conn.add_s(stray, list(attrs.items()))
    back = {z.key: z for z in LOADER.read_back(store_target)}
    assert back[zone.key].canonical() == zone.canonical()
    LOADER.update(_changed(zone), store_target)
    back = {z.key: z for z in LOADER.read_back(store_target)}
    assert back[zone.key].canonical() == _changed(zone).canonical()
    children = conn.search_s(zone_dn(zone.key), ldap.SCOPE_ONELEVEL, "(objectClass=*)",
                             ["dlzGeneration"])
    assert {a["dlzGeneration"][0] for _, a in children} == {str(live + 1).encode()}
    assert stray not in {dn for dn, _ in children}


def test_readers_never_see_a_mix_during_online_replace(store_target: LdapServer) -> None:
    old, new = _awkward_zone(1), _changed(_awkward_zone(2))
    LOADER.update(old, store_target)
    versions = {tuple(old.canonical()), tuple(new.canonical())}
    seen: list[tuple[object, ...]] = []
    done = threading.Event()

    def read_repeatedly() -> None:
        while not done.is_set():
            zone = next(z for z in LOADER.read_back(store_target) if z.key == old.key)
            seen.append(tuple(zone.canonical()))

    reader = threading.Thread(target=read_repeatedly)
    reader.start()
    try:
        for i in range(20):
            LOADER.update(new if i % 2 == 0 else old, store_target)
    finally:
        done.set()
        reader.join()
    assert seen and set(seen) <= versions


def test_coverage_zones_round_trip_both_paths(fresh_target: LdapServer) -> None:
    generator = pytest.importorskip("zonedata.generator")
    zones = generator.coverage_zones()
    LOADER.load(zones, fresh_target)  # empty directory: slapadd
    assert canonical_set(LOADER.read_back(fresh_target)) == canonical_set(zones)
    LOADER.load(zones, fresh_target)  # zones present: one transaction per zone
    assert canonical_set(LOADER.read_back(fresh_target)) == canonical_set(zones)


def test_dlz_clause_names_the_driver_and_server(store_target: LdapServer) -> None:
    server = get_server("ldap")
    assert isinstance(server, DlzNamed)
    clause = server.body(store_target, connections=4)
    assert clause.startswith('dlz "ldap" {\n\tdatabase "dlopen /')
    assert "drivers/ldap/dlz_ldap.so connections=4 " in clause
    assert (f"uri={store_target.ldapi_uri} base={SUFFIX} binddn={store_target.driver_dn} "
            f"password_file={store_target.password_file}\";" in clause)
    # The reader's password reaches the driver in a 0600 file, never in named.conf or
    # named's environment.
    assert store_target.driver_password not in clause
    assert store_target.password_file.read_text() == store_target.driver_password + "\n"
    assert stat.S_IMODE(store_target.password_file.stat().st_mode) == 0o600
    assert LOADER.database.client_env(store_target) == {}
    assert LOADER.database.server_pids(store_target) == store_target.pids()
