-- dlzbench: the MariaDB/MySQL store (driver dlz_mysql.so), MariaDB 10.11, InnoDB.
--
-- Applied by stores/mysql.py whenever a store is first used; every statement is idempotent.
-- Statements end with ';' at the end of a line (the loader splits on that). Every table is
-- born with the comment 'dlzbench store table': in a database the suite did not create
-- (--store-url), a table of one of these names without it is someone else's.
--
-- Keys (zones.name, records.name) are the model's name keys: BIND's lower-case presentation
-- text without the final dot, e.g. `www.example.com`, `a\.b.example.com`, `\000.example.com`.
-- They are ASCII and at most 1,003 characters (a 255-octet name whose bytes are all written
-- `\DDD`). VARBINARY compares bytes: no collation, no PAD SPACE, no case folding can make two
-- different keys equal. InnoDB's index key limit is 3,072 bytes (16 KiB pages, DYNAMIC row
-- format); the longest index here, records' primary key, takes 1,102 + 4 + 4 bytes.

CREATE TABLE IF NOT EXISTS zones (
    id   INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name VARBINARY(1100) NOT NULL,
    UNIQUE KEY zones_name (name)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC COMMENT='dlzbench store table';

-- One row per resource record, plus one marker row per empty non-terminal (type 'ENT',
-- ttl 0, data '') so that "name exists without data" is one exact lookup too.
-- `name` is the absolute owner key; `data` is the rdata in presentation form, names absolute
-- (MEDIUMBLOB: a 64 KiB TXT rdata is up to four times longer as text).
-- The primary key leads with the owner key: the driver's statement per query reads its few
-- rows straight from the clustered index, however large their zone. records_zone (whose
-- entries carry the primary key, so they are in (zone_id, name) order) serves zone transfer
-- and the cascading delete that replaces a zone. `seq`, the row's number within its zone
-- (given by the loader), only makes the key unique. `rname`, the owner key reversed, is
-- computed and never written (VIRTUAL: only records_rname holds it): the names below an owner
-- O are the keys ending in '.O', a prefix of the reversed key, so records_rname finds them in
-- a few index pages whatever the zone's size (statement 4).
CREATE TABLE IF NOT EXISTS records (
    zone_id INT UNSIGNED NOT NULL,
    name    VARBINARY(1100) NOT NULL,
    seq     INT UNSIGNED NOT NULL,
    type    VARBINARY(16) NOT NULL,
    ttl     INT UNSIGNED NOT NULL,
    data    MEDIUMBLOB NOT NULL,
    rname   VARBINARY(1100) AS (REVERSE(name)) VIRTUAL,
    PRIMARY KEY (name, zone_id, seq),
    KEY records_zone (zone_id),
    KEY records_rname (zone_id, rname),
    CONSTRAINT records_zone_fk FOREIGN KEY (zone_id) REFERENCES zones (id) ON DELETE CASCADE
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC COMMENT='dlzbench store table';

-- A records table made before rname was: the column and its index added (loaders/mysql.py
-- runs this when the column is missing; on a table that has both it changes nothing).
ALTER TABLE records ADD COLUMN IF NOT EXISTS rname VARBINARY(1100) AS (REVERSE(name)) VIRTUAL,
    ADD KEY IF NOT EXISTS records_rname (zone_id, rname);

-- Who may transfer (AXFR) a zone: client addresses as BIND's sdlz layer formats them
-- (`127.0.0.1`, `::1`), compared as bytes.
CREATE TABLE IF NOT EXISTS xfr_clients (
    zone_id INT UNSIGNED NOT NULL,
    client  VARBINARY(64) NOT NULL,
    PRIMARY KEY (zone_id, client),
    CONSTRAINT xfr_clients_zone_fk FOREIGN KEY (zone_id) REFERENCES zones (id) ON DELETE CASCADE
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC COMMENT='dlzbench store table';

-- The driver's statements, as server-side prepared statements (mysql_stmt_prepare; MariaDB
-- optimizes every execution with the bound values, so there is no generic-plan question):
--
-- 1. Per DNS query, one round trip. The second list takes every suffix of the query name Q
--    (Q, its parent, ..., its last label; or only those down to a zone the driver core knows
--    from earlier queries), the first takes Q, each of those ancestors,
--    and the wildcard below each of those ('*.' + name; '*' below the root), then the names
--    the driver core expects BIND to look up next in the same DNS query (learned: name server
--    addresses, MX/SRV targets, their wildcards). A prepared statement has a fixed number of
--    placeholders, so the driver prepares the statement in size classes (4 to 128 suffix
--    places, 8 to 320 owner places) and uses the smallest that fits; unused places are bound
--    to '' (the empty string), which is never a key ('.' is the root's) and so matches
--    nothing. Every zone among the suffixes comes back at least once (r.* NULL when none of
--    its names matches); the driver keeps the deepest zone's rows.
--
--    SELECT z.name, r.name, r.type, r.ttl, r.data
--      FROM zones z
--      LEFT JOIN records r FORCE INDEX (PRIMARY)
--        ON r.zone_id = z.id AND r.name IN (?, ?, ... 8 to 320 places)
--     WHERE z.name IN (?, ?, ... 4 to 128 places);
--
--    The driver's sessions set optimizer_use_condition_selectivity = 1, use_stat_tables =
--    'NEVER', eq_range_index_dive_limit = 1 and join_cache_level = 0 (drivers/mysql: less
--    optimizer work per execution, the same ranges; no join buffer for the one or two zone
--    rows). With the server's defaults:
--
--    EXPLAIN (prepared, executed with bound values) with 1,005 zones and 24,672 rows:
--      z  range  key zones_name  (key_len 1102)  Using where; Using index
--      r  range  key PRIMARY     (key_len 1102)  Using where; Using join buffer (flat, BNL join)
--    and an executed trace (ANALYZE FORMAT=JSON) of a query into a zone of 30,000 records
--    read one records row. Without FORCE INDEX the optimizer picks the same plan today; the
--    hint keeps it from ever trading the range on names for `ref` on records_zone
--    (zone_id = z.id, names filtered), which reads every row of the zone: with the keys the
--    other way round, (zone_id, name), that is what MariaDB did, as IN on the second key part
--    of a join is not a `ref` condition. tests/test_sql_stores.py checks these plans (with
--    20,000 zones added; on a table of a few zones a full index scan is rightly cheaper).
--
-- 2. Zone transfer: every record of zone ?, by owner (ENT markers are not records).
--
--    SELECT r.name, r.type, r.ttl, r.data
--      FROM records r
--     WHERE r.zone_id = (SELECT id FROM zones WHERE name = ?) AND r.type <> 'ENT'
--     ORDER BY r.name;
--
--    Plan: zones const on zones_name, records ref on records_zone; no filesort.
--
-- 3. allowzonexfr: may client ? transfer zone ?
--
--    SELECT 1 FROM zones z JOIN xfr_clients x ON x.zone_id = z.id
--     WHERE z.name = ? AND x.client = ?;
--
--    Plan: zones const on zones_name, xfr_clients const on its primary key.
--
-- 4. RFC 2136 updates (drivers/mysql, "writing"), as the account dlz_writer (databases/
--    mariadb.py: SELECT on zones; SELECT, INSERT, DELETE on records, of the update zones only:
--    loaders/mysql.py, limit_writes), one InnoDB transaction per update message; the
--    driver's lookups during the update read through it:
--
--    SELECT id FROM zones WHERE name = ? FOR UPDATE;            -- first, once per update
--    INSERT INTO records (zone_id, name, seq, type, ttl, data)
--    SELECT ?, ?, COALESCE(MAX(seq) + 1, 0), ?, ?, ? FROM records
--     WHERE name = ? AND zone_id = ?;                            -- seq: unique per owner
--    DELETE FROM records WHERE name = ? AND zone_id = ? AND type = ? AND data = ?;
--    SELECT r.name, r.type, r.ttl, r.data                        -- is a name below O
--      FROM records r FORCE INDEX (records_rname)
--     WHERE r.zone_id = ? AND r.rname >= ? AND r.rname < ? LIMIT 64;
--
--    The first locks the zone's row until the update ends: two updates of one zone (two
--    nameds on one store) run one after the other, each reading what the other committed.
--    The next two use the primary key (name, zone_id, ...). The last runs when an update
--    deletes the last record of an owner O, with reverse(O) || '.' and reverse(O) || '/'
--    ('/' follows '.'): a range on records_rname, O's subtree only (it read every row of the
--    zone with RIGHT(name, ?) = ?, seconds per update in a zone of 50,000 names).
