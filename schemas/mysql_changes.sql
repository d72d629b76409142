-- dlzbench: how the MariaDB store tells a caching mysql driver (cache=yes) of its changes.
--
-- MariaDB has no push channel, so this is a change log that the driver polls (every
-- cache_poll_ms: drivers/mysql/dlz_mysql.c, "the change channel"). Applied by
-- loaders/mysql.py after schemas/mysql.sql; every statement is idempotent. Statements are
-- separated by a line holding only '$$' (their bodies hold semicolons).
--
-- Every change of a row, in the transaction that makes it, takes the next number of the one
-- row of dlz_change_seq and logs (number, zone key, owner key) in dlz_changes:
--   zone, owner   a records row of owner key `owner` in zone key `zone` was added, changed
--                 or deleted;
--   zone, NULL    a zones row was added, renamed or deleted (a zone replaced whole is
--                 deleted and added): everything in the zone.
-- The number row stays locked by the writing transaction until it ends, so transactions
-- that change the store take numbers in the order they commit: once a reader sees number N
-- committed, every change numbered N or less is committed and logged. A transaction that
-- rolls back gives its numbers back, so the log has no gaps; a gap before the lowest number
-- left is what the log lost to pruning (it keeps the last LOG_KEEP changes: each new one
-- deletes the one LOG_KEEP before it), and a driver that finds one flushes its cache.
-- Triggers do not fire for the rows ON DELETE CASCADE deletes: a zone's own row covers them.
-- A loader transaction that replaces whole zones sets @dlz_zone_replace (loaders/mysql.py:
-- _replace_zones), and its records rows log nothing: its zones rows cover them, and a bulk
-- load logs one change per zone, not per row. TRUNCATE fires no trigger and is not logged.
--
-- What this costs a writer, read by a driver or not: three statements more per changed row,
-- and writing transactions take turns on the number row from their first change to their
-- commit. A reader, nothing.

CREATE TABLE IF NOT EXISTS dlz_change_seq (
    id  TINYINT UNSIGNED NOT NULL PRIMARY KEY,
    seq BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB COMMENT='dlzbench store table'
$$
INSERT IGNORE INTO dlz_change_seq (id, seq) VALUES (1, 0)
$$
CREATE TABLE IF NOT EXISTS dlz_changes (
    seq   BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    zone  VARBINARY(1100) NULL,
    owner VARBINARY(1100) NULL
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC COMMENT='dlzbench store table'
$$
-- LOG_KEEP = 100,000: at a thousand changes a second, a driver may fall 100 s behind.
CREATE OR REPLACE PROCEDURE dlz_note_change(zone_key VARBINARY(1100), owner_key VARBINARY(1100))
    MODIFIES SQL DATA COMMENT 'dlzbench store table'
BEGIN
    DECLARE next BIGINT UNSIGNED;
    UPDATE dlz_change_seq SET seq = seq + 1 WHERE id = 1;
    SELECT seq INTO next FROM dlz_change_seq WHERE id = 1;
    INSERT INTO dlz_changes (seq, zone, owner) VALUES (next, zone_key, owner_key);
    IF next > 100000 THEN
        DELETE FROM dlz_changes WHERE seq = next - 100000;
    END IF;
END
$$
CREATE OR REPLACE TRIGGER dlz_change_record_added AFTER INSERT ON records FOR EACH ROW
    IF @dlz_zone_replace IS NULL THEN
        CALL dlz_note_change((SELECT name FROM zones WHERE id = NEW.zone_id), NEW.name);
    END IF
$$
CREATE OR REPLACE TRIGGER dlz_change_record_changed AFTER UPDATE ON records FOR EACH ROW
    IF @dlz_zone_replace IS NULL THEN
        CALL dlz_note_change((SELECT name FROM zones WHERE id = OLD.zone_id), OLD.name);
        CALL dlz_note_change((SELECT name FROM zones WHERE id = NEW.zone_id), NEW.name);
    END IF
$$
CREATE OR REPLACE TRIGGER dlz_change_record_deleted AFTER DELETE ON records FOR EACH ROW
    IF @dlz_zone_replace IS NULL THEN
        CALL dlz_note_change((SELECT name FROM zones WHERE id = OLD.zone_id), OLD.name);
    END IF
$$
CREATE OR REPLACE TRIGGER dlz_change_zone_added AFTER INSERT ON zones FOR EACH ROW
    CALL dlz_note_change(NEW.name, NULL)
$$
CREATE OR REPLACE TRIGGER dlz_change_zone_changed AFTER UPDATE ON zones FOR EACH ROW
BEGIN
    CALL dlz_note_change(OLD.name, NULL);
    CALL dlz_note_change(NEW.name, NULL);
END
$$
CREATE OR REPLACE TRIGGER dlz_change_zone_deleted AFTER DELETE ON zones FOR EACH ROW
    CALL dlz_note_change(OLD.name, NULL)
