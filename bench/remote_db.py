"""dlz{} clauses that reach the database over TCP at a given address: its own host's (bench.netns)
or a latency proxy's in front of it (bench.latency).

The stores' own clauses (loaders/) use the unix socket the database has on this machine; these
are the TCP variants, with the same driver arguments otherwise.
"""

from __future__ import annotations

from bench.latency import pg_conninfo_via
from bench.servers.mariadb import Mariadb
from bench.servers.postgres import Postgres
from loaders import sql
from loaders.pg import STORE as PG_STORE


def pg_dlz_clause(pg: Postgres, connections: int, host: str, port: int) -> str:
    """The pg driver (libpq conninfo words) connecting to host:port."""
    conninfo = pg_conninfo_via(pg.conninfo(), host, port)
    return sql.dlz_clause(PG_STORE.name, PG_STORE.driver_file("pg"),
                          [f"connections={connections}", *conninfo.split()])


def mysql_dlz_clause(db: Mariadb, connections: int, host: str, port: int) -> str:
    """The mysql driver connecting to host:port (its host= and port= arguments, no socket=)."""
    return sql.dlz_clause("mysql", sql.driver_file("mysql"), [
        f"connections={connections}", f"host={host}", f"port={port}", f"user={db.user}",
        f"password={db.password}", f"database={db.database}"])
