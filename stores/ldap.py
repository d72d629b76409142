"""The `ldap` store: zones in a private OpenLDAP slapd (back-mdb), read by drivers/ldap.

DIT (schemas/ldap/README.md explains why):

    o=dlz
      dlzId=<hash(zone key)>              dlzZoneEntry: dlzZoneName, dlzGeneration, dlzXfrClient*
        dlzId=<gen>-<hash(owner key)>     dlzNodeEntry: dlzOwner, dlzZone, dlzGeneration,
                                                        dlzRecord*

Keys never appear in DNs (RDNs are hashes of them), so no RFC 4514 escaping is ever needed
and long escaped names never hit back-mdb's 511-byte limit on a stored RDN. Every record of
one owner is one value `TYPE TTL rdata` of the owner entry's dlzRecord; an empty non-terminal
is an owner entry whose only value is `ENT 0 ` (empty rdata).

Loading into a directory with no zones writes one LDIF file and adds it offline with
`slapadd -q`. Otherwise each zone is replaced online by generation: the new records are added
as entries of generation G+1 (which readers ignore), one modify of the zone entry makes G+1 the
live generation, then generation G is deleted. Readers keep only the owner entries of the
zone entry's live generation, and each search is one LMDB snapshot, so they see the old zone
or the new one, never a mix. (LDAP transactions, RFC 5805, would do this in one step, but
slapd 2.5.13 crashes in txn_preop under them.)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import ldap
import ldif
from ldap.ldapobject import LDAPObject

from base.errors import UserError
from base.netns import DatabaseHost
from base.paths import SCHEMA_DIR
from stores.ldap_server import LdapServer
from stores.store import DEFAULT_XFR_CLIENTS, CacheReading, Store
from zonedata.model import (
    ENT_TYPE,
    Record,
    Zone,
    empty_nonterminals,
    key_to_name,
    name_key,
)

SUFFIX = "o=dlz"
SCHEMA_FILE = SCHEMA_DIR / "ldap" / "dlz.schema"
# objectClass: back-mdb ORs (objectClass=referral) into every search filter, so without this
# index every search is a full scan. The others are exactly what the driver filters on.
INDEXES = ("objectClass eq", "dlzZoneName eq", "dlzOwner eq", "dlzZone eq")

ZONE_CLASS = b"dlzZoneEntry"
NODE_CLASS = b"dlzNodeEntry"
ENT_VALUE = f"{ENT_TYPE} 0 ".encode()

# Bytes a filter value may carry unescaped (RFC 4515 requires only \ * ( ) NUL; everything
# outside printable ASCII is escaped too so that the filter string is plain ASCII).
_FILTER_SAFE = frozenset(range(0x21, 0x7F)) - set(b"\\*()")

Attrs = dict[str, list[bytes]]


def entry_id(key: str) -> str:
    """The RDN value standing for a key: 128 bits of BLAKE2b, hex."""
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


def zone_dn(zone_key: str, suffix: str = SUFFIX) -> str:
    return f"dlzId={entry_id(zone_key)},{suffix}"


def node_dn(zone_key: str, owner_key: str, generation: int, suffix: str = SUFFIX) -> str:
    return f"dlzId={generation}-{entry_id(owner_key)},{zone_dn(zone_key, suffix)}"


def filter_value(value: str | bytes) -> str:
    """An assertion value escaped per RFC 4515 (every byte outside a safe set as \\XX)."""
    raw = value.encode() if isinstance(value, str) else value
    return "".join(chr(b) if b in _FILTER_SAFE else f"\\{b:02x}" for b in raw)


def record_value(rdtype: str, ttl: int, rdata: str) -> bytes:
    return f"{rdtype} {ttl} {rdata}".encode()


def parse_record_value(value: bytes) -> tuple[str, int, str]:
    rdtype, ttl, rdata = value.decode().split(" ", 2)
    return rdtype, int(ttl), rdata


def zone_attrs(zone_key: str, generation: int | None) -> Attrs:
    """A zone entry; without a generation it is not live yet (readers skip it)."""
    attrs = {
        "objectClass": [ZONE_CLASS],
        "dlzId": [entry_id(zone_key).encode()],
        "dlzZoneName": [zone_key.encode()],
        "dlzXfrClient": [c.encode() for c in DEFAULT_XFR_CLIENTS],
    }
    if generation is not None:
        attrs["dlzGeneration"] = [str(generation).encode()]
    return attrs


def node_entries(zone: Zone, generation: int, suffix: str) -> dict[str, Attrs]:
    """DN -> attributes of every owner entry of a zone, ENT markers included.

    Built whole before anything is written, so a zone whose records fail to iterate never
    reaches the directory.
    """
    values: dict[str, dict[bytes, None]] = {}
    for rec in zone.records:
        # A dict keeps first-seen order and drops exact duplicates, which LDAP would reject.
        values.setdefault(name_key(rec.owner), {})[
            record_value(rec.rdtype, rec.ttl, rec.rdata)] = None
    for ent in empty_nonterminals(zone):
        values.setdefault(name_key(ent), {})[ENT_VALUE] = None
    zone_key = zone.key
    gen = str(generation).encode()
    return {
        node_dn(zone_key, owner, generation, suffix): {
            "objectClass": [NODE_CLASS],
            "dlzId": [f"{generation}-{entry_id(owner)}".encode()],
            "dlzOwner": [owner.encode()],
            "dlzZone": [zone_key.encode()],
            "dlzGeneration": [gen],
            "dlzRecord": list(vals),
        }
        for owner, vals in values.items()
    }


def search_iter(conn: LDAPObject, base: str, scope: int, filterstr: str,
                attrs: list[str]) -> Iterator[tuple[str, dict[str, list[bytes]]]]:
    """Entries of a search as they arrive, so a million zones never sit in memory at once."""
    msgid = conn.search_ext(base, scope, filterstr, attrs)
    finished = False
    try:
        while not finished:
            rtype, rdata, _, _ = conn.result3(msgid, all=0)
            finished = rtype == ldap.RES_SEARCH_RESULT
            yield from rdata
    finally:
        if not finished:  # the caller stopped early or it failed: drop the rest
            with contextlib.suppress(ldap.LDAPError):
                conn.abandon(msgid)


class LdapStore(Store[LdapServer]):
    name = "ldap"
    has_server = True

    @contextmanager
    def server(self, run_dir: Path, *,
               db_host: DatabaseHost | None = None) -> Iterator[LdapServer]:
        slapd = LdapServer(run_dir, suffix=SUFFIX, schema_files=[SCHEMA_FILE], indexes=INDEXES,
                           db_host=db_host)
        with slapd:
            ensure_suffix_entry(slapd)
            yield slapd

    def load(self, zones: Iterable[Zone], target: LdapServer) -> None:
        with bound(target) as conn:
            empty = not has_zones(conn, target.suffix)
            if not empty:
                for zone in zones:
                    replace_zone(conn, zone, target.suffix)
        if empty:
            bulk_load(target, zones)

    def update(self, zone: Zone, target: LdapServer) -> None:
        # Always online: the bulk path stops slapd, which named may be reading from.
        with bound(target) as conn:
            replace_zone(conn, zone, target.suffix)

    def read_back(self, target: LdapServer) -> Iterator[Zone]:
        with bound(target) as conn:
            for _, attrs in search_iter(conn, target.suffix, ldap.SCOPE_ONELEVEL,
                                        f"(objectClass={ZONE_CLASS.decode()})",
                                        ["dlzZoneName"]):
                zone = read_zone(conn, target.suffix, attrs["dlzZoneName"][0].decode())
                if zone is not None:
                    yield zone

    def dlz_args(self, target: LdapServer, options: Mapping[str, str]) -> dict[str, str]:
        return {"uri": _driver_uri(target), "base": target.suffix, "binddn": target.bind_dn,
                "password": target.password}

    @contextmanager
    def round_trips(self, target: LdapServer) -> Iterator[Callable[[], object]]:
        conn = ldap.initialize(_driver_uri(target))
        conn.simple_bind_s(target.bind_dn, target.password)
        try:
            yield conn.whoami_s
        finally:
            conn.unbind_s()

    def restart_server(self, target: LdapServer) -> None:
        target.restart()

    def tcp_endpoint(self, target: LdapServer) -> tuple[str, int]:
        return urlsplit(target.uri).hostname or "127.0.0.1", target.port

    def server_pids(self, target: LdapServer) -> list[int]:
        return target.pids()

    def cache_reading(self, target: LdapServer, options: Mapping[str, str]) -> CacheReading:
        # back-mdb has no cache of its own: slapd maps the database file and reads it through
        # the kernel's page cache, so what it holds is the file's share resident in its map.
        resident, size = target.mapped_data()
        return CacheReading("slapd back-mdb: data.mdb resident in slapd's mapping "
                            "(/proc/PID/smaps Rss) / the file's size", None,
                            resident_bytes=resident, mapped_bytes=size)


@contextmanager
def bound(slapd: LdapServer) -> Iterator[LDAPObject]:
    """A bound connection, unbound at the end, except after Ctrl-C: the interrupt may have
    landed inside a python-ldap call, between its taking the connection's lock and its
    try/finally, and unbinding would then wait for that lock forever. The socket closes with
    the process anyway."""
    conn = slapd.connect()
    interrupted = False
    try:
        yield conn
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if not interrupted:
            conn.unbind_s()


def _driver_uri(target: LdapServer) -> str:
    """Where the DLZ driver reaches slapd: a proxy in front of it, else its unix socket (ldapi:
    measured 4.6% -> 5.8% of native against loopback TCP), else (on a host of its own) TCP."""
    if target.via is not None:
        return f"ldap://{target.via[0]}:{target.via[1]}"
    return target.ldapi_uri or target.uri


def ensure_suffix_entry(slapd: LdapServer) -> None:
    rdn_value = slapd.suffix.split(",", 1)[0].split("=", 1)[1]
    with bound(slapd) as conn, contextlib.suppress(ldap.ALREADY_EXISTS):
        # A restarted directory keeps its data.
        conn.add_s(slapd.suffix, [("objectClass", [b"organization"]),
                                  ("o", [rdn_value.encode()])])


def has_zones(conn: LDAPObject, suffix: str) -> bool:
    try:
        found = conn.search_ext_s(suffix, ldap.SCOPE_ONELEVEL,
                                  f"(objectClass={ZONE_CLASS.decode()})", ["1.1"], sizelimit=1)
    except ldap.SIZELIMIT_EXCEEDED:
        return True
    return bool(found)


# -- bulk path: LDIF + slapadd --------------------------------------------------------------

def bulk_load(slapd: LdapServer, zones: Iterable[Zone]) -> None:
    """Stream every zone into one LDIF file, then slapadd it; nothing is added on a failure."""
    ldif_path = slapd.run_dir / f"load-{os.getpid()}-{secrets.token_hex(3)}.ldif"
    try:
        with open(ldif_path, "w", encoding="ascii") as out:
            written = write_ldif(ldif.LDIFWriter(out), zones, slapd.suffix)
        if written:
            slapd.bulk_load(ldif_path)
    finally:
        ldif_path.unlink(missing_ok=True)


def write_ldif(writer: ldif.LDIFWriter, zones: Iterable[Zone], suffix: str) -> int:
    """Every zone's entries as LDIF; how many zones were written."""
    # 64 bits of each zone's id: enough to tell a million zones apart, small to keep.
    seen: set[int] = set()
    for zone in zones:
        key = zone.key
        nodes = node_entries(zone, 1, suffix)
        tag = int(entry_id(key)[:16], 16)
        if tag in seen:
            raise UserError(f"zone {key} appears twice in one load into an empty directory")
        seen.add(tag)
        writer.unparse(zone_dn(key, suffix), zone_attrs(key, 1))
        for dn, attrs in nodes.items():
            writer.unparse(dn, attrs)
    return len(seen)


