"""The PostgreSQL store: schemas/pg.sql in a private PostgreSQL 15, loaded with COPY."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager

import psycopg
from psycopg import sql as pg_sql

from base.paths import SCHEMA_DIR
from databases.postgresql import (
    WRITER_ROLE,
    PgServer,
    PgTarget,
    PostgresDatabase,
    client_keywords,
)
from databases.url import StoreUrl, check_lent_database
from loaders import sql
from loaders.loader import DEFAULT_XFR_CLIENTS, Loader
from loaders.writes import StoreWriter
from zonedata.model import ENT_TYPE, Record, Zone, name_key

SCHEMA = SCHEMA_DIR / "pg.sql"
# The triggers that tell a caching driver of every change (its change channel).
NOTIFY_SCRIPT = SCHEMA_DIR / "pg_notify.sql"
TABLES = ("zones", "records", "xfr_clients")
NOTIFY_TRIGGERS = ("dlz_notify_record", "dlz_notify_zone", "dlz_notify_truncate")

_COPY_RECORDS = "COPY records (zone_id, name, type, ttl, data) FROM STDIN"

# The comment schemas/pg.sql puts on the suite's tables: in a database the suite did not
# create (--store-url), a table of the same name without it is someone else's.
OWN_MARK = "dlzbench store table"
# Every relation a user can make (tables, views, sequences...) outside the system schemas,
# except sequences that belong to a table's column (an identity's): that table is listed.
_RELATIONS = r"""
SELECT n.nspname, c.relname, n.nspname = current_schema() AND c.relname = ANY(%s),
       c.relkind = 'r' AND obj_description(c.oid, 'pg_class') IS NOT DISTINCT FROM %s
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
   AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%%'
   AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                   AND d.objid = c.oid AND d.deptype IN ('a', 'i'))
 ORDER BY 1, 2
