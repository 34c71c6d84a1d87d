-- count_in_flight --
-- Rows of one priority that the broker or a worker holds (relay backpressure).
SELECT count(*) FROM email_outbox
WHERE status IN ('queued', 'sending') AND priority = %(priority)s;

-- seconds_to_next_due --
-- How soon the next pending row of one priority falls due (NULL: none), so a
-- relay wakes for rows scheduled a moment ahead (paced rows) without polling.
SELECT extract(epoch FROM min(next_attempt_at) - now())::float8 FROM email_outbox
WHERE status = 'pending' AND priority = %(priority)s;

-- claim_due --
-- Take due rows of one priority, oldest first, skipping rows another relay holds.
WITH due AS (
    SELECT id FROM email_outbox
    WHERE status = 'pending' AND priority = %(priority)s AND next_attempt_at <= now()
    ORDER BY next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE email_outbox o
SET status = 'queued', status_reason = 'published by relay', queued_at = now(),
    locked_by = %(relay)s, locked_at = now()
FROM due WHERE o.id = due.id
RETURNING o.id, o.trace_context;

-- sweep_queued --
-- Rows found queued (queued_ids) whose message the broker did not hold when
-- asked after that (a Redis restart without persistence, a flushed queue): lost,
-- so pending again at once. A row a worker took meanwhile is no longer queued.
WITH stuck AS (
    SELECT id FROM email_outbox
    WHERE status = 'queued' AND id = ANY(%(lost)s::bigint[])
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE email_outbox o
SET status = 'pending', status_reason = 'swept: queued, the broker lost its message',
    locked_by = NULL, locked_at = NULL
FROM stuck WHERE o.id = stuck.id
RETURNING o.id;

-- sweep_sending --
-- Rows taken by a worker process that has been silent (no heartbeat) for the
-- stuck threshold: it died mid-send, so the relay may have accepted the
-- message. Treated as an uncertain attempt. A live worker's slow send stays.
WITH stuck AS (
    SELECT o.id FROM email_outbox o
    WHERE o.status = 'sending' AND o.locked_at < now() - make_interval(secs => %(stuck_seconds)s)
      AND NOT EXISTS (
          SELECT FROM outbox_process p
          WHERE starts_with(o.locked_by, p.name || ':')
            AND p.beat_at > now() - make_interval(secs => %(stuck_seconds)s))
    LIMIT %(limit)s
    FOR UPDATE OF o SKIP LOCKED
), swept AS (
    UPDATE email_outbox o
    SET status = CASE WHEN o.attempts >= %(max_attempts)s THEN 'dead'
                      WHEN %(hold)s THEN 'held' ELSE 'pending' END,
        status_reason = 'swept: worker ' || coalesce(o.locked_by, '?') || ' never finished sending',
        last_error = 'worker lost while sending; delivery uncertain',
        failed_at = CASE WHEN o.attempts >= %(max_attempts)s THEN now() ELSE o.failed_at END,
        locked_by = NULL, locked_at = NULL
    FROM stuck WHERE o.id = stuck.id
    RETURNING o.id, o.attempts, o.status
), attempts AS (
    INSERT INTO email_attempt (outbox_id, attempt, verdict, reply_text, worker)
    SELECT id, attempts, 'uncertain', 'worker lost while sending', 'sweeper' FROM swept
)
SELECT id, status FROM swept;

-- sweep_orphans --
-- Rows locked by this live process (host:pid) for the stuck threshold that
-- none of its threads holds: a take or hand-back whose answer was lost left
-- them. Its heartbeat keeps the sweeper away, so the process returns them
-- itself, as an uncertain attempt (one may have been sent).
WITH orphans AS (
    SELECT o.id FROM email_outbox o
    WHERE o.status = 'sending' AND starts_with(o.locked_by, %(process)s || ':')
      AND o.locked_at < now() - make_interval(secs => %(stuck_seconds)s)
      AND o.id <> ALL(%(held)s::bigint[])
    FOR UPDATE OF o SKIP LOCKED
), swept AS (
    UPDATE email_outbox o
    SET status = CASE WHEN o.attempts >= %(max_attempts)s THEN 'dead'
                      WHEN %(hold)s THEN 'held' ELSE 'pending' END,
        status_reason = 'swept: ' || coalesce(o.locked_by, '?') || ' no longer held it',
        last_error = 'left sending by its own worker; delivery uncertain',
        failed_at = CASE WHEN o.attempts >= %(max_attempts)s THEN now() ELSE o.failed_at END,
        locked_by = NULL, locked_at = NULL
    FROM orphans WHERE o.id = orphans.id
    RETURNING o.id, o.attempts, o.status
), attempts AS (
    INSERT INTO email_attempt (outbox_id, attempt, verdict, reply_text, worker)
    SELECT id, attempts, 'uncertain', 'left sending by its own worker', 'heartbeat' FROM swept
)
SELECT id, status FROM swept;

-- queued_ids --
-- Rows published long enough ago to have reached the broker (sweep candidates),
-- of the priorities whose queues the caller asked the broker about: a relay of
-- one priority cannot tell whether the other's messages are still held.
SELECT id FROM email_outbox
WHERE status = 'queued' AND priority = ANY(%(priorities)s::text[])
    AND locked_at < now() - make_interval(secs => %(lost_after)s)
ORDER BY id LIMIT %(limit)s;

-- return_dead_lettered --
-- Rows whose broker message RabbitMQ dead-lettered (redelivered past the queue's
-- delivery limit, or rejected): no worker will get it, so a row still queued is
-- pending again, to be published anew. A row a worker took is that worker's.
WITH dead AS (
    SELECT id FROM email_outbox
    WHERE status = 'queued' AND id = ANY(%(ids)s::bigint[])
    FOR UPDATE
)
UPDATE email_outbox o
SET status = 'pending', status_reason = 'swept: queued, the broker dead-lettered its message',
    locked_by = NULL, locked_at = NULL
FROM dead WHERE o.id = dead.id
RETURNING o.id;
