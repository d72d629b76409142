"""The pdns_mysql store: PowerDNS's own MySQL schema (the Debian package's schema file) in a
private MariaDB 10.11 like the mysql store's, loaded with multi-row INSERTs; read by
pdns_server's gmysql backend.

A store of its own for the reasons loaders/pdns_pg.py gives.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Iterator

import MySQLdb

from base.errors import UserError
from base.update_access import UpdateAccess
from databases.mariadb import (
    MariadbDatabase,
    MysqlServer,
    MysqlTarget,
    driver_endpoint,
    streamed_rows,
    transaction,
)
from loaders import pdns_rows, sql
from loaders.loader import Loader
from loaders.mysql import MysqlSession
from loaders.writes import StoreWriter
from zonedata.model import Zone

_INSERT_RECORDS = ("INSERT INTO records (domain_id, name, type, content, ttl, prio, auth) "
                   "VALUES (%s, %s, %s, %s, %s, %s, %s)")


class PdnsTables:
    """PowerDNS's schema file's tables, made on a fresh server."""

    def ensure(self, conn: MySQLdb.Connection) -> None:
        cursor = conn.cursor()
        cursor.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = "
                       "DATABASE() AND table_name IN (%s, %s)", pdns_rows.TABLES)
        (present,) = cursor.fetchone()
        if present != len(pdns_rows.TABLES):
            for statement in sql.schema_statements(pdns_rows.MYSQL_SCHEMA):
                cursor.execute(statement)  # DDL commits by itself


class PdnsMysqlLoader(Loader[MysqlTarget]):
    name = "pdns_mysql"
    # No lent database (--store-url): only pg, mysql and ldap take one.
    database = MariadbDatabase(name, PdnsTables())

    def load(self, zones: Iterable[Zone], target: MysqlTarget) -> None:
        conn = self.database.connect(target)
        try:
            for batch in sql.zone_batches(zones):
                with transaction(conn):  # each zone old or new to a reader, never a mix
                    _replace_zones(conn, batch)
        finally:
            conn.close()

    def read_back(self, target: MysqlTarget) -> Iterator[Zone]:
        rows = streamed_rows(self.database.connect(target), pdns_rows.READ_BACK)
        yield from pdns_rows.zones_from_rows(rows)

    def writer(self, target: MysqlTarget) -> StoreWriter:
        """The rows PowerDNS reads, written as a provisioning system writes them: one SQL
        transaction a change, ENT rows and auth kept as pdns_rows writes them."""
        return sql.SqlWriter(MysqlSession(self.database.connect(target)), pdns_rows.LAYOUT,
                             pdns_rows.insert_record, pdns_rows.marker_values,
                             lambda session, zone: _replace_zones(session.conn, [zone]))

    def pdns_settings(self, target: MysqlTarget) -> dict[str, str]:
        where = {f"gmysql-{key}": str(value) for key, value in driver_endpoint(target).items()}
        return {"launch": "gmysql", **where, "gmysql-dbname": target.database,
                "gmysql-user": target.driver_user,
                # PowerDNS reads its password from pdns.conf, which is written 0600.
                "gmysql-password": target.driver_password or ""}

    def pdns_update_settings(self, target: MysqlTarget,
                             access: UpdateAccess) -> dict[str, str]:
        if not isinstance(target, MysqlServer) or target.db_host is not None:
            raise UserError("PowerDNS takes updates only into the suite's own MariaDB on "
                            "this host")
        key = access.key
        conn = self.database.connect(target)
        try:
            with transaction(conn):
                cursor = conn.cursor()
                for statement, params in pdns_rows.update_statements(
                        key.bare_name, key.algorithm, key.secret, access.open_zones,
                        access.keyed_zones):
                    cursor.execute(statement, params)
        finally:
            conn.close()
        # An update is a write: gmysql connects as an account of its own that may change
        # records, since the reader may only SELECT.
        return {**self.pdns_settings(target), "gmysql-user": WRITER_USER,
                "gmysql-password": _writer(target)}


# The account an updating PowerDNS connects as: the reader's rights, and what PowerDNS's RFC
# 2136 path changes (gsqlbackend.cc: records rows inserted, updated and deleted, a deleted
# RRset's comments deleted); the key and zone metadata stay the loader's.
WRITER_USER = "pdns_writer"
_WRITER_GRANTS = ("GRANT SELECT ON `{db}`.* TO {account}",
                  "GRANT INSERT, UPDATE, DELETE ON `{db}`.`records` TO {account}",
                  "GRANT DELETE ON `{db}`.`comments` TO {account}")


def _writer(target: MysqlServer) -> str:
    """WRITER_USER made (or renewed) by root over the server's socket; its password, derived
    from the loaders' (random per server instance) so that every PowerDNS over this server
    gets the same one."""
    password = hmac.new(target.password.encode(), WRITER_USER.encode(),
                        hashlib.sha256).hexdigest()[:32]
    target.make_account(WRITER_USER, password, _WRITER_GRANTS)
    return password


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


LOADER = PdnsMysqlLoader()
