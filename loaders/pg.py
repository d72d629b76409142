"""The PostgreSQL store: schemas/postgres.sql in a private PostgreSQL 15, loaded with COPY."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from bench.servers.postgres import Postgres
from loaders import sql
from loaders.model import ENT_TYPE, Zone
from loaders.store import DEFAULT_XFR_CLIENTS, LoadStats, Store, Timer

SCHEMA = sql.SCHEMA_DIR / "postgres.sql"
TABLES = ("zones", "records", "xfr_clients")

_COPY_RECORDS = "COPY records (zone_id, name, type, ttl, data) FROM STDIN"


class PgStore(Store):
    name = "pg"
    variants = ("pg",)

    @contextmanager
    def server(self, run_dir: Path) -> Iterator[Postgres]:
        with Postgres(run_dir) as pg, _connect(pg):
            yield pg

    def load(self, zones: Iterable[Zone], target: Postgres) -> LoadStats:
        stats = LoadStats(self.name)
        with Timer() as timer, _connect(target) as conn:
            for batch in sql.zone_batches(zones):
                # One transaction per batch: a reader sees each zone either old or new, and a
                # batch that raises half-way leaves its zones as they were.
                with conn.transaction():
                    _replace_zones(conn, batch)
                stats.zones += len(batch)
                stats.records += sql.record_count(batch)
        stats.seconds = timer.seconds
        return stats

    def read_back(self, target: Postgres) -> Iterator[Zone]:
        with _connect(target) as conn, conn.cursor() as cur:
            yield from sql.zones_from_rows(cur.stream(sql.READ_BACK, (ENT_TYPE,)))

    def dlz_clause(self, variant: str, target: Postgres, threads: int, connections: int) -> str:
        # The driver hands the conninfo words to libpq as they are; threads are named's own.
        return sql.dlz_clause(self.name, self.driver_file(variant),
                              [f"connections={connections}", *target.conninfo().split()])

    def driver_file(self, variant: str) -> Path:
        return sql.driver_file("pg")

    def restart_server(self, target: Postgres) -> None:
        target.restart()

    def server_pids(self, target: Postgres) -> list[int]:
        return target.pids()


def _connect(target: Postgres) -> psycopg.Connection:
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
    """Apply schemas/postgres.sql unless its tables are all there already."""
    present = conn.execute("SELECT count(*) FROM pg_tables "
                           "WHERE schemaname = current_schema() AND tablename = ANY(%s)",
                           (list(TABLES),)).fetchone()
    if present is None or present[0] != len(TABLES):
        apply_schema(conn)


def apply_schema(conn: psycopg.Connection) -> None:
    """Every statement of schemas/postgres.sql, in one transaction (each is idempotent)."""
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