"""


class DlzTables:
    """schemas/pg.sql's tables, as the PostgreSQL database must know them: made on a fresh
    server, claimed in a lent database (databases.database's Schema and LentSchema)."""

    def ensure(self, conn: psycopg.Connection) -> None:
        ensure_schema(conn)

    def grant_read(self, conn: psycopg.Connection, role: str) -> None:
        grant_select(conn, TABLES, role)

    def grant_write(self, conn: psycopg.Connection, role: str) -> None:
        # Updates add and delete records rows (drivers/pg: ADD_SQL, DEL_SQL), of the update
        # zones only (limit_writes); zones and xfr_clients stay the loader's.
        grant_select(conn, TABLES, role)
        conn.execute(pg_sql.SQL("GRANT INSERT, DELETE ON records TO {}").format(
            pg_sql.Identifier(role)))

    def check_lent(self, conn: psycopg.Connection, url: StoreUrl, *, overwrite: bool) -> None:
        foreign, clashing = _others_objects(conn)
        check_lent_database(url, foreign=foreign, clashing=clashing, overwrite=overwrite)

    def hold_empty(self, conn: psycopg.Connection, url: StoreUrl) -> None:
        """The suite's tables in the database, marked as its own, holding no zone."""
        apply_schema(conn)
        conn.execute(f"TRUNCATE {', '.join(TABLES)}")


DLZ_TABLES = DlzTables()


class PgLoader(Loader[PgTarget]):
    name = "pg"
    database = PostgresDatabase(name, DLZ_TABLES, DLZ_TABLES)

    def load(self, zones: Iterable[Zone], target: PgTarget) -> None:
        with self.database.connect(target) as conn:
            for batch in sql.zone_batches(zones):
                # One transaction per batch: a reader sees each zone either old or new, and a
                # batch that raises half-way leaves its zones as they were.
                with conn.transaction():
                    _replace_zones(conn, batch)

    def read_back(self, target: PgTarget) -> Iterator[Zone]:
        with self.database.connect(target) as conn, conn.cursor() as cur:
            yield from sql.zones_from_rows(cur.stream(sql.READ_BACK, (ENT_TYPE,)))

    def writer(self, target: PgTarget) -> StoreWriter:
        """SQL transactions on a connection of the writer's own (as the loading account)."""
        return sql.SqlWriter(PgSession(committed(self.database.connect(target))), sql.DLZ_LAYOUT,
                             _insert_record, lambda session, zone_id, name: (),
                             lambda session, zone: _replace_zones(session.conn, [zone]))

    def dlz_args(self, target: PgTarget, options: Mapping[str, str]) -> dict[str, str]:
        # The libpq connection keywords the driver passes on (drivers/pg: pg_args).
        return client_keywords(target)

    def dlz_write_access(self, target: PgTarget, options: Mapping[str, str],
                         zones: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
        """The driver reads as the reader role still, and only its update connection logs in
        as the writer role (drivers/pg: writer_user), made now, whose password is in the same
        password file as the reader's. The writer may change the rows of the update zones
        only: of every driver's on this server, since two nameds over one store may take
        updates for different zones (limit_writes)."""
        self.database.writer_password(target)
        assert isinstance(target, PgServer)  # writer_password refuses a lent server
        target.writable_zones.update(zones)
        with self.database.connect(target) as conn:
            limit_writes(conn, WRITER_ROLE, sorted(target.writable_zones))
        return {**client_keywords(target), "writer_user": WRITER_ROLE}, target.env


class PgSession(sql.SqlSession):
    """A writer's psycopg connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def run(self, query: str, params: Sequence[object] = ()) -> tuple[list[tuple], int]:
        cursor = self.conn.execute(query, params)  # type: ignore[arg-type]
        return (cursor.fetchall() if cursor.description else []), cursor.rowcount

    def transaction(self) -> AbstractContextManager[object]:
        return self.conn.transaction()

    def close(self) -> None:
        self.conn.close()


def committed(conn: psycopg.Connection) -> psycopg.Connection:
    """The connection out of the transaction its schema check opened, so that each of the
    writer's transactions is one of its own (not a savepoint inside that one)."""
    conn.commit()
    return conn


def _insert_record(session: sql.SqlSession, zone_id: int, record: Record) -> None:
    session.run("INSERT INTO records (zone_id, name, type, ttl, data) VALUES (%s, %s, %s, %s, %s)",
                (zone_id, name_key(record.owner), record.rdtype, record.ttl, record.rdata))


def ensure_schema(conn: psycopg.Connection) -> None:
    """Apply the schema unless its tables and triggers are all there already (a database
    that holds the tables from before the triggers gets them)."""
    present = conn.execute("SELECT count(*) FROM pg_tables "
                           "WHERE schemaname = current_schema() AND tablename = ANY(%s)",
                           (list(TABLES),)).fetchone()
    triggers = conn.execute("SELECT count(DISTINCT t.tgname) FROM pg_trigger t "
                            "JOIN pg_class c ON c.oid = t.tgrelid "
                            "WHERE c.relnamespace = current_schema()::regnamespace "
                            "AND t.tgname = ANY(%s)", (list(NOTIFY_TRIGGERS),)).fetchone()
    if present is None or present[0] != len(TABLES) or triggers is None \
            or triggers[0] != len(NOTIFY_TRIGGERS):
        apply_schema(conn)


def grant_select(conn: psycopg.Connection, tables: Iterable[str], role: str) -> None:
    """role may SELECT from tables (the driver's reads), nothing more."""
    conn.execute(pg_sql.SQL("GRANT SELECT ON {} TO {}").format(
        pg_sql.SQL(", ").join(pg_sql.Identifier(table) for table in tables),
        pg_sql.Identifier(role)))


# The zones whose rows the writer role may add and delete (limit_writes).
WRITER_ZONES = "dlz_writer_zones"
# A records row of one of those zones, as a policy on records sees it.
_OF_WRITER_ZONES = pg_sql.SQL(
    "records.zone_id IN (SELECT z.id FROM zones z JOIN {} w ON w.zone = z.name)").format(
    pg_sql.Identifier(WRITER_ZONES))


def limit_writes(conn: psycopg.Connection, role: str, zones: Sequence[str]) -> None:
    """role, which may add and delete records rows (DlzTables.grant_write), may do so in
    zones (keys) only, whatever it connects with: row-level security on records, the one
    table the update path writes (ENT markers are records rows too), with the zones in table
    WRITER_ZONES (replaced by zones). Every other role reads every row through a policy of
    `true`, which the planner drops, so the readers' plans stay what they were; the loaders'
    account (a superuser, the tables' owner) is not subject to row-level security at all. A
    DELETE of another zone's rows finds none; an INSERT into one is an error."""
    policies = {
        "dlz_read": pg_sql.SQL("CREATE POLICY dlz_read ON records FOR SELECT USING (true)"),
        f"{role}_insert": pg_sql.SQL(
            "CREATE POLICY {} ON records FOR INSERT TO {} WITH CHECK ({})").format(
            pg_sql.Identifier(f"{role}_insert"), pg_sql.Identifier(role), _OF_WRITER_ZONES),
        f"{role}_delete": pg_sql.SQL(
            "CREATE POLICY {} ON records FOR DELETE TO {} USING ({})").format(
            pg_sql.Identifier(f"{role}_delete"), pg_sql.Identifier(role), _OF_WRITER_ZONES),
    }
    with conn.transaction():
        conn.execute(f'CREATE TABLE IF NOT EXISTS {WRITER_ZONES} (zone text COLLATE "C" '
                     "PRIMARY KEY)")
        conn.execute(f"DELETE FROM {WRITER_ZONES}")
        conn.execute(f"INSERT INTO {WRITER_ZONES} (zone) SELECT unnest(%s::text[])",
                     (list(zones),))
        # The policies run as the role that writes: it reads the list (and nothing else new).
        conn.execute(pg_sql.SQL("GRANT SELECT ON {} TO {}").format(
            pg_sql.Identifier(WRITER_ZONES), pg_sql.Identifier(role)))
        # Made once: each of these statements waits for every open transaction on records
        # (another named's), and the list above is all that changes from driver to driver.
        made = {name for (name,) in conn.execute(
            "SELECT policyname FROM pg_policies WHERE schemaname = current_schema() "
            "AND tablename = 'records'")}
        for name, statement in policies.items():
            if name not in made:
                conn.execute(statement)
        enabled = conn.execute("SELECT relrowsecurity FROM pg_class "
                               "WHERE oid = 'records'::regclass").fetchone()
        if not (enabled and enabled[0]):
            conn.execute("ALTER TABLE records ENABLE ROW LEVEL SECURITY")


def apply_schema(conn: psycopg.Connection) -> None:
    """Every statement of schemas/pg.sql, then the script schemas/pg_notify.sql, in one
    transaction (each is idempotent)."""
    with conn.transaction():
        for statement in sql.schema_statements(SCHEMA):
            conn.execute(statement)
        # Without parameters psycopg sends the script as one simple query: its statements
        # run in order, their dollar-quoted bodies whole.
        conn.execute(NOTIFY_SCRIPT.read_text())


def _others_objects(conn: psycopg.Connection) -> tuple[list[str], list[str]]:
    """(every relation in the database the suite did not create, those among them named as
    its own tables are)."""
    foreign, clashing = [], []
    for schema, relation, named_as_own, marked in conn.execute(_RELATIONS,
                                                               (list(TABLES), OWN_MARK)):
        if named_as_own and marked:
            continue
        foreign.append(f"{schema}.{relation}")
        if named_as_own:
            clashing.append(f"table {schema}.{relation}")
    return foreign, clashing


def _replace_zones(conn: psycopg.Connection, batch: list[Zone]) -> None:
    """Delete the batch's zones (cascading to their rows) and write them anew, inside the
    caller's transaction."""
    keys = sql.zone_keys(batch)
    # Whole zones: their zones rows tell a caching driver of the change, and their records
    # rows need not, one notification each (schemas/pg_notify.sql). For this transaction only.
    conn.execute("SELECT set_config('dlz.zone_replace', 'on', true)")
    conn.execute("DELETE FROM zones WHERE name = ANY(%s)", (keys,))
    ids = dict(conn.execute("INSERT INTO zones (name) SELECT unnest(%s::text[]) "
                            "RETURNING name, id", (keys,)).fetchall())
    with conn.cursor() as cur, cur.copy(_COPY_RECORDS) as copy:
        for zone in batch:
            zone_id = ids[zone.key]
            for row in sql.zone_rows(zone):
                copy.write_row((zone_id, *row))
    conn.execute("INSERT INTO xfr_clients (zone_id, client) "
                 "SELECT z, c FROM unnest(%s::integer[]) z, unnest(%s::text[]) c",
                 (list(ids.values()), list(DEFAULT_XFR_CLIENTS)))


LOADER = PgLoader()
