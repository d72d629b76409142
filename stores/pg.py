"""The PostgreSQL store: schemas/pg.sql in a private PostgreSQL 15, loaded with COPY."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import psycopg

from base.netns import DatabaseHost
from base.paths import SCHEMA_DIR
from stores import sql
from stores.pg_server import PgServer
from stores.store import DEFAULT_XFR_CLIENTS, CacheReading, Store
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


class PgStore(Store[PgServer]):
    name = "pg"
    has_server = True

    @contextmanager
    def server(self, run_dir: Path, *,
               db_host: DatabaseHost | None = None) -> Iterator[PgServer]:
        with PgServer(run_dir, db_host=db_host) as pg, _connect(pg):
            yield pg

    def load(self, zones: Iterable[Zone], target: PgServer) -> None:
        with _connect(target) as conn:
            for batch in sql.zone_batches(zones):
                # One transaction per batch: a reader sees each zone either old or new, and a
                # batch that raises half-way leaves its zones as they were.
                with conn.transaction():
                    _replace_zones(conn, batch)

    def read_back(self, target: PgServer) -> Iterator[Zone]:
        with _connect(target) as conn, conn.cursor() as cur:
            yield from sql.zones_from_rows(cur.stream(sql.READ_BACK, (ENT_TYPE,)))

    def dlz_args(self, target: PgServer, options: Mapping[str, str]) -> dict[str, str]:
        # The libpq connection keywords the driver passes on (drivers/pg: pg_keys).
        host, port = target.via or (target.host, target.port)
        return {"host": host, "port": str(port), "dbname": target.dbname, "user": target.user}

    @contextmanager
    def round_trips(self, target: PgServer) -> Iterator[Callable[[], object]]:
        with psycopg.connect(**self.dlz_args(target, {}), autocommit=True) as conn:
            yield lambda: conn.execute("SELECT 1").fetchone()

    def tcp_endpoint(self, target: PgServer) -> tuple[str, int]:
        # Locally the postmaster listens on 127.0.0.1 beside its socket.
        return (target.db_host.address if target.db_host else "127.0.0.1", target.port)

    def restart_server(self, target: PgServer) -> None:
        target.restart()

    def server_pids(self, target: PgServer) -> list[int]:
        return target.pids()

    def cache_reading(self, target: PgServer, options: Mapping[str, str]) -> CacheReading:
        # A backend publishes its block counts at the end of a transaction, at most once a
        # second (PostgreSQL 15's shared statistics): a reading lags the last second or so.
        with target.connect() as conn:
            row = conn.execute(_CACHE_QUERY).fetchone()
        assert row is not None  # the database the connection is to has its row
        hits, reads, configured = row
        return CacheReading("PostgreSQL shared_buffers: pg_stat_database blks_hit / "
                            "blks_read", int(configured), hits=int(hits), misses=int(reads))


def _connect(target: PgServer) -> psycopg.Connection:
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
