"""The pdns_pg store: PowerDNS's own PostgreSQL schema (the Debian package's schema file) in a
private PostgreSQL 15 like the pg store's, loaded with COPY; read by pdns_server's gpgsql
backend.

A store of its own rather than a second schema in the pg store: a store's load writes one
layout (the runner times it as the load of the servers it feeds), PowerDNS's `records`
table would clash with the DLZ schema's, and `startup` loads each store once for all the
servers it feeds, so pg's DLZ driver never pays for PowerDNS's rows nor the reverse.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import psycopg
from psycopg import sql as pg_sql

from base.update_access import UpdateAccess
from databases.postgresql import WRITER_ROLE, PgTarget, PostgresDatabase, driver_endpoint
from loaders import pdns_rows, sql
from loaders.loader import Loader
from loaders.pg import PgSession, committed, grant_select
from loaders.writes import StoreWriter
from zonedata.model import Zone

_COPY_RECORDS = "COPY records (domain_id, name, type, content, ttl, prio, auth) FROM STDIN"


class PdnsTables:
    """PowerDNS's schema file's tables, made on a fresh server."""

    def ensure(self, conn: psycopg.Connection) -> None:
        present = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = "
                               "current_schema() AND tablename = ANY(%s)",
                               (list(pdns_rows.TABLES),)).fetchone()
        if present is None or present[0] != len(pdns_rows.TABLES):
            with conn.transaction():
                for statement in sql.schema_statements(pdns_rows.PG_SCHEMA):
                    conn.execute(statement)

    def grant_read(self, conn: psycopg.Connection, role: str) -> None:
        # Every table of PowerDNS's schema file: gpgsql reads others than the two the
        # loader writes (domainmetadata, cryptokeys, ... as its settings ask).
        tables = [name for (name,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        grant_select(conn, tables, role)

    def grant_write(self, conn: psycopg.Connection, role: str) -> None:
        # PowerDNS's RFC 2136 path writes records (gsqlbackend.cc: insert, delete an RRset,
        # update ordername and auth, remove and insert empty non-terminals), drawing its ids
        # from records' sequence, and deletes a deleted RRset's comments (without that grant
        # every delete was SERVFAIL: "permission denied for table comments"); the key and
        # zone metadata stay the loader's.
        self.grant_read(conn, role)
        conn.execute(pg_sql.SQL("GRANT INSERT, UPDATE, DELETE ON records TO {}").format(
            pg_sql.Identifier(role)))
        conn.execute(pg_sql.SQL("GRANT DELETE ON comments TO {}").format(
            pg_sql.Identifier(role)))
        conn.execute(pg_sql.SQL("GRANT USAGE ON SEQUENCE records_id_seq TO {}").format(
            pg_sql.Identifier(role)))


class PdnsPgLoader(Loader[PgTarget]):
    name = "pdns_pg"
    # No lent database (--store-url): only pg, mysql and ldap take one.
    database = PostgresDatabase(name, PdnsTables())

    def load(self, zones: Iterable[Zone], target: PgTarget) -> None:
        with self.database.connect(target) as conn:
            for batch in sql.zone_batches(zones):
                with conn.transaction():  # each zone old or new to a reader, never a mix
                    _replace_zones(conn, batch)

    def read_back(self, target: PgTarget) -> Iterator[Zone]:
        with self.database.connect(target) as conn, conn.cursor() as cur:
            yield from pdns_rows.zones_from_rows(cur.stream(pdns_rows.READ_BACK))

    def writer(self, target: PgTarget) -> StoreWriter:
        """The rows PowerDNS reads, written as a provisioning system writes them: one SQL
        transaction a change, ENT rows and auth kept as pdns_rows writes them."""
        return sql.SqlWriter(PgSession(committed(self.database.connect(target))), pdns_rows.LAYOUT,
                             pdns_rows.insert_record, pdns_rows.marker_values,
                             lambda session, zone: _replace_zones(session.conn, [zone]))

    def pdns_settings(self, target: PgTarget) -> dict[str, str]:
        host, port = driver_endpoint(target)
        return {"launch": "gpgsql", "gpgsql-host": host, "gpgsql-port": str(port),
                "gpgsql-dbname": target.dbname, "gpgsql-user": target.driver_user,
                # PowerDNS reads its password from pdns.conf, which is written 0600.
                "gpgsql-password": target.driver_password or ""}

    def pdns_update_settings(self, target: PgTarget, access: UpdateAccess) -> dict[str, str]:
        with self.database.connect(target) as conn, conn.transaction():
            for statement, params in _update_statements(access):
                conn.execute(statement, params)
        # An update is a write: gpgsql connects as the writer role (the reader's rights, and
        # changing records: PdnsTables.grant_write), since the reader may only SELECT.
        return {**self.pdns_settings(target), "gpgsql-user": WRITER_ROLE,
                "gpgsql-password": self.database.writer_password(target)}


def _update_statements(access: UpdateAccess) -> list[pdns_rows.Statement]:
    key = access.key
    return pdns_rows.update_statements(key.bare_name, key.algorithm, key.secret,
                                       access.open_zones, access.keyed_zones)


def _replace_zones(conn: psycopg.Connection, batch: list[Zone]) -> None:
    """Write the batch's zones anew under their domain ids: a zone already there keeps its
    id, which PowerDNS's caches may hold (a new id would hide the zone until they expire)."""
    names = [pdns_rows.pdns_name(zone.origin) for zone in batch]
    conn.execute("INSERT INTO domains (name, type) SELECT unnest(%s::text[]), 'NATIVE' "
                 "ON CONFLICT (name) DO NOTHING", (names,))
    ids = dict(conn.execute("SELECT name, id FROM domains WHERE name = ANY(%s)",
                            (names,)).fetchall())
    conn.execute("DELETE FROM records WHERE domain_id = ANY(%s)", (list(ids.values()),))
    with conn.cursor() as cur, cur.copy(_COPY_RECORDS) as copy:
        for zone, name in zip(batch, names, strict=True):
            for row in pdns_rows.zone_rows(zone):
                copy.write_row((ids[name], *row))


LOADER = PdnsPgLoader()
