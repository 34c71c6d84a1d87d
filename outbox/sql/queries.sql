-- insert_message --
-- Insert one email unless its key exists; a suppressed recipient's email is
-- written as a `suppressed` audit row that is never sent. Wakes the relays at
-- commit when there is something to send.
WITH suppression AS (
    SELECT reason FROM email_suppression
    WHERE address = lower(%(recipient)s) AND (scope = 'all' OR %(priority)s = 'bulk')
), inserted AS (
    INSERT INTO email_outbox
        (idempotency_key, recipient, template, params, content_hash, message_id, priority, status,
         status_reason)
    SELECT %(key)s, %(recipient)s, %(template)s, %(params)s, %(content_hash)s, %(message_id)s,
           %(priority)s,
           CASE WHEN s.reason IS NULL THEN 'pending' ELSE 'suppressed' END,
           CASE WHEN s.reason IS NULL THEN 'enqueued' ELSE 'recipient suppressed: ' || s.reason END
    FROM (SELECT 1) AS one LEFT JOIN suppression s ON true
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id, message_id, content_hash, priority, status
)
SELECT id, message_id, content_hash, true AS created, status,
       CASE WHEN status = 'pending' THEN pg_notify('outbox_due', priority) END
FROM inserted
UNION ALL
SELECT id, message_id, content_hash, false, status, NULL
FROM email_outbox
WHERE idempotency_key = %(key)s AND NOT EXISTS (SELECT FROM inserted);

-- find_by_key --
-- The stored identity of a key, for a key inserted by a concurrent transaction.
SELECT id, message_id, content_hash, false AS created, status, NULL
FROM email_outbox WHERE idempotency_key = %(key)s;

-- create_staging --
-- A scratch table for enqueue_many; gone at the end of the caller's transaction.
CREATE TEMP TABLE IF NOT EXISTS email_outbox_staging (
    idempotency_key text, recipient text, template text, params jsonb,
    content_hash text, message_id text, priority text
) ON COMMIT DELETE ROWS;

-- clear_staging --
-- Empty the scratch table (a caller may enqueue twice in one transaction).
TRUNCATE email_outbox_staging;

-- copy_staging --
-- Bulk-load validated rows into the scratch table.
COPY email_outbox_staging
    (idempotency_key, recipient, template, params, content_hash, message_id, priority)
FROM STDIN;

-- staging_conflicts --
-- Keys that already exist with other content.
SELECT s.idempotency_key
FROM email_outbox_staging s JOIN email_outbox o USING (idempotency_key)
WHERE o.content_hash <> s.content_hash
LIMIT 5;

-- insert_staging --
-- Move the scratch rows into the outbox; existing keys are left alone and
-- suppressed recipients get `suppressed` audit rows.
WITH inserted AS (
    INSERT INTO email_outbox
        (idempotency_key, recipient, template, params, content_hash, message_id, priority, status,
         status_reason)
    SELECT s.idempotency_key, s.recipient, s.template, s.params, s.content_hash, s.message_id,
           s.priority,
           CASE WHEN x.reason IS NULL THEN 'pending' ELSE 'suppressed' END,
           CASE WHEN x.reason IS NULL THEN 'enqueued' ELSE 'recipient suppressed: ' || x.reason END
    FROM email_outbox_staging s
    LEFT JOIN email_suppression x
        ON x.address = lower(s.recipient) AND (x.scope = 'all' OR s.priority = 'bulk')
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING idempotency_key, id, status
)
SELECT s.idempotency_key, coalesce(i.id, o.id) AS id, s.message_id, i.id IS NOT NULL AS created,
       coalesce(i.status, o.status) AS status
FROM email_outbox_staging s
LEFT JOIN inserted i USING (idempotency_key)
LEFT JOIN email_outbox o ON i.id IS NULL AND o.idempotency_key = s.idempotency_key;

-- notify_due --
-- Wake the relays at commit.
SELECT pg_notify('outbox_due', %(priority)s);

-- count_in_flight --
-- Rows of one priority that the broker or a worker holds (relay backpressure).
SELECT count(*) FROM email_outbox
WHERE status IN ('queued', 'sending') AND priority = %(priority)s;

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
RETURNING o.id;

-- lock_published --
-- Wait for the relay that published these rows to commit its claim: a message
-- can arrive first, and an UPDATE would then see the rows still pending.
SELECT id FROM email_outbox WHERE id = ANY(%(ids)s) ORDER BY id FOR UPDATE;

-- take_for_sending --
-- Move published rows to sending; a row not in queued (already sent, in flight
-- elsewhere, or swept back) is left out, so a duplicate delivery sends nothing.
UPDATE email_outbox
SET status = 'sending', status_reason = 'taken by worker', attempts = attempts + 1,
    locked_by = %(worker)s, locked_at = now()
WHERE id = ANY(%(ids)s) AND status = 'queued'
RETURNING id, idempotency_key, recipient, template, params, message_id, priority, attempts,
          created_at, greatest(created_at, requeued_at) AS age_from;

