-- record_results --
-- Store each attempt and its row's new state in one statement, for results of
-- several workers (threads): each result names the worker that holds its row.
-- The attempt is kept even when the row is no longer ours (the sweeper took it
-- back): the message was sent. Recipients refused at RCPT TO are suppressed by
-- suppress_refused, in the same transaction, only when there are any. The ids
-- come again as an array, which the planner counts: with the JSON alone it
-- guessed 100 rows and chose to scan the whole table for each group.
WITH results AS (
    SELECT * FROM jsonb_to_recordset(%(results)s::jsonb) AS r(
        worker text, id bigint, attempt int, status text, reason text, delay_seconds float8,
        provider_message_id text, verdict text, stage text, reply_code int,
        enhanced_status text, reply_text text, duration_ms float8, transport text,
        suppress boolean, recipients jsonb)
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
    WHERE o.id = ANY(%(ids)s::bigint[]) AND o.id = r.id
      -- status = 'sending' AND locked_by = r.worker, in a form the planner does
      -- not match to the in-flight partial index: it counts that index small
      -- and reads it whole, every row in flight and every dead entry, once per
      -- statement (per two or three emails); the primary key finds the ids.
      AND CASE o.status WHEN 'sending' THEN o.locked_by END = r.worker
    RETURNING o.id
), attempts AS (
    INSERT INTO email_attempt (outbox_id, attempt, verdict, stage, reply_code, enhanced_status,
                               reply_text, duration_ms, worker, transport, recipients)
    SELECT id, attempt, verdict, stage, reply_code, enhanced_status, reply_text, duration_ms,
           worker, transport, nullif(recipients, 'null'::jsonb)
    FROM results
)
SELECT id FROM updated;

-- suppress_refused --
-- A recipient refused at RCPT TO as non-existent (5.1.1 ...) is suppressed as
-- a hard bounce would suppress it: the refusal came in our own session. The
-- results are record_results' own.
INSERT INTO email_suppression (address, scope, reason, detail)
SELECT DISTINCT ON (lower(o.recipient)) lower(o.recipient), 'all', 'hard_bounce',
       'refused at RCPT TO: ' || coalesce(r.enhanced_status, r.reply_code::text)
FROM jsonb_to_recordset(%(results)s::jsonb)
         AS r(id bigint, reply_code int, enhanced_status text, suppress boolean)
JOIN email_outbox o ON o.id = r.id
WHERE r.suppress
ON CONFLICT (address) DO UPDATE
SET scope = 'all', reason = excluded.reason, detail = excluded.detail, created_at = now()
WHERE email_suppression.scope <> 'all';

-- return_unattempted --
-- Hand back rows whose send never reached a verdict on the message: the
-- sending path failed, or its breaker is open. Not an attempt, so the charge is
-- refunded; due again after the row's delay. Past the age limit a row is dead.
WITH returned AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb)
        AS r(id bigint, worker text, reason text, delay_seconds float8)
)
UPDATE email_outbox o
SET status = CASE WHEN greatest(o.created_at, o.requeued_at, o.send_at)
                       < now() - make_interval(secs => %(max_age_seconds)s)
                  THEN 'dead' ELSE 'pending' END,
    status_reason = CASE WHEN greatest(o.created_at, o.requeued_at, o.send_at)
                              < now() - make_interval(secs => %(max_age_seconds)s)
                         THEN 'gave up at the age limit: ' || r.reason ELSE r.reason END,
    failed_at = CASE WHEN greatest(o.created_at, o.requeued_at, o.send_at)
                          < now() - make_interval(secs => %(max_age_seconds)s)
                     THEN now() ELSE o.failed_at END,
    last_error = r.reason,
    attempts = o.attempts - 1,
    next_attempt_at = now() + make_interval(secs => r.delay_seconds),
    locked_by = NULL, locked_at = NULL
FROM returned r
WHERE o.id = ANY(%(ids)s::bigint[]) AND o.id = r.id  -- ids and CASE: see record_results
  AND CASE o.status WHEN 'sending' THEN o.locked_by END = r.worker
RETURNING o.id, o.status;

-- still_held --
-- Of (id, worker) pairs, the rows still being sent under that worker: what a
-- write whose commit went unanswered did not record.
SELECT o.id
FROM jsonb_to_recordset(%(rows)s::jsonb) AS h(id bigint, worker text)
JOIN email_outbox o ON o.id = h.id  -- CASE: see record_results
    AND CASE o.status WHEN 'sending' THEN o.locked_by END = h.worker;
