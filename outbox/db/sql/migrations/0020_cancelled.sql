-- A new status: `cancelled`, an email called off before any attempt (outbox.cancel).
-- NOT VALID: the new check is looser than the old one, so every stored row
-- passes it, and there is no need to scan the table under its lock.
ALTER TABLE email_outbox DROP CONSTRAINT email_outbox_status_check;
ALTER TABLE email_outbox ADD CONSTRAINT email_outbox_status_check
    CHECK (status IN ('pending', 'queued', 'sending', 'sent', 'failed', 'dead', 'held', 'suppressed',
                      'cancelled')) NOT VALID;
