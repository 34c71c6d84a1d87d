-- status_counts --
-- Rows per status and priority; pending rows scheduled for later count as `scheduled`.
SELECT CASE WHEN status = 'pending' AND send_at > now() THEN 'scheduled' ELSE status END,
       priority, count(*)
FROM email_outbox GROUP BY 1, 2 ORDER BY 1, 2;

-- status_counts_by_tag --
-- Rows per status and priority among those carrying one tag (a scan: no index).
SELECT CASE WHEN status = 'pending' AND send_at > now() THEN 'scheduled' ELSE status END,
       priority, count(*)
FROM email_outbox
WHERE tags @> ARRAY[%(tag)s]::text[]
GROUP BY 1, 2 ORDER BY 1, 2;

-- paced_pending --
-- Pending rows sent back for their receiver's rate, per receiver (named in the reason).
SELECT substring(status_reason FROM '^paced: (\S+)'), count(*) FROM email_outbox
WHERE status = 'pending' AND status_reason LIKE 'paced:%%'
GROUP BY 1 ORDER BY 2 DESC, 1;

-- oldest_unsent --
-- Age in seconds of the oldest unsent row per priority (from enqueue, the last
-- requeue or the time it was scheduled for; 0 while only scheduled rows wait):
-- the head of the email_outbox_unsent_pending index, or an older row in
-- flight (through the in-flight index, at most OUTBOX_MAX_IN_FLIGHT rows).
SELECT priority, greatest(extract(epoch FROM now() - at), 0)::float8
FROM (
    SELECT p.priority, least(
        (SELECT greatest(created_at, requeued_at, send_at) FROM email_outbox
         WHERE status = 'pending' AND priority = p.priority
         ORDER BY greatest(created_at, requeued_at, send_at) LIMIT 1),
        (SELECT min(greatest(created_at, requeued_at, send_at)) FROM email_outbox
         WHERE status IN ('queued', 'sending') AND priority = p.priority)) AS at
    FROM (VALUES ('high'), ('bulk')) AS p (priority)
) AS oldest
WHERE at IS NOT NULL;

-- status_counts_by_prefix --
-- Rows per status and priority among keys that start with a prefix (one demo run).
SELECT status, priority, count(*) FROM email_outbox
WHERE idempotency_key LIKE %(prefix)s || '%%'
GROUP BY status, priority ORDER BY 1, 2;

-- unsent_counts --
-- Rows not yet sent per priority (the pending and the in-flight indexes): what waits.
SELECT priority, count(*) FROM (
    SELECT priority FROM email_outbox WHERE status = 'pending'
    UNION ALL
    SELECT priority FROM email_outbox WHERE status IN ('queued', 'sending')
) AS unsent
GROUP BY 1;
