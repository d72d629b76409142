"""The MariaDB store: schemas/mysql.sql in a private MariaDB 10.11 (InnoDB), loaded with
multi-row INSERTs.

Not LOAD DATA LOCAL INFILE: the server names the file a LOCAL client sends, so a server lent
by --store-url could ask for any file of this host (the client connections have local_infile
off: databases/mariadb.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, suppress

import dns.name
import MySQLdb

from base.paths import SCHEMA_DIR
from databases.mariadb import (
    MariadbDatabase,
    MysqlServer,
    MysqlTarget,
    driver_endpoint,
    streamed_rows,
    transaction,
)
from databases.url import StoreUrl, check_lent_database
from loaders import sql
from loaders.loader import DEFAULT_XFR_CLIENTS, Loader
from loaders.writes import StoreWriter
from zonedata.model import ENT_TYPE, Record, Zone, name_key

SCHEMA = SCHEMA_DIR / "mysql.sql"
# The change log a caching driver polls (its change channel), with its triggers and routine.
CHANGES_SCRIPT = SCHEMA_DIR / "mysql_changes.sql"
TABLES = ("zones", "records", "xfr_clients", "dlz_changes", "dlz_change_seq")
ROUTINES = ("dlz_note_change",)
CHANGE_TRIGGERS = ("dlz_change_record_added", "dlz_change_record_changed",
                   "dlz_change_record_deleted", "dlz_change_zone_added",
                   "dlz_change_zone_changed", "dlz_change_zone_deleted")
# The column of records the schema added last (rname, for the driver's update statements).
NEWEST_COLUMN = "rname"

# executemany sends this as multi-row INSERTs of up to 64 KiB each (MySQLdb's default
# statement size; about 1,000 rows of the quick profile). The values are bytes, so they go in
# as they are (binary literals), as the VARBINARY and BLOB columns hold them. The private
# server loads this way too: 1,000 zones x 10 records (11,801 rows) took a median 0.64 s
# (0.47-0.91 s) against 0.62 s (0.45-1.17 s) with LOAD DATA LOCAL INFILE, 9 alternating loads
# into one private MariaDB on the busy 2-core VM (1 MiB statements: 0.73 s), no difference
# worth a second path.
_INSERT_RECORDS = ("INSERT INTO records (zone_id, name, seq, type, ttl, data) "
                   "VALUES (%s, %s, %s, %s, %s, %s)")

# The comment schemas/mysql.sql gives the suite's tables at birth (DDL is not transactional
# here: a table is never left unmarked): in a database the suite did not create
# (--store-url), a table of the same name without it is someone else's.
OWN_MARK = "dlzbench store table"


class DlzTables:
    """schemas/mysql.sql's tables, as the MariaDB database must know them: made on a fresh
    server, claimed in a lent database (databases.database's Schema and LentSchema)."""

    def ensure(self, conn: MySQLdb.Connection) -> None:
        ensure_schema(conn)

    def check_lent(self, conn: MySQLdb.Connection, url: StoreUrl, *, overwrite: bool) -> None:
        foreign, clashing = _others_objects(conn)
        check_lent_database(url, foreign=foreign, clashing=clashing, overwrite=overwrite)

    def hold_empty(self, conn: MySQLdb.Connection, url: StoreUrl) -> None:
        """The suite's tables in the database, holding no zone."""
        apply_schema(conn)
        cursor = conn.cursor()
        # Rows of records and xfr_clients go with their zone (ON DELETE CASCADE).
        cursor.execute("DELETE FROM zones")
        conn.commit()


DLZ_TABLES = DlzTables()


class MysqlLoader(Loader[MysqlTarget]):
    name = "mysql"
    database = MariadbDatabase(name, DLZ_TABLES, DLZ_TABLES)

    def load(self, zones: Iterable[Zone], target: MysqlTarget) -> None:
        conn = self.database.connect(target)
        try:
            for batch in sql.zone_batches(zones):
                with transaction(conn):
                    _replace_zones(conn, batch)
        finally:
            conn.close()

    def read_back(self, target: MysqlTarget) -> Iterator[Zone]:
        rows = streamed_rows(self.database.connect(target), sql.READ_BACK, (ENT_TYPE,))
        yield from sql.zones_from_rows(_decoded(rows))

    def writer(self, target: MysqlTarget) -> StoreWriter:
        """SQL transactions (InnoDB) on a connection of the writer's own."""
        return sql.SqlWriter(MysqlSession(self.database.connect(target)), _LAYOUT,
                             _insert_record, _marker_values,
                             lambda session, zone: _replace_zones(session.conn, [zone]))

    def dlz_args(self, target: MysqlTarget, options: Mapping[str, str]) -> dict[str, str]:
        # The password reaches the driver in a file of its own (password_file), not here.
        args = {**driver_endpoint(target), "user": target.driver_user,
                "database": target.database, "password_file": target.password_file,
                "tls_ca": target.tls_ca}
        return {key: str(value) for key, value in args.items() if value is not None}

    def dlz_write_access(self, target: MysqlTarget, options: Mapping[str, str],
                         zones: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
        """The driver reads as before and writes as the writer account (made now on the
        suite's own server), whose password comes from a file beside the reader's. There the
        writer may change the records of the update zones only: of every driver's on this
        server, since two nameds over one store may take updates for different zones
        (limit_writes). A lent server's account is its owner's to limit."""
        user, password_file = target.writer_account()
        if isinstance(target, MysqlServer):
            target.writable_zones.update(zones)
            conn = self.database.connect(target)
            try:
                limit_writes(conn, user, sorted(target.writable_zones))
            finally:
                conn.close()
        args = self.dlz_args(target, options)
        if user is not None:
            args["writer_user"] = user
        if password_file is not None:
            args["writer_password_file"] = str(password_file)
        return args, self.database.client_env(target)


class MysqlSession(sql.SqlSession):
    """A writer's MySQLdb connection (autocommit off); binary columns come back as text."""

    def __init__(self, conn: MySQLdb.Connection) -> None:
        self.conn = conn

    def run(self, query: str, params: Sequence[object] = ()) -> tuple[list[tuple], int]:
        cursor = self.conn.cursor()
        cursor.execute(query, tuple(params))
        rows = [tuple(_text(v) if isinstance(v, bytes) else v for v in row)
                for row in cursor.fetchall() or ()]
        return rows, cursor.rowcount

    def transaction(self) -> AbstractContextManager[object]:
        return transaction(self.conn)

    def close(self) -> None:
        self.conn.close()


# `seq` only makes (name, zone_id, seq) unique: a new row takes the next free one of its name.
_NEXT_SEQ = "SELECT COALESCE(MAX(seq) + 1, 0) FROM records WHERE name = %s AND zone_id = %s"
_LAYOUT = dataclasses.replace(
    sql.DLZ_LAYOUT, add_marker="INSERT INTO records (zone_id, name, type, ttl, data, seq) "
                               f"VALUES (%s, %s, '{ENT_TYPE}', 0, '', %s)")


def _next_seq(session: sql.SqlSession, zone_id: int, key: str) -> int:
    rows, _ = session.run(_NEXT_SEQ, (key, zone_id))
    return int(rows[0][0])


def _marker_values(session: sql.SqlSession, zone_id: int, name: dns.name.Name) -> tuple:
    return (_next_seq(session, zone_id, name_key(name)),)


def _insert_record(session: sql.SqlSession, zone_id: int, record: Record) -> None:
    key = name_key(record.owner)
    session.run(_INSERT_RECORDS, (zone_id, key, _next_seq(session, zone_id, key),
                                  record.rdtype, record.ttl, record.rdata))


def ensure_schema(conn: MySQLdb.Connection) -> None:
    """Apply the schema unless its tables, triggers and records' newest column are all there
    already (a store loaded before the change log or the column gets them)."""
    cursor = conn.cursor()
    cursor.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = "
                   f"DATABASE() AND table_name IN ({', '.join(['%s'] * len(TABLES))})", TABLES)
    (tables,) = cursor.fetchone()
    cursor.execute("SELECT COUNT(*) FROM information_schema.triggers WHERE trigger_schema = "
                   f"DATABASE() AND trigger_name IN ({', '.join(['%s'] * len(CHANGE_TRIGGERS))})",
                   CHANGE_TRIGGERS)
    (triggers,) = cursor.fetchone()
    cursor.execute("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = "
                   "DATABASE() AND table_name = 'records' AND column_name = %s", (NEWEST_COLUMN,))
    (newest,) = cursor.fetchone()
    if tables != len(TABLES) or triggers != len(CHANGE_TRIGGERS) or not newest:
        apply_schema(conn)


def apply_schema(conn: MySQLdb.Connection) -> None:
    """Every statement of schemas/mysql.sql, then of schemas/mysql_changes.sql (each is
    idempotent; DDL commits by itself)."""
    cursor = conn.cursor()
    for statement in sql.schema_statements(SCHEMA):
        cursor.execute(statement)
    for statement in CHANGES_SCRIPT.read_text().split("\n$$\n"):
        cursor.execute(statement)
    conn.commit()  # the number row


# The zones whose records the writer account may add and delete (limit_writes).
WRITER_ZONES = "dlz_writer_zones"


def limit_writes(conn: MySQLdb.Connection, user: str, zones: Sequence[str]) -> None:
    """The account user, which may add and delete records rows (databases/mariadb.py:
    _WRITER_GRANTS), may do so in zones (keys) only: MariaDB has no row-level security, so a
    trigger before each insert and delete of a records row (ENT markers are rows too) refuses
    one of another zone when user wrote it, the zones in table WRITER_ZONES (replaced by
    zones). The driver's statements stay as they are, and reads are untouched; the loaders'
    writes pay a comparison of the session's user per row."""
    cursor = conn.cursor()
    cursor.execute(f"CREATE TABLE IF NOT EXISTS {WRITER_ZONES} (zone VARBINARY(1100) NOT NULL "
                   "PRIMARY KEY) ENGINE=InnoDB COMMENT='dlzbench store table'")
    cursor.execute(f"DELETE FROM {WRITER_ZONES}")
    cursor.executemany(f"INSERT INTO {WRITER_ZONES} (zone) VALUES (%s)",
                       [(zone,) for zone in zones])
    conn.commit()
    # Made by the first driver given the account (IF NOT EXISTS): only the list above changes
    # from one driver to the next.
    for event, row in (("INSERT", "NEW"), ("DELETE", "OLD")):
        cursor.execute(_writer_trigger(conn, user, event, row))


def _writer_trigger(conn: MySQLdb.Connection, user: str, event: str, row: str) -> str:
    """The trigger refusing user's `event` of a records row (`row`: NEW or OLD) of a zone not
    in WRITER_ZONES. USER() is the session's account (CURRENT_USER() would be the trigger's
    definer); the trigger reads the zones with its definer's rights, so user needs none."""
    name = f"{user}_{event.lower()}"
    refusal = f"{user} may write the records of its update zones only ({WRITER_ZONES})"
    account = conn.string_literal(user.encode()).decode()
    return (f"CREATE TRIGGER IF NOT EXISTS `{name}` BEFORE {event} ON records FOR EACH ROW "
            f"IF SUBSTRING_INDEX(USER(), '@', 1) = {account} AND NOT EXISTS ("
            f"SELECT 1 FROM zones z JOIN {WRITER_ZONES} w ON w.zone = z.name "
            f"WHERE z.id = {row}.zone_id) THEN "
            f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{refusal}'; END IF")


def _others_objects(conn: MySQLdb.Connection) -> tuple[list[str], list[str]]:
    """(every table, view and routine in the database the suite did not create, the tables
    among them named as its own tables are)."""
    cursor = conn.cursor()
    cursor.execute("SELECT table_name, table_type = 'BASE TABLE' AND table_comment = %s "
                   "FROM information_schema.tables WHERE table_schema = DATABASE() "
                   "ORDER BY table_name", (OWN_MARK,))
    foreign, clashing = [], []
    for raw_name, marked in cursor.fetchall():
        name = _text(raw_name)
        if name in TABLES and marked:
            continue
        foreign.append(name)
        if name in TABLES:
            clashing.append(f"table {name}")
    cursor.execute("SELECT routine_name, routine_comment = %s FROM information_schema.routines "
                   "WHERE routine_schema = DATABASE() ORDER BY routine_name", (OWN_MARK,))
    foreign += [f"routine {_text(name)}" for name, marked in cursor.fetchall()
                if not (_text(name) in ROUTINES and marked)]
    return foreign, clashing


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _replace_zones(conn: MySQLdb.Connection, batch: list[Zone]) -> None:
    """Delete the batch's zones (cascading to their rows) and write them anew, inside the
    caller's transaction."""
    cursor = conn.cursor()
    # Whole zones: their zones rows log the change for a caching driver, and their records
    # rows need not, one each (schemas/mysql_changes.sql). A session variable, so it is
    # cleared however the batch ends.
    cursor.execute("SET @dlz_zone_replace = 1")
    try:
        _write_zones(cursor, batch)
    except BaseException:
        # A Ctrl-C in the middle of a result leaves the connection out of sync, and the clear
        # then failed with "Commands out of sync" in place of the Ctrl-C (a CI run of
        # tests/test_interrupted_load.py): the first error is the one to say, and a
        # connection that cannot take the clear cannot take a later write either.
        with suppress(MySQLdb.Error):
            cursor.execute("SET @dlz_zone_replace = NULL")
        raise
    cursor.execute("SET @dlz_zone_replace = NULL")


def _write_zones(cursor: MySQLdb.cursors.Cursor, batch: list[Zone]) -> None:
    keys = sql.zone_keys(batch)
    in_keys = ", ".join(["%s"] * len(keys))
    cursor.execute(f"DELETE FROM zones WHERE name IN ({in_keys})", keys)
    cursor.executemany("INSERT INTO zones (name) VALUES (%s)", [(key,) for key in keys])
    cursor.execute(f"SELECT name, id FROM zones WHERE name IN ({in_keys})", keys)
    ids = {name.decode(): zone_id for name, zone_id in cursor.fetchall()}
    rows = list(_record_rows(batch, ids))
    cursor.executemany(_INSERT_RECORDS, rows)
    # A short count is a lost row, whatever a lent server's sql_mode made of its error.
    if cursor.rowcount != len(rows):
        raise RuntimeError(f"INSERT stored {cursor.rowcount} of {len(rows)} record rows")
    cursor.executemany("INSERT INTO xfr_clients (zone_id, client) VALUES (%s, %s)",
                       [(zone_id, client) for zone_id in ids.values()
                        for client in DEFAULT_XFR_CLIENTS])


def _record_rows(batch: list[Zone], ids: dict[str, int]) -> Iterator[tuple[object, ...]]:
    """The batch's rows of the records table, text columns as UTF-8 bytes."""
    for zone in batch:
        zone_id = ids[zone.key]
        # seq numbers a zone's rows so that (name, zone_id, seq) is a key even for two
        # rows of the same owner.
        for seq, (name, rdtype, ttl, data) in enumerate(sql.zone_rows(zone)):
            yield zone_id, name.encode(), seq, rdtype.encode(), ttl, data.encode()


def _decoded(rows: Iterable[tuple]) -> Iterator[sql.ReadBackRow]:
    """Read-back rows with the VARBINARY/BLOB columns turned back into text."""
    for zone, owner, ttl, rdtype, data in rows:
        if owner is None:
            yield zone.decode(), None, None, None, None
        else:
            yield zone.decode(), owner.decode(), ttl, rdtype.decode(), data.decode()


LOADER = MysqlLoader()
