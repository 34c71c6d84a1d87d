-- Retention keeps every idempotency key taken after its email is purged, and
-- erasure keeps a suppressed address suppressed once it is forgotten.

-- Keyed hashes hide keys and addresses from whoever reads these tables (an
-- export, a support screenshot). The key, 244 random bits from two UUIDs, is
-- made here, once per database, and written into the functions themselves: a
-- function whose body is one expression is inlined into the statements that
-- call it, where a table lookup per call would cost every enqueue.
DO $migration$
DECLARE
    key text := '\x' || replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
BEGIN
    IF to_regprocedure('email_key_hash(text)') IS NULL THEN
        -- 16 bytes identify an idempotency key (a collision needs about 2^64 keys).
        EXECUTE format(
            'CREATE FUNCTION email_key_hash(text) RETURNS bytea LANGUAGE sql STABLE'
            ' PARALLEL SAFE AS %L',
            format('SELECT substring(sha256(%L::bytea || convert_to(%L || $1, %L)) FOR 16)',
                   key, 'key:', 'UTF8'));
    END IF;
    IF to_regprocedure('email_address_hash(text)') IS NULL THEN
        -- What the suppression list keeps of a forgotten address: lowercase, so
        -- the address CHECK holds, and never a valid address.
        EXECUTE format(
            'CREATE FUNCTION email_address_hash(text) RETURNS text LANGUAGE sql STABLE'
            ' PARALLEL SAFE AS %L',
            format('SELECT %L || encode(sha256(%L::bytea || convert_to(%L || lower($1), %L)),'
                   ' %L)', 'hash:', key, 'address:', 'UTF8', 'hex'));
    END IF;
END
$migration$;

-- One row per purged email, about 100 bytes: the key's hash, the Message-ID a
-- re-enqueue gets back, 8 bytes of the content hash (a key reused for other
-- content is still refused) and when the email was enqueued.
CREATE TABLE IF NOT EXISTS email_key_tombstone (
    key_hash       bytea PRIMARY KEY,
    outbox_id      bigint NOT NULL,
    message_id     text NOT NULL,
    content_prefix bytea NOT NULL,
    created_at     timestamptz NOT NULL
);