-- record_results --
-- Store each attempt and its row's new state in one statement. The attempt is
-- kept even when the row is no longer ours (the sweeper took it back). The
-- results arrive as one JSON array: far cheaper to send than a dozen arrays.
WITH results AS (
    SELECT * FROM jsonb_to_recordset(%(results)s::jsonb) AS r(
        id bigint, attempt int, status text, reason text, delay_seconds float8,
        provider_message_id text, verdict text, stage text, reply_code int,
        enhanced_status text, reply_text text, duration_ms float8)
), updated AS (
    UPDATE email_outbox o
    SET status = r.status,
        status_reason = r.reason,
        next_attempt_at = CASE WHEN r.status = 'pending'
                               THEN now() + make_interval(secs => r.delay_seconds)
                               ELSE o.next_attempt_at END,
        last_error = CASE WHEN r.status = 'sent' THEN o.last_error ELSE r.reason END,
        provider_message_id = coalesce(r.provider_message_id, o.provider_message_id),
        sent_at = CASE WHEN r.status = 'sent' THEN now() ELSE o.sent_at END,
        failed_at = CASE WHEN r.status IN ('failed', 'dead') THEN now() ELSE o.failed_at END,
        locked_by = NULL, locked_at = NULL
    FROM results r
    WHERE o.id = r.id AND o.status = 'sending' AND o.locked_by = %(worker)s
    RETURNING o.id
), attempts AS (
    INSERT INTO email_attempt (outbox_id, attempt, verdict, stage, reply_code, enhanced_status,
                               reply_text, duration_ms, worker)
    SELECT id, attempt, verdict, stage, reply_code, enhanced_status, reply_text, duration_ms,
           %(worker)s
    FROM results
)
SELECT id FROM updated;

-- release_unattempted --
-- Hand back rows a worker took but never tried (shutdown, deadline); the
-- attempt they were charged is refunded.
UPDATE email_outbox
SET status = 'pending', status_reason = %(reason)s, attempts = attempts - 1,
    locked_by = NULL, locked_at = NULL, next_attempt_at = now()
WHERE id = ANY(%(ids)s) AND status = 'sending' AND locked_by = %(worker)s;

