-- outbox:no-transaction
-- Addresses that must not receive mail, checked by enqueue in its one statement.
-- An address is stored lowercased: mailbox providers treat local parts
-- case-insensitively in practice, and a suppression must not be dodged by case.
CREATE TABLE IF NOT EXISTS email_suppression (
    address      text PRIMARY KEY CHECK (address = lower(address)),
    -- 'all' stops every email; 'bulk' (an unsubscribe) still lets login codes through.
    scope        text NOT NULL CHECK (scope IN ('all', 'bulk')),
    reason       text NOT NULL
                 CHECK (reason IN ('hard_bounce', 'soft_bounces', 'complaint', 'unsubscribe', 'manual')),
    detail       text,
    source_bounce_id bigint,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- An enqueue for a suppressed address is kept as an audit row that is never sent.
-- Added NOT VALID (a brief lock, no scan), then validated under a lock that
-- lets enqueues and updates through while every row is read.
ALTER TABLE email_outbox DROP CONSTRAINT IF EXISTS email_outbox_status_check,
    ADD CONSTRAINT email_outbox_status_check
    CHECK (status IN ('pending', 'queued', 'sending', 'sent', 'failed', 'dead', 'held', 'suppressed'))
    NOT VALID;
ALTER TABLE email_outbox VALIDATE CONSTRAINT email_outbox_status_check;
