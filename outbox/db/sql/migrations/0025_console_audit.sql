-- outbox:no-transaction
-- Every action taken in `outbox web`'s console (sign-in, requeue, suppress,
-- reveal of an address...): who, what, when and why. Rows are only appended.
-- The target names a row by id or key, an address only by its recipient tag.
-- The indexes are built CONCURRENTLY: enqueues and sends go on meanwhile.
CREATE TABLE IF NOT EXISTS console_audit (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text NOT NULL,
    role    text NOT NULL,
    action  text NOT NULL,
    target  text,
    reason  text NOT NULL,
    detail  jsonb NOT NULL DEFAULT '{}'
);

-- The console's dead, held, failed and suppressed lists, newest first, an
-- address's rows among them, and their counts (priority included: an
-- index-only scan). Rows enter these statuses rarely, so the index costs the
-- hot path (pending -> queued -> sending -> sent) nothing.
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_parked_id ON email_outbox (status, id) INCLUDE (priority)
    WHERE status IN ('dead', 'held', 'failed', 'suppressed');

-- The console's suppression list, newest first, a page at a time.
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_suppression_created ON email_suppression (created_at, address);

-- An address's parked rows (the console's search by address): without it the
-- search reads every dead, held, failed and suppressed row.
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_parked_recipient ON email_outbox (lower(recipient), id)
    WHERE status IN ('dead', 'held', 'failed', 'suppressed');
