-- outbox:no-transaction
-- Every bounce and complaint as received, kept for audit and reprocessing.
CREATE TABLE IF NOT EXISTS email_bounce (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    received_at   timestamptz NOT NULL DEFAULT now(),
    envelope_to   text,        -- the address it came to (a VERP return path, or an FBL box)
    raw           bytea NOT NULL,
    processed_at  timestamptz,
    outbox_id     bigint,      -- the row it is about, when it could be linked
    link          text CHECK (link IN ('verp', 'message_id', 'none')),
    forged        boolean NOT NULL DEFAULT false,  -- carried a VERP token that did not verify
    results       jsonb,       -- the parser's verdicts, one per recipient
    error         text
);
CREATE INDEX IF NOT EXISTS email_bounce_unprocessed ON email_bounce (id) WHERE processed_at IS NULL;
CREATE INDEX IF NOT EXISTS email_bounce_outbox ON email_bounce (outbox_id);
CREATE INDEX IF NOT EXISTS email_bounce_received ON email_bounce (received_at);

-- The verdict on a sent row: hard, soft or complaint (the latest one). The
-- check is added NOT VALID and validated apart: no scan under the strong lock.
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS bounce_class text;
ALTER TABLE email_outbox DROP CONSTRAINT IF EXISTS email_outbox_bounce_class_check,
    ADD CONSTRAINT email_outbox_bounce_class_check
    CHECK (bounce_class IN ('hard', 'soft', 'complaint')) NOT VALID;
ALTER TABLE email_outbox VALIDATE CONSTRAINT email_outbox_bounce_class_check;
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS bounced_at timestamptz;

-- Rows per recipient, newest first: the soft-bounce streak, and finding or
-- erasing one person's mail.
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_recipient ON email_outbox (lower(recipient), id);
-- Sent and bounced in the last 24 hours, computed on every metrics scrape.
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_sent_at ON email_outbox (sent_at)
    WHERE sent_at IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_bounced_at ON email_outbox (bounced_at, bounce_class)
    WHERE bounced_at IS NOT NULL;
