"""The PostgreSQL store: schemas/pg.sql in a private PostgreSQL 15, loaded with COPY."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import psycopg

from base.netns import DatabaseHost
from base.paths import SCHEMA_DIR
from databases.postgresql import ExternalPg, PgServer, PgTarget
from databases.url import StoreUrl, check_lent_database
from loaders import sql
from loaders.store import DEFAULT_XFR_CLIENTS, CacheReading, Store
from zonedata.model import ENT_TYPE, Zone

SCHEMA = SCHEMA_DIR / "pg.sql"
TABLES = ("zones", "records", "xfr_clients")

# blks_read counts blocks not in shared_buffers, read from the kernel (its page cache or
# the disk): the hit ratio is shared_buffers', not the machine's.
_CACHE_QUERY = ("SELECT d.blks_hit, d.blks_read, "
                "(SELECT setting::bigint * pg_size_bytes(unit) FROM pg_settings "
                "WHERE name = 'shared_buffers') "
                "FROM pg_stat_database d WHERE d.datname = current_database()")
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


class PgStore(Store[PgTarget]):
    name = "pg"
    has_server = True
    url_schemes = ("postgresql", "postgres")

    @contextmanager
    def server(self, run_dir: Path, *,
               db_host: DatabaseHost | None = None) -> Iterator[PgServer]:
        with PgServer(run_dir, db_host=db_host) as pg, _connect(pg):
            yield pg

    def check_external(self, url: StoreUrl, *, overwrite: bool) -> str:
        with ExternalPg(url).connect() as conn:
            try:
                _check_lent(conn, url, overwrite)
            except psycopg.Error as exc:
                raise url.error(f"cannot read the database's objects: {exc}") from None
            number = conn.info.server_version
        return f"PostgreSQL {number // 10000}.{number % 10000}"

    @contextmanager
    def external(self, url: StoreUrl, *, overwrite: bool) -> Iterator[PgTarget]:
        target = ExternalPg(url)
        with target.connect() as conn:
            conn.autocommit = True
            _check_lent(conn, url, overwrite)
            try:
                _hold_own_tables_empty(conn)
            except psycopg.Error as exc:  # e.g. no CREATE privilege: one transaction, undone
                raise url.error(f"cannot create the suite's tables: {exc}") from None
        yield target

    def server_is_ours(self, target: PgTarget) -> bool:
        return target.started_here

    def client_env(self, target: PgTarget) -> dict[str, str]:
        return target.env

    def load(self, zones: Iterable[Zone], target: PgTarget) -> None:
        with _connect(target) as conn:
            for batch in sql.zone_batches(zones):
                # One transaction per batch: a reader sees each zone either old or new, and a
                # batch that raises half-way leaves its zones as they were.
                with conn.transaction():
                    _replace_zones(conn, batch)

    def read_back(self, target: PgTarget) -> Iterator[Zone]:
        with _connect(target) as conn, conn.cursor() as cur:
            yield from sql.zones_from_rows(cur.stream(sql.READ_BACK, (ENT_TYPE,)))

    def dlz_args(self, target: PgTarget, options: Mapping[str, str]) -> dict[str, str]:
        # The libpq connection keywords the driver passes on (drivers/pg: pg_keys).
        host, port = target.via or (target.host, target.port)
        args = {"host": host, "port": str(port), "dbname": target.dbname, "user": target.user}
        return {key: value for key, value in args.items() if value is not None}

    @contextmanager
    def round_trips(self, target: PgTarget) -> Iterator[Callable[[], object]]:
        with psycopg.connect(**self.dlz_args(target, {}), autocommit=True) as conn:
            yield lambda: conn.execute("SELECT 1").fetchone()

    def tcp_endpoint(self, target: PgTarget) -> tuple[str, int]:
        # Locally the postmaster listens on 127.0.0.1 beside its socket.
        return (target.db_host.address if target.db_host else "127.0.0.1", target.port)

    def restart_server(self, target: PgTarget) -> None:
        target.restart()

    def server_pids(self, target: PgTarget) -> list[int]:
        return target.pids()

    def cache_reading(self, target: PgTarget, options: Mapping[str, str]) -> CacheReading | None:
        if not target.started_here:
            return None  # a server shared with others: its counters are not the suite's alone
        # A backend publishes its block counts at the end of a transaction, at most once a
        # second (PostgreSQL 15's shared statistics): a reading lags the last second or so.
        with target.connect() as conn:
            row = conn.execute(_CACHE_QUERY).fetchone()
        assert row is not None  # the database the connection is to has its row
        hits, reads, configured = row
        return CacheReading("PostgreSQL shared_buffers: pg_stat_database blks_hit / "
                            "blks_read", int(configured), hits=int(hits), misses=int(reads))


def _connect(target: PgTarget) -> psycopg.Connection:
    """An autocommit connection (transactions are explicit) to a database holding the schema."""
    conn = target.connect()
    conn.autocommit = True
    try:
        ensure_schema(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def ensure_schema(conn: psycopg.Connection) -> None:
    """Apply schemas/pg.sql unless its tables are all there already."""
    present = conn.execute("SELECT count(*) FROM pg_tables "
                           "WHERE schemaname = current_schema() AND tablename = ANY(%s)",
                           (list(TABLES),)).fetchone()
    if present is None or present[0] != len(TABLES):
        apply_schema(conn)


def apply_schema(conn: psycopg.Connection) -> None:
    """Every statement of schemas/pg.sql, in one transaction (each is idempotent)."""
    with conn.transaction():
        for statement in sql.schema_statements(SCHEMA):
            conn.execute(statement)


def _check_lent(conn: psycopg.Connection, url: StoreUrl, overwrite: bool) -> None:
    foreign, clashing = _others_objects(conn)
    check_lent_database(url, foreign=foreign, clashing=clashing, overwrite=overwrite)


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


def _hold_own_tables_empty(conn: psycopg.Connection) -> None:
    """The suite's tables in the database, marked as its own, holding no zone (a command loads
    its data set into an empty store, as into a private server)."""
    apply_schema(conn)
    conn.execute(f"TRUNCATE {', '.join(TABLES)}")


def _replace_zones(conn: psycopg.Connection, batch: list[Zone]) -> None:
    """Delete the batch's zones (cascading to their rows) and write them anew."""
    keys = sql.zone_keys(batch)
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


STORE = PgStore()