-- sweep_queued --
-- Rows published long ago that no worker took: the broker lost the message
-- (a Redis restart without persistence) or a relay died before publishing.
WITH stuck AS (
    SELECT id FROM email_outbox
    WHERE status = 'queued' AND locked_at < now() - make_interval(secs => %(stuck_seconds)s)
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE email_outbox o
SET status = 'pending', status_reason = 'swept: queued without a worker taking it',
    locked_by = NULL, locked_at = NULL, next_attempt_at = now()
FROM stuck WHERE o.id = stuck.id
RETURNING o.id;

-- sweep_sending --
-- Rows a worker took long ago and never finished: it died mid-send, so the
-- relay may have accepted the message. Treated as an uncertain attempt.
WITH stuck AS (
    SELECT id FROM email_outbox
    WHERE status = 'sending' AND locked_at < now() - make_interval(secs => %(stuck_seconds)s)
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), swept AS (
    UPDATE email_outbox o
    SET status = CASE WHEN o.attempts >= %(max_attempts)s THEN 'dead'
                      WHEN %(hold)s THEN 'held' ELSE 'pending' END,
        status_reason = 'swept: worker ' || coalesce(o.locked_by, '?') || ' never finished sending',
        last_error = 'worker lost while sending; delivery uncertain',
        failed_at = CASE WHEN o.attempts >= %(max_attempts)s THEN now() ELSE o.failed_at END,
        locked_by = NULL, locked_at = NULL, next_attempt_at = now()
    FROM stuck WHERE o.id = stuck.id
    RETURNING o.id, o.attempts, o.status
), attempts AS (
    INSERT INTO email_attempt (outbox_id, attempt, verdict, reply_text, worker)
    SELECT id, attempts, 'uncertain', 'worker lost while sending', 'sweeper' FROM swept
)
SELECT id, status FROM swept;

-- status_counts --
-- Rows per status and priority.
SELECT status, priority, count(*) FROM email_outbox GROUP BY status, priority ORDER BY 1, 2;

-- oldest_unsent --
-- Age in seconds of the oldest row not yet handed to a relay, per priority.
SELECT priority, extract(epoch FROM now() - min(created_at))::float8
FROM email_outbox WHERE status IN ('pending', 'queued', 'sending')
GROUP BY priority;

-- find_message --
-- One row by idempotency key or Message-ID.
SELECT id, idempotency_key, recipient, template, params, message_id, priority, status,
       status_reason, attempts, next_attempt_at, locked_by, locked_at, last_error,
       provider_message_id, created_at, queued_at, sent_at, failed_at
FROM email_outbox WHERE idempotency_key = %(ref)s OR message_id = %(ref)s;

-- list_attempts --
-- Every attempt of one row.
SELECT attempt, verdict, stage, reply_code, enhanced_status, reply_text, duration_ms, worker,
       attempted_at
FROM email_attempt WHERE outbox_id = %(id)s ORDER BY id;

-- list_events --
-- Every status change of one row.
SELECT from_status, to_status, reason, actor, at
FROM email_event WHERE outbox_id = %(id)s ORDER BY id;

-- requeue_key --
-- An operator sends a parked row again with a fresh attempt budget.
UPDATE email_outbox
SET status = 'pending', status_reason = 'requeued by operator', attempts = 0,
    next_attempt_at = now(), requeued_at = now(), locked_by = NULL, locked_at = NULL
WHERE (idempotency_key = %(ref)s OR message_id = %(ref)s) AND status IN ('failed', 'dead', 'held')
RETURNING id, priority;

-- requeue_status --
-- An operator sends every row of one parked status again.
UPDATE email_outbox
SET status = 'pending', status_reason = 'requeued by operator', attempts = 0,
    next_attempt_at = now(), requeued_at = now(), locked_by = NULL, locked_at = NULL
WHERE status = %(status)s AND status IN ('dead', 'held')
RETURNING id, priority;

-- status_counts_by_prefix --
-- Rows per status and priority among keys that start with a prefix (one demo run).
SELECT status, priority, count(*) FROM email_outbox
WHERE idempotency_key LIKE %(prefix)s || '%%'
GROUP BY status, priority ORDER BY 1, 2;

-- sent_by_prefix --
-- Delivered rows of one run with their timings, oldest first.
SELECT idempotency_key, priority, message_id, provider_message_id,
       extract(epoch FROM sent_at - created_at)::float8 AS latency
FROM email_outbox
WHERE idempotency_key LIKE %(prefix)s || '%%' AND status = 'sent'
ORDER BY sent_at;

-- suppress --
-- Stop mail to an address; a wider scope ('all') replaces a narrower one.
INSERT INTO email_suppression (address, scope, reason, detail, source_bounce_id)
VALUES (lower(%(address)s), %(scope)s, %(reason)s, %(detail)s, %(source_bounce_id)s)
ON CONFLICT (address) DO UPDATE
SET scope = 'all', reason = excluded.reason, detail = excluded.detail,
    source_bounce_id = excluded.source_bounce_id, created_at = now()
WHERE excluded.scope = 'all' AND email_suppression.scope <> 'all'
RETURNING address;

-- unsuppress --
-- Allow mail to an address again.
DELETE FROM email_suppression WHERE address = lower(%(address)s) RETURNING address;

-- find_suppression --
-- Why an address is suppressed, if it is.
SELECT address, scope, reason, detail, source_bounce_id, created_at
FROM email_suppression WHERE address = lower(%(address)s);

-- list_suppressions --
-- Suppressed addresses, newest first.
SELECT address, scope, reason, detail, source_bounce_id, created_at
FROM email_suppression ORDER BY created_at DESC LIMIT %(limit)s;

-- store_bounce --
-- Keep a received bounce before anything else happens to it.
INSERT INTO email_bounce (envelope_to, raw) VALUES (%(envelope_to)s, %(raw)s) RETURNING id;

-- load_bounce --
-- A stored bounce, locked so that two processors never handle it at once.
SELECT id, envelope_to, raw, processed_at FROM email_bounce WHERE id = %(id)s FOR UPDATE;

-- unprocessed_bounces --
-- Bounces stored but not yet processed (a crash between storing and processing).
SELECT id FROM email_bounce WHERE processed_at IS NULL ORDER BY id LIMIT %(limit)s;

-- finish_bounce --
-- Record what processing a bounce found.
UPDATE email_bounce
SET processed_at = now(), outbox_id = %(outbox_id)s, link = %(link)s, forged = %(forged)s,
    results = %(results)s, error = %(error)s
WHERE id = %(id)s;

-- find_row_for_bounce --
-- The outbox row a bounce is about: by id (VERP) or by its Message-ID.
SELECT id, recipient, status FROM email_outbox
WHERE id = %(id)s OR message_id = %(message_id)s
LIMIT 1;

-- mark_bounced --
-- Record a bounce or complaint on its row, with an event for the history.
WITH marked AS (
    UPDATE email_outbox SET bounce_class = %(class)s, bounced_at = now()
    WHERE id = %(id)s
    RETURNING id, status
)
INSERT INTO email_event (outbox_id, from_status, to_status, reason, actor)
SELECT id, status, status, %(reason)s, 'bounce #' || %(bounce_id)s FROM marked;

-- recent_sends_to --
-- The latest rows sent to an address with their bounce verdicts (soft-bounce streak).
SELECT id, bounce_class FROM email_outbox
WHERE lower(recipient) = lower(%(address)s) AND status = 'sent'
ORDER BY id DESC LIMIT %(limit)s;