# -- online path: write a new generation, switch, delete the old one -------------------------

def replace_zone(conn: LDAPObject, zone: Zone, suffix: str) -> None:
    """Replace one zone whole; a reader sees all old or all new records, never a mix."""
    key = zone.key
    zdn = zone_dn(key, suffix)
    live = live_generation(conn, zdn)
    new_gen = 1 if live is None else live + 1
    nodes = node_entries(zone, new_gen, suffix)
    children = children_by_generation(conn, zdn)
    # Leftovers of an interrupted earlier load: never live, so safe to drop first.
    delete_entries(conn, [dn for dn, gen in children.items() if gen != live])
    if live is None and zone_entry_missing(conn, zdn):
        conn.add_s(zdn, list(zone_attrs(key, None).items()))
    written: list[str] = []
    try:
        for dn, attrs in nodes.items():
            conn.add_s(dn, list(attrs.items()))
            written.append(dn)
    except Exception:
        # Not live yet, so invisible; removed now if possible, else by the next replace (after
        # Ctrl-C always by the next replace: see bound()).
        with contextlib.suppress(ldap.LDAPError):
            delete_entries(conn, written)
        raise
    switch = zone_attrs(key, new_gen)
    conn.modify_s(zdn, [(ldap.MOD_REPLACE, "dlzGeneration", switch["dlzGeneration"]),
                        (ldap.MOD_REPLACE, "dlzXfrClient", switch["dlzXfrClient"])])
    delete_entries(conn, [dn for dn, gen in children.items() if gen == live])


