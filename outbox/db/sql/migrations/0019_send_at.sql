-- outbox:no-transaction
-- Scheduled sending: the time an email was enqueued to go out (NULL: at once).
-- The row waits in `pending` with next_attempt_at = send_at, so the relay's
-- claim needs nothing new; its age (for the age limit and the oldest-unsent
-- figure) counts from send_at, as it counts from a requeue.
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS send_at timestamptz;
-- The oldest-unsent index, on the age expression with send_at, built
-- CONCURRENTLY (enqueues and status changes go on meanwhile); the old one goes
-- once the new one is there.
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_unsent_from
    ON email_outbox (priority, greatest(created_at, requeued_at, send_at))
    WHERE status IN ('pending', 'queued', 'sending');
DROP INDEX CONCURRENTLY IF EXISTS email_outbox_unsent_age;
