"""The pdns_mysql store: PowerDNS's own MySQL schema (the Debian package's schema file) in a
private MariaDB 10.11 like the mysql store's, loaded with multi-row INSERTs; read by
pdns_server's gmysql backend.

A store of its own for the reasons loaders/pdns_pg.py gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import MySQLdb
import MySQLdb.cursors

from base.netns import DatabaseHost
from databases.mariadb import MysqlServer
from loaders import pdns_rows, sql
from loaders.mysql import MysqlStore
from zonedata.model import Zone

_INSERT_RECORDS = ("INSERT INTO records (domain_id, name, type, content, ttl, prio, auth) "
                   "VALUES (%s, %s, %s, %s, %s, %s, %s)")


class PdnsMysqlStore(MysqlStore):
    name = "pdns_mysql"

    @contextmanager
    def server(self, run_dir: Path, *,
               db_host: DatabaseHost | None = None) -> Iterator[MysqlServer]:
        with MysqlServer(run_dir, db_host=db_host) as db:
            _connect(db).close()
            yield db

    def load(self, zones: Iterable[Zone], target: MysqlServer) -> None:
        conn = _connect(target)
        try:
            for batch in sql.zone_batches(zones):
                try:
                    _replace_zones(conn, batch)
                except BaseException:
                    # As the mysql store: a connection out of sync cannot roll back; closing
                    # it ends the transaction uncommitted just the same.
                    with suppress(MySQLdb.Error):
                        conn.rollback()
                    raise
                conn.commit()  # each zone old or new to a reader, never a mix
        finally:
            conn.close()

    def read_back(self, target: MysqlServer) -> Iterator[Zone]:
        conn = _connect(target)
        try:
            cursor = conn.cursor(MySQLdb.cursors.SSCursor)
            cursor.execute(pdns_rows.READ_BACK)
            yield from pdns_rows.zones_from_rows(cursor)
        finally:
            conn.close()

    def pdns_settings(self, target: MysqlServer) -> dict[str, str]:
        if target.via is not None:
            where = {"gmysql-host": target.via[0], "gmysql-port": str(target.via[1])}
        elif target.host is not None:
            where = {"gmysql-host": target.host, "gmysql-port": str(target.port)}
        else:
            where = {"gmysql-socket": target.socket}
        return {"launch": "gmysql", **where, "gmysql-dbname": target.database,
                "gmysql-user": target.user, "gmysql-password": target.password}


def _connect(target: MysqlServer) -> MySQLdb.Connection:
    """A connection (autocommit off) to a database with PowerDNS's schema."""
    conn = target.connect()
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = "
                       "DATABASE() AND table_name IN (%s, %s)", pdns_rows.TABLES)
        (present,) = cursor.fetchone()
        if present != len(pdns_rows.TABLES):
            for statement in sql.schema_statements(pdns_rows.MYSQL_SCHEMA):
                cursor.execute(statement)  # DDL commits by itself
    except BaseException:
        conn.close()
        raise
    return conn


def _replace_zones(conn: MySQLdb.Connection, batch: list[Zone]) -> None:
    """Write the batch's zones anew under their domain ids (see loaders/pdns_pg.py); the
    schema has no foreign keys, so the old records go explicitly."""
    cursor = conn.cursor()
    names = [pdns_rows.pdns_name(zone.origin) for zone in batch]
    in_names = ", ".join(["%s"] * len(names))
    cursor.executemany("INSERT IGNORE INTO domains (name, type) VALUES (%s, 'NATIVE')",
                       [(name,) for name in names])
    cursor.execute(f"SELECT name, id FROM domains WHERE name IN ({in_names})", names)
    ids = {name: domain_id for name, domain_id in cursor.fetchall()}
    in_ids = ", ".join(["%s"] * len(ids))
    cursor.execute(f"DELETE FROM records WHERE domain_id IN ({in_ids})", list(ids.values()))
    cursor.executemany(_INSERT_RECORDS, [(ids[name], *row)
                                         for zone, name in zip(batch, names, strict=True)
                                         for row in pdns_rows.zone_rows(zone)])


STORE = PdnsMysqlStore()
