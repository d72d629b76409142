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
`slapadd -q`; into a server the suite did not start (--store-url ldap=...), whose files it
cannot reach, it adds the entries online instead, pipelined (a batch of zones' entries sent
without waiting for each answer), each zone made live by one modify once whole.
Otherwise each zone is replaced online by generation: the new records are added as entries
of generation G+1 (which readers ignore), one modify of the zone entry makes G+1 the live
generation, then generation G is deleted. Readers keep only the owner entries of the
zone entry's live generation, and each search is one LMDB snapshot, so they see the old zone
or the new one, never a mix. (LDAP transactions, RFC 5805, would do this in one step, but
slapd 2.5.13 crashes in txn_preop under them.)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Iterable, Iterator, Mapping

import dns.name
import ldap
import ldif
from ldap.ldapobject import LDAPObject

from base.errors import UserError
from base.paths import SCHEMA_DIR
from databases.slapd import (
    ExternalLdap,
    LdapDatabase,
    LdapServer,
    LdapTarget,
    bound,
    driver_uri,
    ldap_message,
)
from databases.url import StoreUrl, listed
from loaders import sql
from loaders.loader import DEFAULT_XFR_CLIENTS, Loader
from loaders.writes import ADD_ZONE, DELETE_ZONE, Change, MarkerOps, StoreWriter, fix_markers
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


class DlzEntries:
    """The suite's zone and owner entries in a lent server's subtree, as the LDAP database
    claims it (databases.database's LentSchema); the server's schema and the suffix entry are
    the database's to check."""

    def check_lent(self, conn: LDAPObject, url: StoreUrl, *, overwrite: bool) -> None:
        """Refuse a subtree holding others' entries unless `overwrite`."""
        foreign = _others_entries(conn, url)
        if foreign and not overwrite:
            count = (f"more than {_FOREIGN_SHOWN} entries" if len(foreign) > _FOREIGN_SHOWN
                     else f"{len(foreign)} {'entry' if len(foreign) == 1 else 'entries'}")
            raise url.error(f"suffix {url.database} holds {count} the suite did not "
                            f"create ({listed(foreign)}); lend the suite a subtree of its own, "
                            "or add --store-url-overwrite to put its entries beside them")

    def hold_empty(self, conn: LDAPObject, url: StoreUrl) -> None:
        _hold_own_subtree_empty(conn, url)


class LdapLoader(Loader[LdapTarget]):
    name = "ldap"
    no_writes = ("not written yet (its way: one LDAP modify "
                 "of the owner entry's dlzRecord values a change)")
    database = LdapDatabase(name, suffix=SUFFIX, schema_files=[SCHEMA_FILE], indexes=INDEXES,
                            lent=DlzEntries())

    def load(self, zones: Iterable[Zone], target: LdapTarget) -> None:
        with bound(target) as conn:
            if has_zones(conn, target.suffix):
                for zone in zones:
                    replace_zone(conn, zone, target.suffix)
                return
            if isinstance(target, ExternalLdap):
                # slapadd writes the database files, offline: a lent server is loaded online.
                online_bulk_load(conn, zones, target.suffix, target.url)
                return
        bulk_load(target, zones)

    def update(self, zone: Zone, target: LdapTarget) -> None:
        # Always online: the bulk path stops slapd, which named may be reading from.
        with bound(target) as conn:
            replace_zone(conn, zone, target.suffix)

    def writer(self, target: LdapTarget) -> StoreWriter:
        """LDAP modifies on a connection of the writer's own (as the loading DN)."""
        return LdapWriter(target)

    def read_back(self, target: LdapTarget) -> Iterator[Zone]:
        with bound(target) as conn:
            for _, attrs in search_iter(conn, target.suffix, ldap.SCOPE_ONELEVEL,
                                        f"(objectClass={ZONE_CLASS.decode()})",
                                        ["dlzZoneName"]):
                zone = read_zone(conn, target.suffix, attrs["dlzZoneName"][0].decode())
                if zone is not None:
                    yield zone

    def dlz_args(self, target: LdapTarget, options: Mapping[str, str]) -> dict[str, str]:
        args = {"uri": driver_uri(target), "base": target.suffix}
        if target.starttls:  # a lent server's ?starttls=yes (and ?tls_cacert=)
            args["starttls"] = "yes"
            if target.tls_cacert is not None:
                args["tls_cacert"] = target.tls_cacert
        if target.driver_dn:
            # Its password never goes into named.conf: the driver reads it from a file.
            args["binddn"] = target.driver_dn
            if target.password_file is not None:
                args["password_file"] = str(target.password_file)
        return args


