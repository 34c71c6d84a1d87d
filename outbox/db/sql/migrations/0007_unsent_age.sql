-- outbox:no-transaction
-- The oldest unsent email of each priority, read on every metrics scrape: the
-- head of this index answers at once, whereas reading created_at over a backlog
-- of a million pending rows takes seconds. Age counts from enqueue or from the
-- last requeue, as the age limit does. Built CONCURRENTLY: enqueues and status
-- changes go on while it is built.
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_unsent_age
    ON email_outbox (priority, greatest(created_at, requeued_at))
    WHERE status IN ('pending', 'queued', 'sending');
