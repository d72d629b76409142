"""The PostgreSQL and MariaDB stores beyond the generic round trip (tests/test_stores.py).

Each store runs in a real private server holding coverage_zones() plus a zone of hostile
owner names; the DLZ drivers' statements (schemas/*.sql) are run from here with bound
parameters, as the C drivers will run them.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dns.name
import psycopg
import pytest

from bench.measure.loading import timed_load
from loaders import mysql, pg
from loaders.loader import DEFAULT_XFR_CLIENTS, Loader
from servers import get_server
from servers.dlz import DlzNamed
from tests.failing import FailsHalfWay
from zonedata.generator import coverage_zones
from zonedata.model import ENT_TYPE, Zone, canonical_set, empty_nonterminals, make_record, name_key

HOSTILE_ORIGIN = dns.name.from_text("hostile.test.")
# Owner labels that would do harm if a key ever reached SQL as text, or matched as a pattern.
HOSTILE_LABELS = [b"'; DROP TABLE records; --", b"\x00", b"\x01", b"%", b"_", b"a", b"x",
                  b"\\", b"'", b"*"]
# Raw parameter values (not keys) that must match nothing and harm nothing.
RAW_HOSTILE_VALUES = ["'; DROP TABLE records; --", "%", "_", "\\000", "*", "' OR '1'='1"]

# The drivers' statements, as in schemas/pg.sql and schemas/mysql.sql.
PG_LOOKUP = """
SELECT z.name, r.name, r.type, r.ttl, r.data
  FROM zones z
  LEFT JOIN records r ON r.zone_id = z.id AND r.name = ANY(%s)
 WHERE z.name = ANY(%s)"""
PG_AXFR = """
SELECT r.name, r.type, r.ttl, r.data
  FROM records r
 WHERE r.zone_id = (SELECT id FROM zones WHERE name = %s) AND r.type <> 'ENT'
 ORDER BY r.name"""
PG_ALLOW_XFR = """
SELECT 1 FROM zones z JOIN xfr_clients x ON x.zone_id = z.id
 WHERE z.name = %s AND x.client = %s"""
# RFC 2136 updates: is any name below an owner (drivers/pg: BELOW_SQL)?
PG_BELOW = """
SELECT name FROM records WHERE zone_id + 0 = (SELECT id FROM zones WHERE name = %s)
   AND reverse(name) >= %s COLLATE "C" AND reverse(name) < %s COLLATE "C" LIMIT 64"""

MY_SUFFIX_PLACES = 128
MY_OWNER_PLACES = 256
MY_LOOKUP = f"""
SELECT z.name, r.name, r.type, r.ttl, r.data
  FROM zones z
  LEFT JOIN records r FORCE INDEX (PRIMARY)
    ON r.zone_id = z.id AND r.name IN ({", ".join(["?"] * MY_OWNER_PLACES)})
 WHERE z.name IN ({", ".join(["?"] * MY_SUFFIX_PLACES)})"""
MY_AXFR = """
SELECT r.name, r.type, r.ttl, r.data
  FROM records r
 WHERE r.zone_id = (SELECT id FROM zones WHERE name = ?) AND r.type <> 'ENT'
 ORDER BY r.name"""
MY_ALLOW_XFR = """
SELECT 1 FROM zones z JOIN xfr_clients x ON x.zone_id = z.id
 WHERE z.name = ? AND x.client = ?"""
# RFC 2136 updates: is any name below an owner (drivers/mysql: BELOW_SQL)? The driver binds
# the zone's id, read once per update.
MY_BELOW = """
SELECT r.name, r.type, r.ttl, r.data FROM records r FORCE INDEX (records_rname)
 WHERE r.zone_id = (SELECT id FROM zones WHERE name = ?) AND r.rname >= ? AND r.rname < ?
 LIMIT 64"""


def hostile_zone() -> Zone:
    origin = HOSTILE_ORIGIN
    records = [
        make_record(origin, 3600, "SOA", "ns.hostile.test. admin.hostile.test. 1 3600 900 "
                    "604800 300"),
        make_record(origin, 3600, "NS", "ns.hostile.test."),
        make_record(dns.name.Name((b"ns",) + origin.labels), 3600, "A", "192.0.2.53"),
        # An owner two levels down, so that its parent `_%` is an empty non-terminal.
        make_record(dns.name.Name((b"deep", b"_%") + origin.labels), 60, "TXT", '"deep"'),
    ]
    for i, label in enumerate(HOSTILE_LABELS):
        owner = dns.name.Name((label,) + origin.labels)
        records.append(make_record(owner, 300 + i, "TXT", f'"label {i}"'))
    return Zone(origin, records)


def data_set() -> list[Zone]:
    return [*coverage_zones(), hostile_zone()]


def driver_lists(qname: dns.name.Name) -> tuple[list[str], list[str]]:
    """The keys a driver binds for query name Q: Q's suffixes; Q, its ancestors, their `*.`."""
    names = [qname]
    while names[-1] != dns.name.root:
        names.append(names[-1].parent())
    suffixes = [name_key(n) for n in names]
    # Built as text, as a driver does: `*.` + Q may be one label longer than a name can be.
    wildcards = ["*" if key == "." else f"*.{key}" for key in suffixes]
    return suffixes, suffixes + wildcards