def live_generation(conn: LDAPObject, zdn: str) -> int | None:
    """The zone entry's live generation; None if the entry is missing or not live yet."""
    try:
        found = conn.search_s(zdn, ldap.SCOPE_BASE, "(objectClass=*)", ["dlzGeneration"])
    except ldap.NO_SUCH_OBJECT:
        return None
    values = found[0][1].get("dlzGeneration")
    return int(values[0]) if values else None


def zone_entry_missing(conn: LDAPObject, zdn: str) -> bool:
    try:
        conn.search_s(zdn, ldap.SCOPE_BASE, "(objectClass=*)", ["1.1"])
    except ldap.NO_SUCH_OBJECT:
        return True
    return False


def children_by_generation(conn: LDAPObject, zdn: str) -> dict[str, int]:
    """DN -> generation of every owner entry under a zone entry (none if it is missing)."""
    try:
        found = conn.search_s(zdn, ldap.SCOPE_ONELEVEL, "(objectClass=*)", ["dlzGeneration"])
    except ldap.NO_SUCH_OBJECT:
        return {}
    return {dn: int(attrs["dlzGeneration"][0]) for dn, attrs in found}


def delete_entries(conn: LDAPObject, dns: Iterable[str]) -> None:
    for dn in dns:
        conn.delete_s(dn)