class LdapWriter(StoreWriter):
    """A change to a record is one modify of its owner's entry in the zone's live generation
    (its dlzRecord values: the old one deleted and the new one added in the same modify, so
    a reader sees either); an owner's first record adds its entry, its last deletes it (or
    leaves the ENT value, when names below it exist). Markers of the names above it follow,
    one operation each (fix_markers): slapd has no transaction to put them in one (see the
    module's note on RFC 5805), so for a moment a new name's parent may not exist yet. A zone
    is added as replace_zone adds one (made live by one modify once whole) and deleted by
    one modify that takes its generation away (readers skip it from then on), then its
    entries."""

    def __init__(self, target: LdapTarget) -> None:
        self.conn = target.connect()
        self.suffix = target.suffix

    def close(self) -> None:
        self.conn.unbind_s()

    def apply(self, change: Change) -> None:
        zdn = zone_dn(name_key(change.zone), self.suffix)
        live = live_generation(self.conn, zdn)
        if change.kind == ADD_ZONE:
            if live is not None:
                raise UserError(f"zone {change.zone} is already there")
            replace_zone(self.conn, Zone(change.zone, list(change.zone_records)), self.suffix)
            return
        if live is None:
            raise UserError(f"zone {change.zone} is not there")
        if change.kind == DELETE_ZONE:
            self.conn.modify_s(zdn, [(ldap.MOD_DELETE, "dlzGeneration", None)])
            delete_entries(self.conn, children_by_generation(self.conn, zdn))
            self.conn.delete_s(zdn)
            return
        nodes = _Nodes(self.conn, name_key(change.zone), live, self.suffix)
        nodes.write_owner(change)
        fix_markers(change.owner, change.zone, nodes.marker_ops())


class _Nodes:
    """The owner entries of one zone's live generation."""

    def __init__(self, conn: LDAPObject, zone_key: str, generation: int, suffix: str) -> None:
        self.conn, self.zone_key, self.generation, self.suffix = conn, zone_key, generation, suffix

    def _dn(self, name: dns.name.Name) -> str:
        return node_dn(self.zone_key, name_key(name), self.generation, self.suffix)

    def values(self, name: dns.name.Name) -> list[bytes] | None:
        """The owner entry's dlzRecord values (None: no entry)."""
        try:
            found = self.conn.search_s(self._dn(name), ldap.SCOPE_BASE, "(objectClass=*)",
                                       ["dlzRecord"])
        except ldap.NO_SUCH_OBJECT:
            return None
        return list(found[0][1].get("dlzRecord", []))

    def write_owner(self, change: Change) -> None:
        owner = change.owner
        old = self.values(owner) or []
        new = [v for v in old if v != ENT_VALUE]
        removed, added = change.removed, change.added
        if removed is not None:
            match = [v for v in new if _same(v, removed)]
            if not match:
                raise UserError(f"{change.text()}: no such record")
            new.remove(match[0])
        if added is not None:
            if any(_same(v, added) for v in new):
                raise UserError(f"{change.text()}: the record is there already")
            new.append(record_value(added.rdtype, added.ttl, added.rdata))
        if not new and self.has_below(owner):
            new = [ENT_VALUE]
        self._write(owner, old, new)

    def _write(self, name: dns.name.Name, old: list[bytes], new: list[bytes]) -> None:
        dn = self._dn(name)
        if not old:
            self.conn.add_s(dn, list(self._entry(name, new).items()))
        elif not new:
            self.conn.delete_s(dn)
        else:
            changes = [(ldap.MOD_DELETE, "dlzRecord", [v for v in old if v not in new]),
                       (ldap.MOD_ADD, "dlzRecord", [v for v in new if v not in old])]
            self.conn.modify_s(dn, [c for c in changes if c[2]])

    def _entry(self, name: dns.name.Name, values: list[bytes]) -> Attrs:
        owner = name_key(name)
        return {"objectClass": [NODE_CLASS],
                "dlzId": [f"{self.generation}-{entry_id(owner)}".encode()],
                "dlzOwner": [owner.encode()], "dlzZone": [self.zone_key.encode()],
                "dlzGeneration": [str(self.generation).encode()], "dlzRecord": values}

    def has_below(self, name: dns.name.Name) -> bool:
        """Does an owner entry of the live generation end in "." + name? The zone's entries
        read and matched here: dlzOwner (octetString) has no substring match in a filter."""
        suffix = ("." + name_key(name)).encode()
        for _, attrs in search_iter(self.conn, zone_dn(self.zone_key, self.suffix),
                                    ldap.SCOPE_ONELEVEL,
                                    f"(dlzGeneration={self.generation})", ["dlzOwner"]):
            if attrs["dlzOwner"][0].endswith(suffix):
                return True
        return False

    def marker_ops(self) -> MarkerOps:
        def has_records(name: dns.name.Name) -> bool:
            return any(v != ENT_VALUE for v in self.values(name) or [])

        def has_marker(name: dns.name.Name) -> bool:
            return ENT_VALUE in (self.values(name) or [])

        return MarkerOps(has_records=has_records, has_marker=has_marker,
                         has_below=self.has_below,
                         add_marker=lambda name: self._write(name, [], [ENT_VALUE]),
                         drop_marker=lambda name: self._write(name, [ENT_VALUE], []))