class PgProbe:
    """Runs the PostgreSQL driver's statements with server-side bound parameters."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.connect()

    def connect(self) -> None:
        self.conn = self.target.connect()
        self.conn.autocommit = True

    def lookup(self, suffixes: list[str], owners: list[str]) -> list[tuple]:
        return self.conn.execute(PG_LOOKUP, (owners, suffixes)).fetchall()

    def axfr(self, zone: str) -> list[tuple]:
        return self.conn.execute(PG_AXFR, (zone,)).fetchall()

    def allow_xfr(self, zone: str, client: str) -> bool:
        return self.conn.execute(PG_ALLOW_XFR, (zone, client)).fetchone() is not None

    def ent_owners(self, zone: str) -> set[str]:
        rows = self.conn.execute("SELECT r.name FROM records r JOIN zones z ON z.id = r.zone_id "
                                 "WHERE z.name = %s AND r.type = %s", (zone, ENT_TYPE))
        return {name for (name,) in rows}

    def count(self, table: str) -> int:
        return self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]

    def apply_schema(self) -> None:
        pg.apply_schema(self.conn)

    def explain(self, name: str, statement: str, args: list[Any]) -> dict[str, str]:
        """Plans of a prepared statement: generic (no values) and custom (with the values)."""
        types = ", ".join("text[]" if isinstance(a, list) else "text" for a in args)
        numbered = statement.replace("%s", "${}").format(*range(1, len(args) + 1))
        self.conn.execute(f"PREPARE {name} ({types}) AS {numbered}")
        plans = {}
        client = psycopg.ClientCursor(self.conn)
        for mode in ("force_generic_plan", "force_custom_plan"):
            self.conn.execute(f"SET plan_cache_mode = {mode}")
            places = ", ".join(["%s"] * len(args))
            rows = client.execute(f"EXPLAIN EXECUTE {name} ({places})", args).fetchall()
            plans[mode] = "\n".join(row[0] for row in rows)
        self.conn.execute(f"DEALLOCATE {name}")
        self.conn.execute("RESET plan_cache_mode")
        return plans

    @contextmanager
    def filler_zones(self, zones: int, records_per_zone: int) -> Iterator[None]:
        """Extra zones and records (with fresh statistics) until the block ends, rolled back
        then: a few pages of zones make a sequential scan the planner's rightful choice."""
        with self.conn.transaction(force_rollback=True):
            self.conn.execute("INSERT INTO zones (name) SELECT 'filler' || g || '.test' "
                              "FROM generate_series(1, %s) g", (zones,))
            self.conn.execute("INSERT INTO records (zone_id, name, type, ttl, data) "
                              "SELECT z.id, 'h' || g || '.' || z.name, 'A', 300, '192.0.2.1' "
                              "FROM zones z, generate_series(1, %s) g "
                              "WHERE z.name LIKE 'filler%%'", (records_per_zone,))
            self.conn.execute("INSERT INTO xfr_clients (zone_id, client) SELECT id, '::1' "
                              "FROM zones WHERE name LIKE 'filler%'")
            self.conn.execute("ANALYZE zones, records, xfr_clients")
            yield

    def close(self) -> None:
        self.conn.close()


