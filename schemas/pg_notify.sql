-- dlzbench: how the PostgreSQL store tells a caching pg driver (cache=yes) of its changes.
--
-- Applied by loaders/pg.py right after schemas/pg.sql, as one script (the function bodies
-- hold semicolons); every statement is idempotent. What the triggers cost a writer, listened
-- to or not: a notification queued per changed row, and NOTIFY's lock at commit (PostgreSQL
-- commits the transactions that notify one at a time); a reader, nothing.
--
-- After a change commits, PostgreSQL delivers NOTIFY dlz_cache to every listening driver
-- (drivers/pg/dlz_pg.c: the change channel), in commit order, with the payload:
--   'ZONE<TAB>OWNER'  a records row of owner key OWNER in zone key ZONE was added, changed
--                     or deleted: the driver forgets what it holds of that owner;
--   'ZONE'            a zones row was added, renamed or deleted (a zone replaced whole is
--                     deleted and added): the driver forgets everything of that zone;
--   ''                a table was truncated: the driver forgets everything.
-- A records row deleted because its zone went (ON DELETE CASCADE) finds no zone any more and
-- sends nothing: the zone's own notification covers it. A transaction that replaces whole
-- zones (loaders/pg.py: _replace_zones) sets dlz.zone_replace to 'on' for itself: its records
-- rows then send nothing, since every one of them belongs to a zone it deletes and adds,
-- and a bulk load of millions of rows queues no notification per row. Keys hold no tab:
-- BIND's presentation form writes a tab as \009.

CREATE OR REPLACE FUNCTION dlz_notify_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify('dlz_cache', z.name || E'\t' || OLD.name)
           FROM zones z WHERE z.id = OLD.zone_id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify('dlz_cache', z.name || E'\t' || NEW.name)
           FROM zones z WHERE z.id = NEW.zone_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION dlz_notify_zone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify('dlz_cache', OLD.name);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify('dlz_cache', NEW.name);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION dlz_notify_everything() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('dlz_cache', '');
    RETURN NULL;
END
$$;

-- WHEN is evaluated as the row changes: a row of a zone replacement queues no trigger call.
CREATE OR REPLACE TRIGGER dlz_notify_record AFTER INSERT OR UPDATE OR DELETE ON records
    FOR EACH ROW WHEN (current_setting('dlz.zone_replace', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION dlz_notify_record();
CREATE OR REPLACE TRIGGER dlz_notify_zone AFTER INSERT OR UPDATE OR DELETE ON zones
    FOR EACH ROW EXECUTE FUNCTION dlz_notify_zone();
CREATE OR REPLACE TRIGGER dlz_notify_truncate AFTER TRUNCATE ON records
    FOR EACH STATEMENT EXECUTE FUNCTION dlz_notify_everything();
CREATE OR REPLACE TRIGGER dlz_notify_truncate AFTER TRUNCATE ON zones
    FOR EACH STATEMENT EXECUTE FUNCTION dlz_notify_everything();
