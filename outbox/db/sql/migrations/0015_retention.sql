-- Retention keeps every idempotency key taken after its email is purged, and
-- erasure keeps a suppressed address suppressed once it is forgotten.

-- A random key of this database's own, made here, for the keyed hashes below:
-- they hide keys and addresses from whoever reads these tables (an export, a
-- support screenshot) without the key. 244 random bits from two UUIDs.
CREATE TABLE IF NOT EXISTS outbox_hash_key (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    key  bytea NOT NULL
);
INSERT INTO outbox_hash_key (key)
VALUES (decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'))
ON CONFLICT DO NOTHING;

-- 16 bytes identify an idempotency key (a collision needs about 2^64 keys).
CREATE OR REPLACE FUNCTION email_key_hash(text) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT substring(sha256(k.key || convert_to('key:' || $1, 'UTF8')) FOR 16)
    FROM outbox_hash_key k
$$;

-- What the suppression list keeps of a forgotten address: lowercase, so the
-- address CHECK holds, and never a valid address.
CREATE OR REPLACE FUNCTION email_address_hash(text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT 'hash:' || encode(sha256(k.key || convert_to('address:' || lower($1), 'UTF8')), 'hex')
    FROM outbox_hash_key k
$$;

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

-- enqueue's statement reads the tombstones itself; this guards every other
-- insert (enqueue_many's COPY, a hand-written INSERT): a purged key fails as
-- a taken one does, and enqueue_many then takes its careful path.
CREATE OR REPLACE FUNCTION email_outbox_refuse_purged_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT FROM new_rows n
        JOIN email_key_tombstone t ON t.key_hash = email_key_hash(n.idempotency_key)
    ) THEN
        RAISE unique_violation USING
            MESSAGE = 'idempotency key taken by an email since purged',
            CONSTRAINT = 'email_key_tombstone_pkey';
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS email_outbox_purged_keys ON email_outbox;
CREATE TRIGGER email_outbox_purged_keys AFTER INSERT ON email_outbox
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION email_outbox_refuse_purged_keys();