def _same(value: bytes, record: Record) -> bool:
    """A dlzRecord value holds record's data (its TTL aside)."""
    rdtype, _, rdata = parse_record_value(value)
    return (rdtype, rdata) == (record.rdtype, record.rdata)


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
    seen: set[int] = set()
    for zone in zones:
        key = zone.key
        nodes = node_entries(zone, 1, suffix)
        _first_time(seen, key)
        writer.unparse(zone_dn(key, suffix), zone_attrs(key, 1))
        for dn, attrs in nodes.items():
            writer.unparse(dn, attrs)
    return len(seen)


def _first_time(seen: set[int], key: str) -> None:
    """Note a zone of a bulk load into an empty directory, refusing one seen before (both bulk
    paths write each zone once, as generation 1)."""
    # 64 bits of each zone's id: enough to tell a million zones apart, small to keep.
    tag = int(entry_id(key)[:16], 16)
    if tag in seen:
        raise UserError(f"zone {key} appears twice in one load into an empty directory")
    seen.add(tag)


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


# -- bulk path into a lent server: online adds, pipelined ------------------------------------

# Writes in flight on one connection: enough to hide the round trip to a server over a
# network, below slapd's default per-connection limit of pending operations (100 unbound).
PIPELINE_WINDOW = 64
# The longest wait for one write's answer (a lent server may be busy with others' work).
_WRITE_TIMEOUT_S = 120


class Pipeline:
    """LDAP writes sent without waiting for each answer, up to PIPELINE_WINDOW in flight on one
    connection; drain() waits for all. LDAP has no multi-entry add (and RFC 5805 transactions
    crash slapd 2.5.13), so this is the batching there is: slapd works on the next writes
    while the answers to the earlier ones travel back."""

    def __init__(self, conn: LDAPObject, url: StoreUrl) -> None:
        self.conn = conn
        self.url = url
        self.pending: dict[int, str] = {}  # message id -> what it does, for an error

    def add(self, dn: str, attrs: Attrs) -> None:
        self._sent(self.conn.add_ext(dn, list(attrs.items())), f"add {dn}")

    def modify(self, dn: str, changes: list[tuple[int, str, list[bytes]]]) -> None:
        self._sent(self.conn.modify_ext(dn, changes), f"modify {dn}")

    def delete(self, dn: str) -> None:
        self._sent(self.conn.delete_ext(dn), f"delete {dn}")

    def drain(self) -> None:
        while self.pending:
            self._answer()

    def _sent(self, msgid: int, what: str) -> None:
        self.pending[msgid] = what
        if len(self.pending) >= PIPELINE_WINDOW:
            self._answer()

    def _answer(self) -> None:
        """Take one answer; a refused write is a UserError naming the URL and the entry (the
        writes still in flight are abandoned with the connection)."""
        try:
            _, _, msgid, _ = self.conn.result3(ldap.RES_ANY, all=1, timeout=_WRITE_TIMEOUT_S)
        except ldap.LDAPError as exc:
            details = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
            what = self.pending.get(details.get("msgid", -1), "write an entry")
            raise self.url.error(f"cannot {what}: {ldap_message(exc)}") from None
        self.pending.pop(msgid, None)


