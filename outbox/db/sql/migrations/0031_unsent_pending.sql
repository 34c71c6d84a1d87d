-- outbox:no-transaction
-- The oldest-unsent index holds pending rows only. An update that changes a
-- row's status is never HOT, so it adds an entry to every index whose
-- predicate the new version meets: with queued and sending in the predicate,
-- the claim and the take each added one here for every email (about a tenth
-- of their index writes and WAL). Rows in flight are read through the
-- in-flight index instead, as many as OUTBOX_MAX_IN_FLIGHT allows.
-- Built CONCURRENTLY: enqueues and sends go on meanwhile; the old index goes
-- once the new one is there.
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_unsent_pending
    ON email_outbox (priority, greatest(created_at, requeued_at, send_at))
    WHERE status = 'pending';
DROP INDEX CONCURRENTLY IF EXISTS email_outbox_unsent_from;
