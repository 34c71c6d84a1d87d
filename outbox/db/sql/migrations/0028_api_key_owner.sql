-- outbox:no-transaction
-- Each API key belongs to an owner (a service): the emails created through it
-- are its owner's, and only its owner's keys read, cancel or re-use their
-- idempotency keys (outbox.web.owners). NULL is the default owner: the keys
-- made before owners existed, and every email enqueued in-process. An
-- operator key reads and cancels every owner's emails.
--
-- The emails need no column of their own: an owner's idempotency keys are
-- stored under its name (`billing␟order-3001`), so the table's one unique
-- index keeps each owner's keys apart and the default owner's keys stay as
-- they were. Adding nullable or constant-default columns writes no row; the
-- check is added NOT VALID and validated apart, as every check is here (every
-- row before has no owner, which it allows). Safe to run again from the top.
ALTER TABLE outbox_api_key ADD COLUMN IF NOT EXISTS owner text;
ALTER TABLE outbox_api_key ADD COLUMN IF NOT EXISTS operator boolean NOT NULL DEFAULT false;
ALTER TABLE outbox_api_key DROP CONSTRAINT IF EXISTS outbox_api_key_owner_name,
    ADD CONSTRAINT outbox_api_key_owner_name
    CHECK (owner ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' AND owner <> 'default') NOT VALID;
ALTER TABLE outbox_api_key VALIDATE CONSTRAINT outbox_api_key_owner_name;