class MysqlProbe:
    """Runs the MariaDB driver's statements as server-side prepared statements."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.connect()

    def connect(self) -> None:
        self.conn = self.target.connect()
        self.conn.autocommit(True)

    def _execute(self, statement: str, args: list[Any]) -> list[tuple]:
        cursor = self.conn.cursor()
        cursor.execute("PREPARE driver_statement FROM %s", (statement,))
        cursor.execute("EXECUTE driver_statement USING " + ", ".join(["%s"] * len(args)), args)
        rows = cursor.fetchall()
        cursor.execute("DEALLOCATE PREPARE driver_statement")
        return [tuple(v.decode() if isinstance(v, bytes) else v for v in row) for row in rows]

    def lookup(self, suffixes: list[str], owners: list[str]) -> list[tuple]:
        return self._execute(MY_LOOKUP, _padded(owners, MY_OWNER_PLACES)
                             + _padded(suffixes, MY_SUFFIX_PLACES))

    def axfr(self, zone: str) -> list[tuple]:
        return self._execute(MY_AXFR, [zone])

    def allow_xfr(self, zone: str, client: str) -> bool:
        return bool(self._execute(MY_ALLOW_XFR, [zone, client]))

    def below(self, zone: str, owner: str) -> list[str]:
        """The names MY_BELOW finds below owner, in key order."""
        reversed_owner = owner[::-1]
        rows = self._execute(MY_BELOW, [zone, reversed_owner + ".", reversed_owner + "/"])
        return sorted(row[0] for row in rows)

    def ent_owners(self, zone: str) -> set[str]:
        cursor = self.conn.cursor()
        cursor.execute("SELECT r.name FROM records r JOIN zones z ON z.id = r.zone_id "
                       "WHERE z.name = %s AND r.type = %s", (zone, ENT_TYPE))
        return {name.decode() for (name,) in cursor.fetchall()}

    def count(self, table: str) -> int:
        cursor = self.conn.cursor()
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        return cursor.fetchone()[0]

    def apply_schema(self) -> None:
        mysql.apply_schema(self.conn)

    @contextmanager
    def filler_zones(self, zones: int, records_per_zone: int) -> Iterator[None]:
        """Extra zones and records until the block ends, rolled back then: the optimizer
        rightly scans a table of a few rows whole rather than look 128 keys up in it."""
        cursor = self.conn.cursor()
        cursor.execute("START TRANSACTION")
        try:
            cursor.execute("INSERT INTO zones (name) SELECT CONCAT('filler', seq, '.test') "
                           f"FROM seq_1_to_{zones}")
            cursor.execute("INSERT INTO records (zone_id, name, seq, type, ttl, data) "
                           "SELECT z.id, CONCAT('h', s.seq, '.', z.name), 0, 'A', 300, "
                           f"'192.0.2.1' FROM zones z JOIN seq_1_to_{records_per_zone} s "
                           "WHERE z.name LIKE 'filler%'")
            yield
        finally:
            cursor.execute("ROLLBACK")

    def explain(self, statement: str, args: list[Any]) -> list[dict[str, Any]]:
        columns = ("id", "select_type", "table", "type", "possible_keys", "key", "key_len",
                   "ref", "rows", "Extra")
        return [dict(zip(columns, row, strict=True))
                for row in self._execute("EXPLAIN " + statement, args)]

    def close(self) -> None:
        self.conn.close()


def _padded(values: list[str], places: int) -> list[str]:
    assert len(values) <= places
    return values + [""] * (places - len(values))


STORES = {"pg": (pg.LOADER, PgProbe), "mysql": (mysql.LOADER, MysqlProbe)}


@pytest.fixture(scope="module", params=list(STORES))
def loaded(request: pytest.FixtureRequest, run_dir: Path) -> Iterator[tuple[Loader, Any, Any]]:
    """(store, target, probe) of a running store holding data_set()."""
    store, probe_class = STORES[request.param]
    with store.database.server(run_dir / store.name) as target:
        stats = timed_load(store, data_set(), target)
        assert (stats.zones, stats.records) == (len(data_set()),
                                                sum(len(z.records) for z in data_set()))
        probe = probe_class(target)
        try:
            yield store, target, probe
        finally:
            probe.close()


def test_round_trip(loaded: tuple[Loader, Any, Any]) -> None:
    store, target, _ = loaded
    assert canonical_set(store.read_back(target)) == canonical_set(data_set())


def test_schema_applies_twice(loaded: tuple[Loader, Any, Any]) -> None:
    store, target, probe = loaded
    before = [probe.count(t) for t in ("zones", "records", "xfr_clients")]
    probe.apply_schema()
    probe.apply_schema()
    assert [probe.count(t) for t in ("zones", "records", "xfr_clients")] == before
    assert canonical_set(store.read_back(target)) == canonical_set(data_set())


def _existing_keys(zone: Zone) -> set[str]:
    """Owner keys a lookup may find in the zone: record owners and ENT markers."""
    return {name_key(r.owner) for r in zone.records} | {
        name_key(n) for n in empty_nonterminals(zone)}


def _expected_lookup(suffixes: list[str], owners: list[str]) -> set[tuple[str, str | None]]:
    """(zone key, owner key) pairs the driver statement must return, from the model."""
    expected: set[tuple[str, str | None]] = set()
    for zone in data_set():
        if zone.key in suffixes:
            found = set(owners) & _existing_keys(zone)
            expected |= {(zone.key, owner) for owner in found} or {(zone.key, None)}
    return expected


@pytest.mark.parametrize("label", HOSTILE_LABELS)
def test_hostile_key_matches_only_itself(loaded: tuple[Loader, Any, Any], label: bytes) -> None:
    _, _, probe = loaded
    qname = dns.name.Name((label,) + HOSTILE_ORIGIN.labels)
    suffixes, owners = driver_lists(qname)
    rows = probe.lookup(suffixes, owners)
    assert {(row[0], row[1]) for row in rows} == _expected_lookup(suffixes, owners)
    own = [(row[2], row[4]) for row in rows if row[1] == name_key(qname)]
    assert own == [("TXT", f'"label {HOSTILE_LABELS.index(label)}"')]


@pytest.mark.parametrize("value", RAW_HOSTILE_VALUES)
def test_raw_hostile_parameter_matches_nothing(loaded: tuple[Loader, Any, Any], value: str
                                               ) -> None:
    _, _, probe = loaded
    records = probe.count("records")
    assert probe.lookup([value], [value]) == []
    assert probe.lookup([value, HOSTILE_ORIGIN.to_text(True)], [value]) == [
        (HOSTILE_ORIGIN.to_text(True), None, None, None, None)]
    assert not probe.allow_xfr(value, "127.0.0.1")
    assert probe.count("records") == records


def test_ent_rows_present_and_not_read_back(loaded: tuple[Loader, Any, Any]) -> None:
    store, target, probe = loaded
    for zone in data_set():
        assert probe.ent_owners(zone.key) == {name_key(n) for n in empty_nonterminals(zone)}
    assert any(empty_nonterminals(z) for z in data_set())
    assert all(r.rdtype != ENT_TYPE for z in store.read_back(target) for r in z.records)


def test_ent_answers_the_lookup(loaded: tuple[Loader, Any, Any]) -> None:
    _, _, probe = loaded
    qname = dns.name.Name((b"_%",) + HOSTILE_ORIGIN.labels)  # only deep._% is below it
    rows = probe.lookup(*driver_lists(qname))
    assert [row[1:] for row in rows if row[1] == name_key(qname)] == [
        (name_key(qname), ENT_TYPE, 0, "")]


def test_xfr_acl(loaded: tuple[Loader, Any, Any]) -> None:
    _, _, probe = loaded
    for zone in data_set():
        for client in DEFAULT_XFR_CLIENTS:
            assert probe.allow_xfr(zone.key, client)
        assert not probe.allow_xfr(zone.key, "192.0.2.1")
    assert not probe.allow_xfr("not-a-zone.test", "127.0.0.1")
    assert probe.count("xfr_clients") == len(DEFAULT_XFR_CLIENTS) * len(data_set())


def test_zone_transfer_in_owner_order(loaded: tuple[Loader, Any, Any]) -> None:
    _, _, probe = loaded
    for zone in data_set():
        rows = probe.axfr(zone.key)
        owners = [row[0] for row in rows]
        assert owners == sorted(owners, key=lambda key: key.encode())
        assert sorted((o, ttl, t, d) for o, t, ttl, d in rows) == zone.canonical()


def _longest_query() -> dns.name.Name:
    """A 127-label name (255 octets): the most suffixes and owners a driver ever binds."""
    return dns.name.Name((b"a",) * 127 + (b"",))


def _check_pg_plans(probe: PgProbe) -> None:
    suffixes, owners = driver_lists(dns.name.from_text("a.b.c.cov.test."))
    with probe.filler_zones(20000, 5):
        lookup = probe.explain("lookup", PG_LOOKUP, [owners, suffixes])
        axfr = probe.explain("axfr", PG_AXFR, ["cov.test"])
        acl = probe.explain("acl", PG_ALLOW_XFR, ["cov.test", "::1"])
        below = probe.explain("below", PG_BELOW, ["cov.test", "tset.voc.c.", "tset.voc.c/"])
    for mode, plan in below.items():
        assert "records_rname" in plan and "Seq Scan" not in plan, (mode, plan)
    for mode, plan in lookup.items():
        assert "Seq Scan" not in plan, (mode, plan)
        assert "records_name_zone" in plan, (mode, plan)
        assert "Index Cond: (name = ANY" in plan, (mode, plan)
        assert "zones_name_key" in plan, (mode, plan)
    for mode, plan in axfr.items():
        # Owner order comes from the index or, for a zone of a few rows, a sort of those.
        assert "records_zone_name" in plan and "Seq Scan" not in plan, (mode, plan)
    for mode, plan in acl.items():
        assert "xfr_clients_pkey" in plan and "Seq Scan" not in plan, (mode, plan)


def _check_mysql_plans(probe: MysqlProbe) -> None:
    lookups = []
    with probe.filler_zones(20000, 5):
        for qname in (dns.name.from_text("a.b.c.cov.test."), _longest_query()):
            suffixes, owners = driver_lists(qname)
            args = _padded(owners, MY_OWNER_PLACES) + _padded(suffixes, MY_SUFFIX_PLACES)
            lookups.append({row["table"]: row for row in probe.explain(MY_LOOKUP, args)})
        axfr = {row["table"]: row for row in probe.explain(MY_AXFR, ["cov.test"])}
        acl = {row["table"]: row for row in probe.explain(MY_ALLOW_XFR, ["cov.test", "::1"])}
        below = {row["table"]: row for row in probe.explain(
            MY_BELOW, ["cov.test", "tset.voc.c.", "tset.voc.c/"])}
        assert probe.below("cov.test", "c.cov.test") == ["a.b.c.cov.test", "b.c.cov.test"]
    for plan in lookups:
        assert (plan["z"]["type"], plan["z"]["key"]) == ("range", "zones_name"), plan
        assert (plan["r"]["type"], plan["r"]["key"]) == ("range", "PRIMARY"), plan
    assert axfr["r"]["key"] == "records_zone", axfr
    assert "filesort" not in (axfr["r"]["Extra"] or ""), axfr
    assert (acl["x"]["type"], acl["x"]["key"]) == ("const", "PRIMARY"), acl
    # A range of the owner's subtree, not the zone's rows (records_zone).
    assert (below["r"]["type"], below["r"]["key"]) == ("range", "records_rname"), below


def test_driver_statements_use_the_indexes(loaded: tuple[Loader, Any, Any]) -> None:
    store, _, probe = loaded
    {"pg": _check_pg_plans, "mysql": _check_mysql_plans}[store.name](probe)


def test_longest_query_finds_the_root_zone(loaded: tuple[Loader, Any, Any]) -> None:
    _, _, probe = loaded
    suffixes, owners = driver_lists(_longest_query())
    assert (len(suffixes), len(owners)) == (MY_SUFFIX_PLACES, MY_OWNER_PLACES)
    rows = probe.lookup(suffixes, owners)
    assert {row[0] for row in rows} == {"."}
    assert {row[1] for row in rows} == {"."}


def test_zone_repeated_in_one_load_ends_as_its_last_copy(loaded: tuple[Loader, Any, Any]
                                                         ) -> None:
    store, target, probe = loaded
    zone = hostile_zone()
    smaller = Zone(zone.origin, zone.records[:3])
    records = probe.count("records")
    store.load([zone, smaller, zone], target)
    assert probe.count("records") == records
    store.load([smaller], target)
    back = {z.key: z for z in store.read_back(target)}
    assert back[zone.key].canonical() == smaller.canonical()
    store.load([zone], target)
    assert canonical_set(store.read_back(target)) == canonical_set(data_set())


def test_dlz_clause_names_the_server(loaded: tuple[Loader, Any, Any]) -> None:
    store, target, _ = loaded
    server = get_server(store.name)
    assert isinstance(server, DlzNamed)
    clause = server.body(target, connections=8)
    assert clause.startswith(f'dlz "{store.name}" {{')
    assert "connections=8" in clause
    # The driver's password reaches it in a 0600 file, never in named.conf or named's
    # environment: libpq's password file (PGPASSFILE), the MariaDB driver's password_file=.
    if store.name == "pg":
        assert "drivers/pg/dlz_pg.so" in clause
        assert f"host={target.host} port={target.port} dbname=dlz user=dlz_reader" in clause
        assert store.database.client_env(target) == {"PGPASSFILE": str(target.passfile)}
        secret_file = target.passfile
    else:
        assert "drivers/mysql/dlz_mysql.so" in clause
        assert (f"socket={target.socket} user=dlz_reader database=dlz "
                f"password_file={target.password_file}") in clause
        assert store.database.client_env(target) == {}
        secret_file = target.password_file
    assert target.reader_password not in clause
    assert target.reader_password in secret_file.read_text()
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600


def test_failed_batch_keeps_every_zone_of_it(loaded: tuple[Loader, Any, Any]) -> None:
    """Zones share a transaction with the zone that fails: none of them changes."""
    store, target, _ = loaded
    hostile = hostile_zone()
    changed = Zone(hostile.origin, hostile.records[:3])
    cov = coverage_zones()[0]
    broken = Zone(cov.origin, FailsHalfWay(cov.records[:-1]))
    with pytest.raises(RuntimeError, match="half-way"):
        store.load([changed, broken], target)
    assert canonical_set(store.read_back(target)) == canonical_set(data_set())


def test_restart_keeps_the_data(loaded: tuple[Loader, Any, Any]) -> None:
    store, target, probe = loaded
    pids = store.database.server_pids(target)
    assert pids
    probe.close()
    store.database.restart_server(target)
    probe.connect()
    assert store.database.server_pids(target) and store.database.server_pids(target) != pids
    assert canonical_set(store.read_back(target)) == canonical_set(data_set())
