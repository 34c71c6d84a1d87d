-- load_attachment_blobs --
-- The bytes of the files a row names.
SELECT sha256, content FROM email_attachment_blob WHERE sha256 = ANY(%(hashes)s);

-- lock_published --
-- Wait for the relay that published these rows to commit its claim: a message
-- can arrive first, and an UPDATE would then see the rows still pending.
SELECT id FROM email_outbox WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id FOR UPDATE;

-- take_for_sending --
-- Move published rows to sending; a row not in queued (already sent, in flight
-- elsewhere, or swept back) is left out, so a duplicate delivery sends nothing.
-- The status is tested in a CASE so that the rows are found by their ids: a
-- plain status = 'queued' lets the planner read the in-flight partial index,
-- which it counts small, whole: every row in flight and every dead entry.
UPDATE email_outbox
SET status = 'sending', status_reason = 'taken by worker', attempts = attempts + 1,
    locked_by = %(worker)s, locked_at = now()
WHERE id = ANY(%(ids)s::bigint[]) AND CASE status WHEN 'queued' THEN true ELSE false END
RETURNING id, idempotency_key, recipient, template, params, message_id, priority, attempts,
          created_at, greatest(created_at, requeued_at, send_at) AS age_from, template_version,
          trace_context,
          sender, coalesce(reply_to, '{}'), subject, body_text, body_html,
          coalesce(headers, '[]'), coalesce(tags, '{}'), coalesce(metadata, '{}'),
          coalesce(cc, '{}'), coalesce(bcc, '{}'), locale, coalesce(attachments, '[]');

-- taken_by --
-- The rows of ids this worker holds: after a take whose commit went unanswered,
-- what the database says it took (the read-back, never an assumption).
SELECT id,    idempotency_key, recipient, template, params, message_id, priority, attempts,
       created_at, greatest(created_at, requeued_at, send_at) AS age_from, template_version,
       trace_context,
       sender, coalesce(reply_to, '{}'), subject, body_text, body_html,
       coalesce(headers, '[]'), coalesce(tags, '{}'), coalesce(metadata, '{}'),
       coalesce(cc, '{}'), coalesce(bcc, '{}'), locale, coalesce(attachments, '[]')
FROM email_outbox  -- CASE: see take_for_sending
WHERE id = ANY(%(ids)s::bigint[]) AND CASE status WHEN 'sending' THEN locked_by END = %(worker)s;

-- release_unattempted --
-- Hand back rows a worker took but never tried (shutdown, deadline); the
-- attempt they were charged is refunded. Rows handed back or swept keep their
-- (past) next_attempt_at, so they go to the front of the due queue.
UPDATE email_outbox
SET status = 'pending', status_reason = %(reason)s, attempts = attempts - 1,
    locked_by = NULL, locked_at = NULL
WHERE id = ANY(%(ids)s::bigint[])  -- CASE: see take_for_sending
  AND CASE status WHEN 'sending' THEN locked_by END = %(worker)s;

-- defer_paced --
-- Hand back rows a worker took but may not send yet: their receiver's rate
-- is used up. Not an attempt, so the charge is refunded; each row is due
-- again when the pacer says its receiver has room.
WITH paced AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(delays)s::float8[], %(reasons)s::text[])
        AS p(id, delay_seconds, reason)
)
UPDATE email_outbox o
SET status = 'pending', status_reason = p.reason, attempts = o.attempts - 1,
    next_attempt_at = now() + make_interval(secs => p.delay_seconds),
    locked_by = NULL, locked_at = NULL
FROM paced p
WHERE o.id = p.id  -- CASE: see take_for_sending
  AND CASE o.status WHEN 'sending' THEN o.locked_by END = %(worker)s;

-- find_template_version --
-- A stored template version, for a row enqueued before the directory changed.
SELECT name, files, compiled_html, compiled_text FROM email_template_version WHERE hash = %(hash)s;
