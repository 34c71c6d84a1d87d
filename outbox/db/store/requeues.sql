-- requeue_key --
-- An operator sends a parked row again with a fresh attempt budget.
UPDATE email_outbox
SET status = 'pending', status_reason = 'requeued by operator', attempts = 0,
    next_attempt_at = now(), requeued_at = now(), locked_by = NULL, locked_at = NULL
WHERE (idempotency_key = %(ref)s OR message_id = %(ref)s OR message_id = %(bracketed)s
       OR id = %(row_id)s::bigint OR provider_message_id = %(ref)s)
  AND status IN ('failed', 'dead', 'held')
RETURNING id, priority;

-- requeue_batch --
-- The next batch of parked rows a filter selects, sent again with a fresh
-- attempt budget. A requeued row leaves the parked index, so each batch reads
-- only what it takes; one that failed again since this run began (requeued_at
-- after `started`) is not taken twice. Rows another session holds are skipped.
WITH batch AS (
    SELECT id FROM email_outbox
    WHERE status IN ('failed', 'dead', 'held') AND status = ANY(%(statuses)s::text[])
      AND (requeued_at IS NULL OR requeued_at < %(started)s)
      AND (%(template)s::text IS NULL OR template = %(template)s)
      AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
      AND (%(to_domain)s::text IS NULL OR split_part(lower(recipient), '@', 2) = %(to_domain)s)
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE email_outbox o
SET status = 'pending', status_reason = 'requeued by operator', attempts = 0,
    next_attempt_at = now(), requeued_at = now(), locked_by = NULL, locked_at = NULL
FROM batch WHERE o.id = batch.id
RETURNING o.id, o.priority;

-- requeue_count --
-- How many parked rows a requeue filter selects, per status and priority (--dry-run).
SELECT status, priority, count(*) FROM email_outbox
WHERE status IN ('failed', 'dead', 'held') AND status = ANY(%(statuses)s::text[])
  AND (%(template)s::text IS NULL OR template = %(template)s)
  AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
  AND (%(to_domain)s::text IS NULL OR split_part(lower(recipient), '@', 2) = %(to_domain)s)
GROUP BY 1, 2 ORDER BY 1, 2;

-- notify_due --
-- Wake the relays at commit (the requeued priorities).
SELECT pg_notify('outbox_due', %(priority)s);
