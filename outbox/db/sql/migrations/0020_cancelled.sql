-- outbox:no-transaction
-- A new status: `cancelled`, an email called off before any attempt (outbox.cancel).
-- The check is swapped in one statement (no moment without one), NOT VALID so
-- the table is not scanned under its lock; the validation after it scans with
-- a lock that lets enqueues and sends go on.
ALTER TABLE email_outbox DROP CONSTRAINT IF EXISTS email_outbox_status_check,
    ADD CONSTRAINT email_outbox_status_check
    CHECK (status IN ('pending', 'queued', 'sending', 'sent', 'failed', 'dead', 'held', 'suppressed',
                      'cancelled')) NOT VALID;
ALTER TABLE email_outbox VALIDATE CONSTRAINT email_outbox_status_check;
