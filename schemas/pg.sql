-- dlzbench: the PostgreSQL store (driver dlz_pg.so), PostgreSQL 15.
--
-- Applied by stores/pg.py whenever a store is first used; every statement is idempotent, so
-- applying it to a database that already holds the schema changes nothing.
--
-- Keys (zones.name, records.name) are the model's name keys: BIND's lower-case presentation
-- text without the final dot, e.g. `www.example.com`, `a\.b.example.com`, `\000.example.com`.
-- They are ASCII and at most 1,003 characters (a 255-octet name whose bytes are all written
-- `\DDD`). COLLATE "C" makes every comparison and the index order bytewise: no collation can
-- make two different keys equal, and the driver's lookups are exact matches on bound values.
-- A btree entry may hold up to 2,704 bytes, so the longest key always fits in the indexes.

CREATE TABLE IF NOT EXISTS zones (
    id   integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE
);

-- One row per resource record, plus one marker row per empty non-terminal (type 'ENT',
-- ttl 0, data '') so that "name exists without data" is one exact lookup too.
-- `name` is the absolute owner key; `data` is the rdata in presentation form, names absolute.
CREATE TABLE IF NOT EXISTS records (
    zone_id integer NOT NULL REFERENCES zones (id) ON DELETE CASCADE,
    name    text COLLATE "C" NOT NULL,
    type    text COLLATE "C" NOT NULL,
    ttl     integer NOT NULL,
    data    text NOT NULL
);

-- The driver's statement per query finds rows by owner key first: the keys it asks for are
-- rare, whatever the size of their zone. Zone transfer (in owner order) and the cascading
-- delete that replaces a zone go by zone. See the notes on plans at the end of this file.
CREATE INDEX IF NOT EXISTS records_name_zone ON records (name, zone_id);
CREATE INDEX IF NOT EXISTS records_zone_name ON records (zone_id, name);
-- RFC 2136 updates (drivers/pg: BELOW_SQL) ask whether any name lies below an owner whose
-- last record went: the names below O are the keys ending in '.O', a prefix of the reversed
-- key, so a range on this index finds them in a few pages whatever the zone's size. Keys
-- are absolute, so the range holds O's subtree only; zone_id is not in the index, which
-- then serves no other statement (leading with zone_id, the planner took it for the zone
-- transfer's "zone_id = $0" instead of records_zone_name, and sorted).
CREATE INDEX IF NOT EXISTS records_rname ON records (reverse(name));

-- Who may transfer (AXFR) a zone: client addresses as BIND's sdlz layer formats them
-- (`127.0.0.1`, `::1`), compared as text.
CREATE TABLE IF NOT EXISTS xfr_clients (
    zone_id integer NOT NULL REFERENCES zones (id) ON DELETE CASCADE,
    client  text COLLATE "C" NOT NULL,
    PRIMARY KEY (zone_id, client)
);

-- In a database the suite did not create (--store-url), a table of one of these names
-- without this comment is someone else's. Applied in the same transaction as the tables.
COMMENT ON TABLE zones IS 'dlzbench store table';
COMMENT ON TABLE records IS 'dlzbench store table';
COMMENT ON TABLE xfr_clients IS 'dlzbench store table';

-- The driver's statements (bound parameters; $n text or text[]):
--
-- 1. Per DNS query, one round trip. $1: every suffix of the query name Q (Q, its parent, ...,
--    its last label; or only those down to a zone the driver core knows from earlier
--    queries); $2: Q, each of those ancestors, and the wildcard below each of
--    those ('*.' + name; '*' below the root), then the names the driver core expects BIND to
--    look up next in the same DNS query (learned: name server addresses, MX/SRV targets,
--    their wildcards). Every zone among the suffixes comes back at least once (r.* NULL when
--    none of its names matches); the driver keeps the deepest zone's rows.
--
--    SELECT z.name, r.name, r.type, r.ttl, r.data
--      FROM zones z
--      LEFT JOIN records r ON r.zone_id = z.id AND r.name = ANY($2)
--     WHERE z.name = ANY($1);
--
-- 2. Zone transfer: every record of zone $1, by owner (ENT markers are not records). The
--    zone id comes from a subquery so that the planner knows it is one value and reads
--    records_zone_name in owner order; written as a join, it adds a sort.
--
--    SELECT r.name, r.type, r.ttl, r.data
--      FROM records r
--     WHERE r.zone_id = (SELECT id FROM zones WHERE name = $1) AND r.type <> 'ENT'
--     ORDER BY r.name;
--
-- 3. allowzonexfr: may client $2 transfer zone $1?
--
--    SELECT 1 FROM zones z JOIN xfr_clients x ON x.zone_id = z.id
--     WHERE z.name = $1 AND x.client = $2;
--
-- Plans (EXPLAIN EXECUTE of the prepared statements; 1,005 zones of about 20 records, 24,672
-- rows, after ANALYZE), both with the values (custom plan) and without (generic plan, which
-- a statement prepared with PQprepare gets from its sixth execution on):
--   1. custom:  Nested Loop Left Join; zones z: Seq Scan (Filter name = ANY); records r:
--               Bitmap Index Scan on records_name_zone, Index Cond (name = ANY ('{...}'))
--      generic: Hash Right Join; records r: Bitmap Index Scan on records_name_zone,
--               Index Cond (name = ANY ($2)); zones z: Seq Scan (Filter name = ANY ($1))
--   2. Index Scan using records_zone_name, Index Cond (zone_id = $0), no Sort (for zones
--      of a handful of records the planner rather sorts the few rows of a bitmap scan);
--      InitPlan: Index Scan using zones_name_key
--   3. Index Scan using zones_name_key; Index Only Scan using xfr_clients_pkey
-- The driver's sessions set enable_seqscan, enable_hashjoin, enable_mergejoin and
-- enable_bitmapscan off (drivers/pg/dlz_pg.c): its generic plan of statement 1 is
-- Nested Loop Left Join; zones z: Index Scan using zones_name_key; records r: Index Scan
-- using records_name_zone (name = ANY($2)) under a Materialize, whatever the number of zones.
-- records is never scanned sequentially. zones is, while it is only a few pages: at 1,005
-- zones (10 pages) a Seq Scan is the cheaper plan; from a few thousand zones on, both plans
-- take zones_name_key (seen with 3,000 and 30,000 zones more). tests/test_sql_stores.py
-- checks all of this, generic and custom, with 20,000 zones of 5 records added.
-- Why records_name_zone: with only (zone_id, name), the generic plan of statement 1 was
-- "Index Cond (zone_id = z.id), Filter (name = ANY ($2))", that is every row of the zone
-- per query, which is cheap for the average zone the statistics describe and ruinous for
-- one large zone among many small ones. Leading with the owner key, the lookup costs the
-- same whatever the zone sizes, in custom and generic plans alike.
