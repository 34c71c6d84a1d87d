-- record_results --
-- Store each attempt and its row's new state in one statement, for results of
-- several workers (threads): each result names the worker that holds its row.
-- The attempt is kept even when the row is no longer ours (the sweeper took it
-- back). The results arrive as one JSON array of arrays: far cheaper to send
-- than a dozen arrays, and to make than objects. Recipients refused at RCPT TO
-- are suppressed by suppress_refused, run in the same transaction only when
-- there are any: a third part here cost every statement about 0.1 ms even with
-- none. The ids come again as an array, which the planner counts: it takes the
-- JSON for 100 rows, and on an outbox of a few thousand rows chose a scan of
-- the whole table for each group of results over looking each row up.
WITH results AS (
    -- Each result is an array (store.result_entry, store.ENTRY_FIELDS): the
    -- worker, then the attempt's fields in order. A JSON null reads as NULL.
    SELECT e->>0 AS worker, (e->>1)::bigint AS id, (e->>2)::int AS attempt,
           e->>3 AS status, e->>4 AS reason, (e->>5)::float8 AS delay_seconds,
           e->>6 AS provider_message_id, e->>7 AS verdict, e->>8 AS stage,
           (e->>9)::int AS reply_code, e->>10 AS enhanced_status, e->>11 AS reply_text,
           (e->>12)::float8 AS duration_ms, e->>13 AS transport, (e->>14)::boolean AS suppress,
           nullif(e->15, 'null') AS recipients
    FROM jsonb_array_elements(%(results)s::jsonb) AS e
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
      AND o.status = 'sending' AND o.locked_by = r.worker
    RETURNING o.id
), attempts AS (
    INSERT INTO email_attempt (outbox_id, attempt, verdict, stage, reply_code, enhanced_status,
                               reply_text, duration_ms, worker, transport, recipients)
    SELECT id, attempt, verdict, stage, reply_code, enhanced_status, reply_text, duration_ms,
           worker, transport, recipients
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
FROM (SELECT (e->>1)::bigint AS id, (e->>9)::int AS reply_code, e->>10 AS enhanced_status,
             (e->>14)::boolean AS suppress
      FROM jsonb_array_elements(%(results)s::jsonb) AS e) AS r
JOIN email_outbox o ON o.id = r.id
WHERE r.suppress
ON CONFLICT (address) DO UPDATE
SET scope = 'all', reason = excluded.reason, detail = excluded.detail, created_at = now()
WHERE email_suppression.scope <> 'all';

-- journaled_stuck --
-- Of the rows named by results that worker threads journaled (id, worker,
-- attempt), the ones still held by that worker in that attempt whose process
-- has been silent for the stuck threshold: locked, so their journaled results
-- are recorded instead of the sweep marking them uncertain. Rows of live
-- processes are theirs to record; an entry of an earlier attempt is stale.
SELECT o.id
FROM jsonb_to_recordset(%(rows)s::jsonb) AS j(id bigint, worker text, attempt int)
JOIN email_outbox o ON o.id = j.id AND o.locked_by = j.worker AND o.attempts = j.attempt
WHERE o.status = 'sending' AND o.locked_at < now() - make_interval(secs => %(stuck_seconds)s)
  AND NOT EXISTS (
      SELECT FROM outbox_process p
      WHERE starts_with(o.locked_by, p.name || ':')
        AND p.beat_at > now() - make_interval(secs => %(stuck_seconds)s))
FOR UPDATE OF o SKIP LOCKED;

-- journals_finished --
-- Journaling processes (host:pid) silent for the stuck threshold whose threads
-- hold none of the rows their journal names: nothing in it is left to apply.
SELECT j.process
FROM unnest(%(processes)s::text[]) AS j(process)
WHERE NOT EXISTS (
          SELECT FROM outbox_process p
          WHERE p.name = j.process
            AND p.beat_at > now() - make_interval(secs => %(stuck_seconds)s))
  AND NOT EXISTS (
          SELECT FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(id bigint, worker text)
          JOIN email_outbox o ON o.id = r.id AND o.locked_by = r.worker
          WHERE starts_with(r.worker, j.process || ':') AND o.status = 'sending');

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
WHERE o.id = ANY(%(ids)s::bigint[]) AND o.id = r.id  -- ids: see record_results
  AND o.status = 'sending' AND o.locked_by = r.worker
RETURNING o.id, o.status;