def online_bulk_load(conn: LDAPObject, zones: Iterable[Zone], suffix: str,
                     url: StoreUrl) -> None:
    """Every zone into an empty subtree of a lent server, a batch of zones at a time: their zone
    entries not live yet, then their owner entries, then one modify per zone making it live, so
    that a reader (or a load stopped part-way) never sees part of a zone. A zone entry left
    not live is dropped by the next replace or by the next command's emptying."""
    seen: set[int] = set()
    pipe = Pipeline(conn, url)
    for batch in sql.zone_batches(zones):
        # Built whole before anything is written (node_entries), as on the other paths.
        entries = [(zone.key, node_entries(zone, 1, suffix)) for zone in batch]
        for key, _ in entries:
            _first_time(seen, key)
            pipe.add(zone_dn(key, suffix), zone_attrs(key, None))
        pipe.drain()  # a parent must exist before its children are added
        for _, nodes in entries:
            for dn, attrs in nodes.items():
                pipe.add(dn, attrs)
        pipe.drain()  # a zone goes live only once all of it is there
        for key, _ in entries:
            pipe.modify(zone_dn(key, suffix), [(ldap.MOD_REPLACE, "dlzGeneration", [b"1"])])
        pipe.drain()


# -- a lent server (--store-url ldap=...): others' entries, the suite's emptied ---------------

# Others' entries named in a refusal, at most (a count above it is "more than").
_FOREIGN_SHOWN = 100
# Deletes per round when emptying the suite's subtree (bounded memory at a million zones).
_DELETE_ROUND = 10_000

def _others_entries(conn: LDAPObject, url: StoreUrl) -> list[str]:
    """DNs of entries under the suffix (the suffix entry aside) the suite did not create, at
    most _FOREIGN_SHOWN + 1: every entry but its zone and owner entries (its schema's classes,
    which a command has checked the server has: without them the filter would match nothing)."""
    others = (f"(!(|(objectClass={ZONE_CLASS.decode()})"
              f"(objectClass={NODE_CLASS.decode()})))")
    found: list[str] = []
    try:
        for dn, _ in search_iter(conn, url.database, ldap.SCOPE_SUBORDINATE, others, ["1.1"]):
            found.append(dn or "a referral")
            if len(found) > _FOREIGN_SHOWN:
                break
    except ldap.LDAPError as exc:
        raise url.error(f"cannot read the entries under {url.database}: "
                        f"{ldap_message(exc)}") from None
    return found


def _hold_own_subtree_empty(conn: LDAPObject, url: StoreUrl) -> None:
    """The suffix holding none of the suite's entries (a command loads its data set into an
    empty store, as into a private server): every owner entry, then every zone entry, of the
    suite's classes only. Another's entry under a zone entry stops it (one error line)."""
    pipe = Pipeline(conn, url)
    for scope, kind in ((ldap.SCOPE_SUBTREE, NODE_CLASS), (ldap.SCOPE_ONELEVEL, ZONE_CLASS)):
        while True:
            dns = _some_dns(conn, url, scope, f"(objectClass={kind.decode()})")
            for dn in dns:
                pipe.delete(dn)
            pipe.drain()
            if len(dns) < _DELETE_ROUND:
                break


def _some_dns(conn: LDAPObject, url: StoreUrl, scope: int, filterstr: str) -> list[str]:
    """Up to _DELETE_ROUND DNs under the suffix matching filterstr."""
    found: list[str] = []
    try:
        for dn, _ in search_iter(conn, url.database, scope, filterstr, ["1.1"]):
            if dn:
                found.append(dn)
            if len(found) >= _DELETE_ROUND:
                break
    except ldap.LDAPError as exc:
        raise url.error(f"cannot read the entries under {url.database}: "
                        f"{ldap_message(exc)}") from None
    return found



LOADER = LdapLoader()
