-- outbox:no-transaction
-- An address's rows are found by a keyed hash of the address: the console's
-- search by address, `outbox show --to`, `outbox forget` and the soft-bounce
-- streak. The index then holds 16 bytes per row, not the address: a copy of
-- the index (a backup, a page dump) does not list who was written to.
--
-- The hash uses the per-database key of migration 0024, read back out of
-- email_address_hash's body, so one key serves every keyed hash of the
-- database. It may be declared IMMUTABLE, as an index needs: its result
-- depends only on its argument. The key is a constant written into the body
-- here, once (the function is never replaced: that would change every hash,
-- and its index would have to be rebuilt); sha256 and substring are
-- immutable; lower() is too, as the lower(recipient) indexes before this one
-- relied on; convert_to() is STABLE only because a conversion could be
-- redefined, and converting to UTF8 text of a UTF8 database is the identity.
--
-- PL/pgSQL, not SQL: an IMMUTABLE SQL function whose body calls convert_to is
-- never inlined, and then each statement plans the body again (about 50 µs
-- per statement measured), where PL/pgSQL keeps it compiled for the session
-- (about 5 µs). Each sent row computes it once, when its status changes.
DO $migration$
DECLARE
    key text;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_proc WHERE oid = to_regprocedure('email_recipient_hash(text)')) THEN
        SELECT substring(prosrc FROM 'x([0-9a-f]{64})''') INTO key
        FROM pg_proc WHERE oid = to_regprocedure('email_address_hash(text)');
        IF key IS NULL THEN
            RAISE EXCEPTION 'email_address_hash(text) (migration 0024) holds no key';
        END IF;
        -- 16 bytes identify an address (a collision needs about 2^64 addresses).
        EXECUTE format(
            'CREATE FUNCTION email_recipient_hash(text) RETURNS bytea LANGUAGE plpgsql'
            ' IMMUTABLE STRICT PARALLEL SAFE AS %L',
            format('BEGIN RETURN substring(sha256(%L::bytea || convert_to(%L || lower($1), %L))'
                   ' FOR 16); END', '\x' || key, 'recipient:', 'UTF8'));
    END IF;
END
$migration$;

-- One index for every row that has settled (sent, parked or cancelled), in
-- id order per address: the console pages through it newest first. Rows in
-- flight (pending, queued, sending) are left out: they change status three
-- times on their way out, and each change would add an entry here (an update
-- that changes status is never HOT). They are read through the unsent index,
-- whole, as the search read them before; there are only as many as the
-- unsent backlog. Built CONCURRENTLY: enqueues and sends go on meanwhile.
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_recipient_hash
    ON email_outbox (email_recipient_hash(recipient), id)
    WHERE status IN ('sent', 'failed', 'dead', 'held', 'suppressed', 'cancelled');

-- Nothing reads the address indexes any more: dropped, so that a row does not
-- carry two recipient entries (each costs a write when a row is sent).
DROP INDEX CONCURRENTLY IF EXISTS email_outbox_recipient_sent;
DROP INDEX CONCURRENTLY IF EXISTS email_outbox_parked_recipient;