# -- reading back ---------------------------------------------------------------------------

def read_zone(conn: LDAPObject, suffix: str, zone_key: str) -> Zone | None:
    """One zone read the way the driver transfers it: one indexed search returning the zone
    entry and every owner entry, of which only the live generation's count. None if not live.
    """
    value = filter_value(zone_key)
    live: int | None = None
    nodes: list[dict[str, list[bytes]]] = []
    for _, attrs in search_iter(conn, suffix, ldap.SCOPE_SUBTREE,
                                f"(|(dlzZoneName={value})(dlzZone={value}))",
                                ["dlzZoneName", "dlzGeneration", "dlzOwner", "dlzRecord"]):
        if "dlzZoneName" in attrs:
            live = int(attrs["dlzGeneration"][0]) if "dlzGeneration" in attrs else None
        else:
            nodes.append(attrs)
    if live is None:
        return None
    zone = Zone(key_to_name(zone_key))
    for attrs in nodes:
        if int(attrs["dlzGeneration"][0]) != live:
            continue
        owner = key_to_name(attrs["dlzOwner"][0].decode())
        for rec in attrs.get("dlzRecord", []):
            rdtype, ttl, rdata = parse_record_value(rec)
            if rdtype != ENT_TYPE:
                zone.records.append(Record(owner, ttl, rdtype, rdata))
    return zone


STORE = LdapStore()
