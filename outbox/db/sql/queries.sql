-- insert_message --
-- Insert one email unless its key exists, or existed and was purged (its
-- tombstone answers then: the original id and Message-ID, status `purged`); a
-- suppressed recipient's email (by address, or by its hash once forgotten) is
-- written as a `suppressed` audit row that is never sent. Wakes the relays at
-- commit when there is something to send. No row back: the key exists
-- (find_by_key). The column list is intake's row (outbox.db.statement fills
-- the markers); `key`, `recipient`, `priority` and `content_hash` are among
-- its values.
WITH suppression AS (
    SELECT reason FROM email_suppression
    WHERE address IN (lower(%(recipient)s), email_address_hash(%(recipient)s))
      AND (scope = 'all' OR %(priority)s = 'bulk')
    LIMIT 1
), purged AS (
    SELECT outbox_id, message_id, content_prefix FROM email_key_tombstone
    WHERE key_hash = email_key_hash(%(key)s)
), inserted AS (
    INSERT INTO email_outbox (/*columns*/, status, status_reason, next_attempt_at)
    SELECT /*values*/,
           CASE WHEN s.reason IS NULL THEN 'pending' ELSE 'suppressed' END,
           CASE WHEN s.reason IS NULL THEN 'enqueued' ELSE 'recipient suppressed: ' || s.reason END,
           coalesce(%(send_at)s::timestamptz, now())  -- a scheduled email waits until then
    FROM (SELECT 1) AS one LEFT JOIN suppression s ON true
    WHERE NOT EXISTS (SELECT FROM purged)
    -- Every unique index is an arbiter: a concurrent insert of the same key can
    -- meet the Message-ID's index first, and must not fail there either.
    ON CONFLICT DO NOTHING
    RETURNING id, message_id, content_hash, priority, status
)
SELECT id, message_id, content_hash, true AS created, status,
       CASE WHEN status = 'pending' THEN pg_notify('outbox_due', priority)::text END
FROM inserted
UNION ALL
-- Only 8 bytes of the content hash are kept: the same 8 bytes are the same content.
SELECT outbox_id, message_id,
       CASE WHEN content_prefix = decode(left(%(content_hash)s, 16), 'hex')
            THEN %(content_hash)s ELSE encode(content_prefix, 'hex') END,
       false, 'purged', NULL
FROM purged;

-- find_by_key --
-- The stored identity of a key insert_message found there (before, or inserted
-- by a concurrent transaction that insert_message's ON CONFLICT waited for),
-- or its tombstone when a purge took the row meanwhile.
SELECT id, message_id, content_hash, false AS created, status, NULL
FROM email_outbox WHERE idempotency_key = %(key)s
UNION ALL
SELECT outbox_id, message_id,
       CASE WHEN content_prefix = decode(left(%(content_hash)s, 16), 'hex')
            THEN %(content_hash)s ELSE encode(content_prefix, 'hex') END,
       false, 'purged', NULL
FROM email_key_tombstone
WHERE key_hash = email_key_hash(%(key)s)
  AND NOT EXISTS (SELECT FROM email_outbox WHERE idempotency_key = %(key)s);

-- enqueue_function_exists --
-- Whether the enqueue function of this release (outbox.db.statement) is there:
-- `outbox migrate` creates it; until then enqueue sends insert_message itself.
SELECT to_regprocedure(%(signature)s) IS NOT NULL;

-- outbox_id_last --
-- The last id this session took: the newest row of its COPY.
SELECT currval(pg_get_serial_sequence('email_outbox', 'id'));

-- outbox_id_mark --
-- A mark below every id enqueue_many's COPY will take: the last id anyone took
-- (ids only grow), read without taking one.
SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('email_outbox', 'id')::regclass), 0);

-- copy_savepoint --
-- Before enqueue_many's COPY: a COPY that fails leaves the caller's transaction as it was.
SAVEPOINT outbox_copy;

-- copy_savepoint_rollback --
-- The COPY failed (a known key, a row refused while streaming): undo it alone.
ROLLBACK TO SAVEPOINT outbox_copy;

-- copy_savepoint_release --
-- The COPY is done (or undone); its rows stay in the caller's transaction.
RELEASE SAVEPOINT outbox_copy;

-- copied_rows --
-- The rows enqueue_many's COPY just wrote, in the order written (ids are taken
-- row by row): those above the mark, up to the last id the COPY took, and
-- written by the same (sub)transaction as that last row, so other sessions'
-- rows in the range are left out. With each recipient's suppression, if any,
-- and whether the key was purged (its tombstone keeps it taken).
-- Two joins, each hashed once per batch: the address in clear, or its hash
-- once forgotten.
SELECT o.id, coalesce(x.reason, xh.reason),
       EXISTS (SELECT FROM email_key_tombstone t
               WHERE t.key_hash = email_key_hash(o.idempotency_key)) AS purged
FROM email_outbox o
LEFT JOIN email_suppression x
    ON x.address = lower(o.recipient) AND (x.scope = 'all' OR o.priority = 'bulk')
LEFT JOIN email_suppression xh
    ON xh.address = email_address_hash(o.recipient) AND (xh.scope = 'all' OR o.priority = 'bulk')
WHERE o.id > %(after)s AND o.id <= %(last)s
  AND o.xmin = (SELECT xmin FROM email_outbox WHERE id = %(last)s)
ORDER BY o.id;

-- suppress_copied --
-- Copied rows whose recipient is suppressed become audit rows, never sent.
UPDATE email_outbox o
SET status = 'suppressed', status_reason = 'recipient suppressed: ' || s.reason
FROM unnest(%(ids)s::bigint[], %(reasons)s::text[]) AS s(id, reason)
WHERE o.id = s.id;

-- insert_rows --
-- Many emails in one statement (drivers without COPY, a batch with known keys):
-- the rows come as one JSON array of objects shaped like email_outbox, read
-- with the table's own column types. Known keys are left alone, purged ones
-- too (their tombstone answers: status `purged`); a known key with other
-- content writes nothing at all. A suppressed recipient is found by address,
-- or by its hash once forgotten. One row back per given row, in order: key,
-- id, Message-ID, created, status, conflict. A key a concurrent transaction
-- inserted meanwhile comes back with a NULL id (existing_keys).
WITH given AS (
    SELECT * FROM jsonb_populate_recordset(NULL::email_outbox, %(rows)s::jsonb)
        WITH ORDINALITY AS g
), known AS (
    SELECT o.idempotency_key, o.id, o.message_id, o.status, o.content_hash
    FROM email_outbox o JOIN given g USING (idempotency_key)
    UNION ALL
    -- Only 8 bytes of a purged email's content hash are kept: the same 8 bytes
    -- are the same content.
    SELECT g.idempotency_key, t.outbox_id, t.message_id, 'purged',
           CASE WHEN t.content_prefix = decode(left(g.content_hash, 16), 'hex')
                THEN g.content_hash ELSE encode(t.content_prefix, 'hex') END
    FROM given g JOIN email_key_tombstone t ON t.key_hash = email_key_hash(g.idempotency_key)
    WHERE NOT EXISTS (SELECT FROM email_outbox o WHERE o.idempotency_key = g.idempotency_key)
), conflicts AS (
    SELECT k.idempotency_key FROM known k JOIN given g USING (idempotency_key)
    WHERE k.content_hash <> g.content_hash
), inserted AS (
    INSERT INTO email_outbox (/*columns*/, status, status_reason, next_attempt_at)
    SELECT /*g*/,
           CASE WHEN coalesce(x.reason, xh.reason) IS NULL THEN 'pending' ELSE 'suppressed' END,
           CASE WHEN coalesce(x.reason, xh.reason) IS NULL THEN 'enqueued'
                ELSE 'recipient suppressed: ' || coalesce(x.reason, xh.reason) END,
           coalesce(g.send_at, now())  -- a scheduled email waits until then
    FROM given g
    LEFT JOIN email_suppression x
        ON x.address = lower(g.recipient) AND (x.scope = 'all' OR g.priority = 'bulk')
    LEFT JOIN email_suppression xh
        ON xh.address = email_address_hash(g.recipient)
       AND (xh.scope = 'all' OR g.priority = 'bulk')
    WHERE NOT EXISTS (SELECT FROM conflicts)
      AND NOT EXISTS (SELECT FROM known k WHERE k.idempotency_key = g.idempotency_key)
    ORDER BY g.ordinality
    ON CONFLICT DO NOTHING  -- any unique index, as in insert_message
    RETURNING idempotency_key, id, message_id, status
)
SELECT g.idempotency_key, coalesce(i.id, k.id), coalesce(i.message_id, k.message_id),
       i.id IS NOT NULL, coalesce(i.status, k.status),
       coalesce(k.content_hash <> g.content_hash, false)
FROM given g
LEFT JOIN inserted i USING (idempotency_key)
LEFT JOIN known k USING (idempotency_key)
ORDER BY g.ordinality;

-- existing_keys --
-- The stored rows of keys a concurrent transaction inserted during
-- enqueue_many, or the tombstones of those purged since (with the 8 bytes of
-- the content hash they keep).
SELECT idempotency_key, id, message_id, status, content_hash FROM email_outbox
WHERE idempotency_key = ANY(%(keys)s)
UNION ALL
SELECT k, t.outbox_id, t.message_id, 'purged', encode(t.content_prefix, 'hex')
FROM unnest(%(keys)s::text[]) AS k
JOIN email_key_tombstone t ON t.key_hash = email_key_hash(k)
WHERE NOT EXISTS (SELECT FROM email_outbox o WHERE o.idempotency_key = k);

-- drop_suppressed_copies --
-- Cc and bcc recipients of new rows that are on the suppression list (for bulk
-- mail, or for all mail) are taken off the row, and each is recorded in its
-- history; the email still goes to `to` and the others.
WITH found AS (
    SELECT o.id, u.address, u.kind, x.reason
    FROM email_outbox o
    CROSS JOIN LATERAL (
        SELECT a, 'cc' FROM unnest(o.cc) AS a
        UNION ALL
        SELECT a, 'bcc' FROM unnest(o.bcc) AS a
    ) AS u(address, kind)
    JOIN email_suppression x
        ON x.address IN (lower(u.address), email_address_hash(u.address))
       AND (x.scope = 'all' OR o.priority = 'bulk')
    WHERE o.id = ANY(%(ids)s)
), dropped AS (
    UPDATE email_outbox o
    SET cc = nullif(ARRAY(SELECT a FROM unnest(o.cc) AS a
                          WHERE lower(a) NOT IN (SELECT lower(f.address) FROM found f
                                                 WHERE f.id = o.id)), '{}'),
        bcc = nullif(ARRAY(SELECT a FROM unnest(o.bcc) AS a
                           WHERE lower(a) NOT IN (SELECT lower(f.address) FROM found f
                                                  WHERE f.id = o.id)), '{}')
    WHERE o.id IN (SELECT id FROM found)
    RETURNING o.id, o.status
)
INSERT INTO email_event (outbox_id, from_status, to_status, reason)
SELECT f.id, d.status, d.status, f.kind || ' ' || f.address || ' dropped: suppressed: ' || f.reason
FROM found f JOIN dropped d USING (id)
RETURNING outbox_id;

-- schedule_new --
-- New rows enqueued for later by COPY (which cannot compute a column) wait
-- until their send_at.
UPDATE email_outbox SET next_attempt_at = send_at
WHERE id = ANY(%(ids)s) AND send_at IS NOT NULL AND status = 'pending';

-- cancel --
-- Call off one email that no worker has taken yet (pending or queued); the row
-- is locked until the caller's transaction ends, so a worker taking it waits
-- and then finds it no longer queued. The status trigger records the change,
-- with `locked_by` as its actor: here, who cancelled. Returns the row's id, the
-- status it had, and whether it was cancelled now.
WITH target AS (
    SELECT id, status FROM email_outbox WHERE idempotency_key = %(key)s FOR UPDATE
), cancelled AS (
    UPDATE email_outbox o
    SET status = 'cancelled', status_reason = 'cancelled: ' || %(reason)s,
        locked_by = %(by)s, locked_at = NULL
    FROM target t
    WHERE o.id = t.id AND t.status IN ('pending', 'queued')
    RETURNING o.id
)
SELECT t.id, t.status, EXISTS (SELECT FROM cancelled) FROM target t;

-- store_attachment_blobs --
-- Each file once: a file another row stored already is not written again.
INSERT INTO email_attachment_blob (sha256, content, size)
SELECT h, c, length(c) FROM unnest(%(hashes)s::text[], %(contents)s::bytea[]) AS f(h, c)
ON CONFLICT (sha256) DO NOTHING;

-- use_attachments --
-- Which new rows use which files (what keeps a file stored).
INSERT INTO email_attachment_use (outbox_id, sha256)
SELECT i, h FROM unnest(%(ids)s::bigint[], %(hashes)s::text[]) AS u(i, h)
ON CONFLICT DO NOTHING;

-- load_attachment_blobs --
-- The bytes of the files a row names.
SELECT sha256, content FROM email_attachment_blob WHERE sha256 = ANY(%(hashes)s);

-- notify_due --
-- Wake the relays at commit.
SELECT pg_notify('outbox_due', %(priority)s);

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
FROM email_outbox
WHERE id = ANY(%(ids)s) AND status = 'sending' AND locked_by = %(worker)s;

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

-- release_unattempted --
-- Hand back rows a worker took but never tried (shutdown, deadline); the
-- attempt they were charged is refunded. Rows handed back or swept keep their
-- (past) next_attempt_at, so they go to the front of the due queue.
UPDATE email_outbox
SET status = 'pending', status_reason = %(reason)s, attempts = attempts - 1,
    locked_by = NULL, locked_at = NULL
WHERE id = ANY(%(ids)s) AND status = 'sending' AND locked_by = %(worker)s;

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
WHERE o.id = p.id AND o.status = 'sending' AND o.locked_by = %(worker)s;

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
-- requeue or the time it was scheduled for; 0 while only scheduled rows wait),
-- read from the head of the email_outbox_unsent_from index.
SELECT p.priority, greatest(extract(epoch FROM now() - oldest.at), 0)::float8
FROM (VALUES ('high'), ('bulk')) AS p (priority)
CROSS JOIN LATERAL (
    SELECT greatest(created_at, requeued_at, send_at) AS at FROM email_outbox
    WHERE status IN ('pending', 'queued', 'sending') AND priority = p.priority
    ORDER BY greatest(created_at, requeued_at, send_at)
    LIMIT 1
) AS oldest;

-- find_message --
-- The rows an operator's reference names: key, Message-ID (with or without its
-- brackets), row id or provider id; each has an index.
SELECT id, idempotency_key, recipient, template, params, message_id, priority, status,
       status_reason, attempts, next_attempt_at, locked_by, locked_at, last_error,
       provider_message_id, created_at, queued_at, sent_at, failed_at, trace_context, tags,
       metadata, cc, bcc, sender, reply_to, send_at, locale,
       (SELECT jsonb_agg(a - 'sha256') FROM jsonb_array_elements(attachments) AS a) AS attachments
FROM email_outbox
WHERE idempotency_key = %(ref)s OR message_id = %(ref)s OR message_id = %(bracketed)s
   OR id = %(row_id)s::bigint OR provider_message_id = %(ref)s
ORDER BY id LIMIT 20;

-- list_attempts --
-- Every attempt of one row. `attempt` restarts at 1 after a requeue; `number`
-- counts them all.
SELECT row_number() OVER (ORDER BY id) AS number, attempt, verdict, stage, reply_code,
       enhanced_status, reply_text, duration_ms, worker, transport, attempted_at, recipients
FROM email_attempt WHERE outbox_id = %(id)s ORDER BY id;

-- list_events --
-- Every status change of one row.
SELECT from_status, to_status, reason, actor, at
FROM email_event WHERE outbox_id = %(id)s ORDER BY id;

-- list_bounces --
-- The bounce and complaint reports linked to one row, oldest first.
SELECT id, received_at, source, link, results
FROM email_bounce WHERE outbox_id = %(id)s ORDER BY id;

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
DELETE FROM email_suppression
WHERE address IN (lower(%(address)s), email_address_hash(%(address)s))
RETURNING address;

-- find_suppression --
-- Why an address is suppressed, if it is.
SELECT address, scope, reason, detail, source_bounce_id, created_at
FROM email_suppression
WHERE address IN (lower(%(address)s), email_address_hash(%(address)s))
ORDER BY scope = 'all' DESC LIMIT 1;

-- list_suppressions --
-- Suppressed addresses, newest first.
SELECT address, scope, reason, detail, source_bounce_id, created_at
FROM email_suppression ORDER BY created_at DESC LIMIT %(limit)s;

-- store_bounce --
-- Keep a received bounce before anything else happens to it; a provider's
-- event seen before returns nothing.
INSERT INTO email_bounce (envelope_to, raw, source, event_id)
VALUES (%(envelope_to)s, %(raw)s, %(source)s, %(event_id)s)
ON CONFLICT (source, event_id) WHERE event_id IS NOT NULL DO NOTHING
RETURNING id;

-- load_bounce --
-- A stored bounce, locked so that two processors never handle it at once.
SELECT id, envelope_to, raw, processed_at, source FROM email_bounce WHERE id = %(id)s FOR UPDATE;

-- unprocessed_bounces --
-- Bounces stored but not yet processed (a crash between storing and processing).
SELECT id FROM email_bounce WHERE processed_at IS NULL ORDER BY id LIMIT %(limit)s;

-- finish_bounce --
-- Record what processing a bounce found.
UPDATE email_bounce
SET processed_at = now(), outbox_id = %(outbox_id)s, link = %(link)s, forged = %(forged)s,
    results = %(results)s, error = %(error)s
WHERE id = %(id)s;

-- find_row_by_provider_id --
-- The outbox row a provider's webhook is about, by the id the provider gave it.
SELECT id, recipient, coalesce(cc, '{}') || coalesce(bcc, '{}')
FROM email_outbox WHERE provider_message_id = %(provider_message_id)s
LIMIT 1;

-- bounced_row_trace --
-- What a bounce's span needs of its row: the business event's trace context.
SELECT idempotency_key, message_id, template, priority, provider_message_id, trace_context
FROM email_outbox WHERE id = %(id)s;

-- find_row_for_bounce --
-- The outbox row a bounce is about: by id (VERP) or by its Message-ID.
SELECT id, recipient, coalesce(cc, '{}') || coalesce(bcc, '{}') FROM email_outbox
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
-- The latest rows sent to an address with their bounce verdicts (soft-bounce
-- streak), through the index of the address's keyed hash.
SELECT id, bounce_class FROM email_outbox
WHERE email_recipient_hash(recipient) = email_recipient_hash(%(address)s) AND status = 'sent'
ORDER BY id DESC LIMIT %(limit)s;

-- store_template_version --
-- Keep one template version (content-addressed, never changed) before rows name it.
INSERT INTO email_template_version (hash, name, files, compiled_html, compiled_text)
VALUES (%(hash)s, %(name)s, %(files)s, %(compiled_html)s, %(compiled_text)s)
ON CONFLICT (hash) DO NOTHING
RETURNING hash;

-- find_template_version --
-- A stored template version, for a row enqueued before the directory changed.
SELECT name, files, compiled_html, compiled_text FROM email_template_version WHERE hash = %(hash)s;

-- unsubscribe_recipient --
-- The recipient of the row an unsubscribe token names.
SELECT recipient FROM email_outbox WHERE id = %(id)s;

-- metrics_seed_counts --
-- Rows per status and priority outside the in-flight window, read once when the
-- exporter starts (a full scan); status changes keep the figures current after.
SELECT status, priority, count(*) FROM email_outbox
WHERE status NOT IN ('queued', 'sending')
GROUP BY 1, 2;

-- metrics_seed_sent_minutes --
-- Rows sent in the last 24 hours per minute, read once when the exporter starts.
SELECT floor(extract(epoch FROM sent_at) / 60)::bigint AS minute, count(*)
FROM email_outbox WHERE sent_at > now() - interval '24 hours'
GROUP BY 1;

-- metrics_seed_last_publish --
-- When a relay last published, as seen in the rows: the newest claim among the
-- rows in flight and the row sent last (the events carry it from then on).
SELECT extract(epoch FROM greatest(
    (SELECT max(queued_at) FROM email_outbox WHERE status IN ('queued', 'sending')),
    (SELECT queued_at FROM email_outbox WHERE sent_at IS NOT NULL ORDER BY sent_at DESC LIMIT 1)
))::float8;

-- metrics_tops --
-- The highest id of each table the exporter follows, and the database clock.
SELECT (SELECT max(id) FROM email_outbox), (SELECT max(id) FROM email_event),
       (SELECT max(id) FROM email_attempt), extract(epoch FROM now())::float8;

-- metrics_visible --
-- How many ids of each new range are visible; fewer than the range holds means
-- some are missing (the common case has none, and counting is cheap).
SELECT (SELECT count(*) FROM email_outbox WHERE id BETWEEN %(rows_low)s AND %(rows_high)s),
       (SELECT count(*) FROM email_event WHERE id BETWEEN %(events_low)s AND %(events_high)s),
       (SELECT count(*) FROM email_attempt
        WHERE id BETWEEN %(attempts_low)s AND %(attempts_high)s);

-- metrics_missing_rows --
-- Ids in a range with no visible outbox row: uncommitted, or rolled back.
SELECT g FROM generate_series(%(low)s::bigint, %(high)s::bigint) AS g
EXCEPT ALL
SELECT id FROM email_outbox WHERE id BETWEEN %(low)s AND %(high)s;

-- metrics_missing_events --
-- Ids in a range with no visible event: uncommitted, or rolled back.
SELECT g FROM generate_series(%(low)s::bigint, %(high)s::bigint) AS g
EXCEPT ALL
SELECT id FROM email_event WHERE id BETWEEN %(low)s AND %(high)s;

-- metrics_missing_attempts --
-- Ids in a range with no visible attempt: uncommitted, or rolled back.
SELECT g FROM generate_series(%(low)s::bigint, %(high)s::bigint) AS g
EXCEPT ALL
SELECT id FROM email_attempt WHERE id BETWEEN %(low)s AND %(high)s;

-- metrics_found_rows --
-- Which of the outbox ids missing at an earlier scrape are visible now.
SELECT id FROM email_outbox WHERE id = ANY(%(ids)s);

-- metrics_found_events --
-- Which of the event ids missing at an earlier scrape are visible now.
SELECT id FROM email_event WHERE id = ANY(%(ids)s);

-- metrics_found_attempts --
-- Which of the attempt ids missing at an earlier scrape are visible now.
SELECT id FROM email_attempt WHERE id = ANY(%(ids)s);

-- metrics_new_rows --
-- Rows enqueued since the last scrape (a range of the primary key), by priority;
-- `suppressed` rows never change status, every other row starts `pending`.
SELECT priority, status = 'suppressed' AS suppressed, count(*)
FROM email_outbox
WHERE (id > %(after)s AND id <= %(upto)s) OR id = ANY(%(found)s)
GROUP BY 1, 2;

-- metrics_new_transitions --
-- Status changes since the last scrape by priority, with the latest change
-- time; for rows marked sent, also the enqueue-to-sent latency bucket (index
-- into the bounds), its sum, and the minute they were sent.
SELECT o.priority, e.from_status, e.to_status, count(*), extract(epoch FROM max(e.at))::float8,
       s.bucket, s.minute, sum(s.latency)::float8
FROM email_event e JOIN email_outbox o ON o.id = e.outbox_id
LEFT JOIN LATERAL (
    SELECT width_bucket(extract(epoch FROM o.sent_at - o.created_at)::float8,
                        %(bounds)s::float8[]) AS bucket,
           floor(extract(epoch FROM o.sent_at) / 60)::bigint AS minute,
           extract(epoch FROM o.sent_at - o.created_at) AS latency
    WHERE e.to_status = 'sent' AND o.sent_at IS NOT NULL
) s ON true
WHERE ((e.id > %(after)s AND e.id <= %(upto)s) OR e.id = ANY(%(found)s))
  AND e.from_status IS DISTINCT FROM e.to_status
  -- queued -> sending changes no figure: both are counted whole on every scrape
  AND NOT (e.from_status IN ('queued', 'sending') AND e.to_status IN ('queued', 'sending'))
GROUP BY 1, 2, 3, 6, 7;

-- metrics_new_attempts --
-- Attempts since the last scrape by priority, verdict, reply code, the first
-- words of a code-less reply (what broke) and duration bucket.
SELECT o.priority, a.verdict, a.reply_code,
       CASE WHEN a.reply_code IS NULL
            THEN lower(left(split_part(coalesce(a.reply_text, ''), ':', 1), 40)) END,
       width_bucket(a.duration_ms / 1000, %(bounds)s::float8[]),
       count(*), coalesce(sum(a.duration_ms) / 1000, 0)::float8
FROM email_attempt a JOIN email_outbox o ON o.id = a.outbox_id
WHERE (a.id > %(after)s AND a.id <= %(upto)s) OR a.id = ANY(%(found)s)
GROUP BY 1, 2, 3, 4, 5;

-- metrics_in_flight --
-- Rows queued or sending per priority (bounded by OUTBOX_MAX_IN_FLIGHT).
SELECT priority, status, count(*) FROM email_outbox
WHERE status IN ('queued', 'sending')
GROUP BY 1, 2;

-- metrics_heads --
-- Per priority: age of the oldest unsent row and of the oldest due pending row
-- (0 when none), each the first entry of a partial index.
SELECT p.priority,
       greatest(coalesce(extract(epoch FROM now() - (
           SELECT greatest(created_at, requeued_at, send_at) FROM email_outbox
           WHERE status IN ('pending', 'queued', 'sending') AND priority = p.priority
           ORDER BY greatest(created_at, requeued_at, send_at) LIMIT 1)), 0), 0)::float8,
       greatest(coalesce(extract(epoch FROM now() - (
           SELECT min(next_attempt_at) FROM email_outbox
           WHERE status = 'pending' AND priority = p.priority)), 0), 0)::float8
FROM unnest(%(priorities)s::text[]) AS p(priority);

-- metrics_bounces_24h --
-- Rows whose bounce or complaint arrived in the last 24 hours, by class.
SELECT bounce_class, count(*) FROM email_outbox
WHERE bounced_at > now() - interval '24 hours'
GROUP BY 1;

-- metrics_bounce_reports_24h --
-- Bounce and complaint reports received in the last 24 hours, by where they
-- came from and what became of them: linked (how), forged, or not processed.
SELECT source,
       CASE WHEN forged THEN 'forged'
            WHEN processed_at IS NULL THEN 'unprocessed'
            ELSE coalesce(link, 'none') END AS outcome,
       count(*)
FROM email_bounce
WHERE received_at > now() - interval '24 hours'
GROUP BY 1, 2;

-- metrics_suppressed --
-- Addresses on the suppression list.
SELECT count(*) FROM email_suppression;

-- beat --
-- A relay or worker process is alive; what it reports goes with it.
INSERT INTO outbox_process (name, kind, detail) VALUES (%(name)s, %(kind)s, %(detail)s)
ON CONFLICT (name) DO UPDATE SET beat_at = now(), detail = excluded.detail;

-- forget_process --
-- A process that stops cleanly leaves; one silent for a day is forgotten.
DELETE FROM outbox_process
WHERE name = %(name)s OR beat_at < now() - interval '1 day';

-- sweep_guard --
-- How long Postgres has run, and the age of the freshest heartbeat of any
-- process (NULL: none registered): whether silent processes can be trusted gone.
SELECT extract(epoch FROM now() - pg_postmaster_start_time())::float8,
       (SELECT extract(epoch FROM now() - max(beat_at))::float8 FROM outbox_process);

-- list_processes --
-- Relays and workers by kind, with seconds since each one's last heartbeat.
SELECT name, kind, detail, started_at, extract(epoch FROM now() - beat_at)::float8
FROM outbox_process ORDER BY kind, name;

-- queued_ids --
-- Rows published long enough ago to have reached the broker (sweep candidates).
SELECT id FROM email_outbox
WHERE status = 'queued' AND locked_at < now() - make_interval(secs => %(lost_after)s)
ORDER BY id LIMIT %(limit)s;

-- unsent_counts --
-- Rows not yet sent per priority (the email_outbox_unsent_age index): what waits.
SELECT priority, count(*) FROM email_outbox
WHERE status IN ('pending', 'queued', 'sending') GROUP BY 1;

-- ensure_breaker --
-- The breaker row of a transport, created closed the first time.
INSERT INTO outbox_breaker (transport) VALUES (%(transport)s) ON CONFLICT DO NOTHING;

-- lock_breaker --
-- One transport's breaker, locked for a change (every change is made by one process).
SELECT transport, state, failures, opened_at, retry_at, probe_by, probe_until, last_error
FROM outbox_breaker WHERE transport = %(transport)s FOR UPDATE;

-- read_breaker --
-- One transport's breaker and the database clock, for a worker's cached copy.
SELECT transport, state, failures, opened_at, retry_at, probe_by, probe_until, last_error, now()
FROM outbox_breaker WHERE transport = %(transport)s;

-- save_breaker --
-- Write a breaker state computed by outbox.delivery.breaker.
UPDATE outbox_breaker
SET state = %(state)s, failures = %(failures)s, opened_at = %(opened_at)s, retry_at = %(retry_at)s,
    probe_by = %(probe_by)s, probe_until = %(probe_until)s, last_error = %(last_error)s,
    changed_at = now()
WHERE transport = %(transport)s;

-- list_breakers --
-- Every transport's breaker, for `outbox status` and the exporter.
SELECT transport, state, failures, opened_at, retry_at, probe_by, probe_until, last_error,
       extract(epoch FROM now() - changed_at)::float8
FROM outbox_breaker ORDER BY transport;

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
      AND o.status = 'sending' AND o.locked_by = r.worker
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

-- still_held --
-- Of (id, worker) pairs, the rows still being sent under that worker: what a
-- write whose commit went unanswered did not record.
SELECT o.id
FROM jsonb_to_recordset(%(rows)s::jsonb) AS h(id bigint, worker text)
JOIN email_outbox o ON o.id = h.id AND o.locked_by = h.worker
WHERE o.status = 'sending';

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

-- metrics_breakers --
-- Per transport, seconds its breaker has been open (0 when closed; never
-- below a millisecond while open, so that 0 always means up).
SELECT transport,
       CASE WHEN state = 'open'
            THEN greatest(extract(epoch FROM now() - opened_at)::float8, 0.001) ELSE 0 END
FROM outbox_breaker;
-- mark_bounce_unprocessable --
-- A report that processing failed on: processed (so nothing retries it for
-- ever and the reports after it go on), linked to nothing, with the reason.
UPDATE email_bounce
SET processed_at = now(), link = 'none', results = '[]'::jsonb, error = %(error)s
WHERE id = %(id)s AND processed_at IS NULL;

-- find_messages_to --
-- The latest rows to one address (support's lookup): settled rows through the
-- index of the address's keyed hash, rows in flight through the unsent index.
SELECT id, idempotency_key, recipient, template, params, message_id, priority, status,
       status_reason, attempts, next_attempt_at, locked_by, locked_at, last_error,
       provider_message_id, created_at, queued_at, sent_at, failed_at, trace_context, tags,
       metadata, cc, bcc, sender, reply_to, send_at, locale,
       (SELECT jsonb_agg(a - 'sha256') FROM jsonb_array_elements(attachments) AS a) AS attachments
FROM email_outbox
WHERE id IN (
    (SELECT id FROM email_outbox
     WHERE email_recipient_hash(recipient) = email_recipient_hash(%(address)s)
       AND status IN ('sent', 'failed', 'dead', 'held', 'suppressed', 'cancelled')
     ORDER BY id DESC LIMIT %(limit)s)
    UNION ALL
    -- Unindexed by address: lower() is cheaper per row than the hash.
    (SELECT id FROM email_outbox
     WHERE lower(recipient) = lower(%(address)s) AND status IN ('pending', 'queued', 'sending')
     ORDER BY id DESC LIMIT %(limit)s)
)
ORDER BY id DESC LIMIT %(limit)s;

-- create_api_key --
-- A new API key; only the token's hash is stored.
INSERT INTO outbox_api_key (name, token_hash, prefix, scopes)
VALUES (%(name)s, %(token_hash)s, %(prefix)s, %(scopes)s)
RETURNING id, created_at;

-- list_api_keys --
-- Every API key, newest first, without anything that opens a door.
SELECT id, name, prefix, scopes, created_at, revoked_at
FROM outbox_api_key ORDER BY id DESC;

-- revoke_api_key --
-- Revoke the live key of a name; no row back: no live key of that name.
UPDATE outbox_api_key SET revoked_at = now()
WHERE name = %(name)s AND revoked_at IS NULL
RETURNING id;

-- find_api_key --
-- The live key a presented token's hash names.
SELECT id, name, scopes FROM outbox_api_key
WHERE token_hash = %(token_hash)s AND revoked_at IS NULL;

-- api_email --
-- One email for the HTTP API, by id or by idempotency key.
SELECT id, idempotency_key, message_id, recipient, template, priority, status, status_reason,
       attempts, created_at, next_attempt_at, sent_at, failed_at
FROM email_outbox
WHERE id = %(id)s OR idempotency_key = %(key)s;

-- purge_batch --
-- Delete the next batch (by id, after the last one) of finished emails whose
-- last change is older than `before`, with their attempts, events and bounce
-- reports; each key leaves a tombstone so it stays taken. Rows a worker or
-- another purge holds are skipped.
WITH doomed AS (
    SELECT id FROM email_outbox
    WHERE id > %(after)s
      AND status IN ('sent', 'failed', 'dead', 'suppressed', 'cancelled')
      AND greatest(created_at, requeued_at, sent_at, failed_at, bounced_at) < %(before)s
    ORDER BY id LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM email_outbox o USING doomed d WHERE o.id = d.id
    RETURNING o.id, o.idempotency_key, o.message_id, o.content_hash, o.created_at
), kept AS (
    INSERT INTO email_key_tombstone (key_hash, outbox_id, message_id, content_prefix, created_at)
    SELECT email_key_hash(idempotency_key), id, message_id, decode(left(content_hash, 16), 'hex'),
           created_at
    FROM gone
    ON CONFLICT (key_hash) DO NOTHING
), attempts AS (
    DELETE FROM email_attempt a USING gone g WHERE a.outbox_id = g.id RETURNING 1
), events AS (
    DELETE FROM email_event e USING gone g WHERE e.outbox_id = g.id RETURNING 1
), bounces AS (
    DELETE FROM email_bounce b USING gone g WHERE b.outbox_id = g.id RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT max(id) FROM doomed),
       (SELECT count(*) FROM attempts), (SELECT count(*) FROM events),
       (SELECT count(*) FROM bounces);

-- analyze_tombstones --
-- Fresh statistics of the tombstones, taken once a purge has written its first
-- batch of them. Sessions keep a generic plan of insert_message per connection
-- (prepared statements); planned while the table was empty, it reads the
-- tombstones by a sequential scan, which then costs every enqueue a read of
-- every tombstone until statistics change: ANALYZE changes them, and every
-- session plans again, by the index.
ANALYZE email_key_tombstone;

-- purge_count --
-- How many finished emails a purge would delete (--dry-run).
SELECT count(*) FROM email_outbox
WHERE status IN ('sent', 'failed', 'dead', 'suppressed', 'cancelled')
  AND greatest(created_at, requeued_at, sent_at, failed_at, bounced_at) < %(before)s;

-- retention_lock --
-- One relay at a time applies the retention (a session lock, released by
-- retention_unlock); one lock per OUTBOX_SCHEMA, each schema's outbox its own.
SELECT pg_try_advisory_lock(%(lock)s, hashtext(%(schema)s));

-- retention_unlock --
-- Release the retention lock.
SELECT pg_advisory_unlock(%(lock)s, hashtext(%(schema)s));

-- forget_rows --
-- Erase an address from the outbox: the recipient, the params, the key when it
-- quotes the address (a tombstone keeps it taken), and every text quoting it;
-- an email not yet sent will not be. One event per row says so, without the
-- address. Returns the rows' ids.
WITH rows AS (
    -- Settled rows through the index of the address's keyed hash, rows in
    -- flight through the unsent index (one status list or the other: a row
    -- sent meanwhile is locked as it now is, and still matches).
    SELECT id, status, idempotency_key, message_id, content_hash, created_at FROM email_outbox
    WHERE (email_recipient_hash(recipient) = email_recipient_hash(%(address)s)
           AND status IN ('sent', 'failed', 'dead', 'held', 'suppressed', 'cancelled'))
       OR (lower(recipient) = lower(%(address)s) AND status IN ('pending', 'queued', 'sending'))
    FOR UPDATE
), keys AS (
    INSERT INTO email_key_tombstone (key_hash, outbox_id, message_id, content_prefix, created_at)
    SELECT email_key_hash(idempotency_key), id, message_id, decode(left(content_hash, 16), 'hex'),
           created_at
    FROM rows
    WHERE position(lower(%(address)s) IN lower(idempotency_key)) > 0
    ON CONFLICT (key_hash) DO NOTHING
), erased AS (
    UPDATE email_outbox o
    SET recipient = 'erased@erased.invalid', params = '{}',
        idempotency_key = CASE
            WHEN position(lower(%(address)s) IN lower(o.idempotency_key)) > 0
            THEN 'erased:' || encode(email_key_hash(o.idempotency_key), 'hex')
            ELSE o.idempotency_key END,
        status = CASE WHEN o.status IN ('pending', 'queued', 'sending', 'held')
                      THEN 'failed' ELSE o.status END,
        status_reason = CASE WHEN o.status IN ('pending', 'queued', 'sending', 'held')
                             THEN 'recipient erased on request'
                             ELSE regexp_replace(o.status_reason, %(pattern)s, '[erased]', 'gi') END,
        last_error = regexp_replace(o.last_error, %(pattern)s, '[erased]', 'gi'),
        failed_at = CASE WHEN o.status IN ('pending', 'queued', 'sending', 'held')
                         THEN now() ELSE o.failed_at END,
        locked_by = NULL, locked_at = NULL
    FROM rows r WHERE o.id = r.id
    RETURNING o.id, r.status AS was, o.status
), noted AS (
    -- A row whose status changed has its event from the update trigger already.
    INSERT INTO email_event (outbox_id, from_status, to_status, reason, actor)
    SELECT id, was, status, 'recipient, params and texts quoting the address erased on request',
           'outbox forget'
    FROM erased WHERE was = status
)
SELECT id FROM erased ORDER BY id;

-- forget_history --
-- Erase the address from the attempts, events and bounce reports of rows
-- forget_rows erased, and from bounce reports that name it; returns how many
-- attempts, events and reports were changed.
WITH attempts AS (
    UPDATE email_attempt
    SET reply_text = regexp_replace(reply_text, %(pattern)s, '[erased]', 'gi')
    WHERE outbox_id = ANY(%(ids)s) AND reply_text ~* %(pattern)s
    RETURNING 1
), events AS (
    UPDATE email_event
    SET reason = regexp_replace(reason, %(pattern)s, '[erased]', 'gi')
    WHERE outbox_id = ANY(%(ids)s) AND reason ~* %(pattern)s
    RETURNING 1
), bounces AS (
    UPDATE email_bounce
    SET raw = '', envelope_to = NULL, results = NULL,
        error = regexp_replace(error, %(pattern)s, '[erased]', 'gi')
    WHERE outbox_id = ANY(%(ids)s)
       OR results @> jsonb_build_array(jsonb_build_object('recipient', lower(%(address)s)))
       OR envelope_to = lower(%(address)s)
    RETURNING 1
)
SELECT (SELECT count(*) FROM attempts), (SELECT count(*) FROM events),
       (SELECT count(*) FROM bounces);

-- forget_suppression --
-- A suppressed address stays suppressed once forgotten: only its keyed hash is
-- kept (enqueue looks both up). Returns the hash when there was an entry.
UPDATE email_suppression
SET address = email_address_hash(%(address)s), detail = NULL
WHERE address = lower(%(address)s)
  AND NOT EXISTS (SELECT FROM email_suppression x WHERE x.address = email_address_hash(%(address)s))
RETURNING address;

-- forget_suppression_plain --
-- The address in clear, when its hash was kept already (forgotten before).
DELETE FROM email_suppression WHERE address = lower(%(address)s) RETURNING address;

-- storage_bytes --
-- The bytes each table takes (heap, indexes, TOAST), for the storage benchmark.
SELECT c.relname, pg_total_relation_size(c.oid)
FROM pg_class c
WHERE c.oid IN ('email_outbox'::regclass, 'email_attempt'::regclass, 'email_event'::regclass,
                'email_bounce'::regclass, 'email_key_tombstone'::regclass,
                'email_suppression'::regclass)
ORDER BY 1;

-- console_counts --
-- Rows per status and priority for every status but sent, each part counted
-- from its partial index (sent rows are the history: console_table_estimate).
SELECT 'pending', priority, count(*) FROM email_outbox WHERE status = 'pending' GROUP BY 2
UNION ALL
SELECT status, priority, count(*) FROM email_outbox
WHERE status IN ('queued', 'sending') GROUP BY 1, 2
UNION ALL
SELECT status, priority, count(*) FROM email_outbox
WHERE status IN ('dead', 'held', 'failed', 'suppressed') GROUP BY 1, 2
ORDER BY 1, 2;

-- console_table_estimate --
-- The planner's row count of email_outbox (kept by autovacuum): counting ten
-- million sent rows exactly takes seconds.
SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'email_outbox'::regclass;

-- console_sent_per_minute --
-- Rows sent in each minute of the last hour (the sent_at index).
SELECT floor(extract(epoch FROM sent_at) / 60)::bigint AS minute, count(*)
FROM email_outbox WHERE sent_at > now() - interval '1 hour'
GROUP BY 1 ORDER BY 1;

-- console_emails --
-- One page of emails, newest first, below a keyset cursor; each filter is
-- optional (NULL). Run unprepared, so each plan sees its filters as constants
-- and a status filter on a parked status uses email_outbox_parked_id.
SELECT id, idempotency_key, recipient, template, priority, status, status_reason, attempts,
       created_at, sent_at, tags
FROM email_outbox
WHERE id < %(before)s AND id >= %(from_id)s
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(priority)s::text IS NULL OR priority = %(priority)s::text)
  AND (%(template)s::text IS NULL OR template = %(template)s::text)
  AND (%(tag)s::text IS NULL OR %(tag)s::text = ANY(tags))
  AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s::timestamptz)
ORDER BY id DESC LIMIT %(limit)s;

-- console_id_range --
-- The lowest and highest row id (the ends of the primary key).
SELECT min(id), max(id) FROM email_outbox;

-- console_created_at --
-- When the first row from an id on was enqueued: one step of the search for
-- the ids a time filter covers.
SELECT created_at FROM email_outbox WHERE id >= %(id)s ORDER BY id LIMIT 1;

-- console_find --
-- Emails by row id, idempotency key, Message-ID (with or without its angle
-- brackets) or the provider's id: each an indexed equality.
SELECT id, idempotency_key, recipient, template, priority, status, status_reason, attempts,
       created_at, sent_at, tags
FROM email_outbox
WHERE id = %(id)s OR idempotency_key = %(ref)s OR message_id = %(ref)s
   OR message_id = %(bracketed)s OR provider_message_id = %(ref)s
ORDER BY id DESC LIMIT %(limit)s;

-- console_find_to --
-- Emails to one address, newest first, below a keyset cursor: settled rows
-- (sent, parked, cancelled) through the index of the address's keyed hash,
-- rows in flight through the unsent index (read whole: as many as the unsent
-- backlog; lower() is cheaper per row than the hash).
SELECT * FROM (
    (SELECT id, idempotency_key, recipient, template, priority, status, status_reason, attempts,
            created_at, sent_at, tags
     FROM email_outbox
     WHERE email_recipient_hash(recipient) = email_recipient_hash(%(address)s)
       AND status IN ('sent', 'failed', 'dead', 'held', 'suppressed', 'cancelled')
       AND id < %(before)s
     ORDER BY id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT id, idempotency_key, recipient, template, priority, status, status_reason, attempts,
            created_at, sent_at, tags
     FROM email_outbox
     WHERE lower(recipient) = lower(%(address)s) AND id < %(before)s
       AND status IN ('pending', 'queued', 'sending')
     ORDER BY id DESC LIMIT %(limit)s)
) AS found
ORDER BY id DESC LIMIT %(limit)s;

-- console_email --
-- One email whole, for its page.
SELECT id, idempotency_key, recipient, template, params, message_id, priority, status,
       status_reason, attempts, next_attempt_at, locked_by, locked_at, last_error,
       provider_message_id, created_at, queued_at, sent_at, failed_at, requeued_at,
       bounce_class, bounced_at, trace_context, template_version, sender
FROM email_outbox WHERE id = %(id)s;

-- console_templates --
-- The template names in use (for the filter), from the newest rows.
SELECT DISTINCT template FROM (
    SELECT template FROM email_outbox ORDER BY id DESC LIMIT 5000
) AS recent ORDER BY 1;

-- console_audit_add --
-- One console action: who, what, when, why.
INSERT INTO console_audit (actor, role, action, target, reason, detail)
VALUES (%(actor)s, %(role)s, %(action)s, %(target)s, %(reason)s, %(detail)s)
RETURNING id;

-- console_audit_list --
-- Console actions, newest first, below a keyset cursor.
SELECT id, at, actor, role, action, target, reason, detail
FROM console_audit WHERE id < %(before)s ORDER BY id DESC LIMIT %(limit)s;

-- console_suppressions --
-- Suppressed addresses, newest first, below a (created_at, address) cursor.
SELECT address, scope, reason, detail, source_bounce_id, created_at
FROM email_suppression
WHERE (created_at, address) < (%(before_at)s::timestamptz, %(before_address)s::text)
ORDER BY created_at DESC, address DESC LIMIT %(limit)s;

-- console_session_add --
-- A signed-in session: the token's hash, the user and the role they signed in with.
INSERT INTO console_session (token_hash, user_name, role, expires_at)
VALUES (%(token_hash)s, %(user_name)s, %(role)s, %(expires_at)s)
RETURNING id;

-- console_session_find --
-- The live session a token's hash names (one unique-index lookup). Its seen_at
-- moves at most once a minute, so requests do not each write a row version.
WITH live AS (
    SELECT id, user_name, role FROM console_session
    WHERE token_hash = %(token_hash)s AND revoked_at IS NULL AND expires_at > now()
), seen AS (
    UPDATE console_session s SET seen_at = now()
    FROM live WHERE s.id = live.id AND s.seen_at < now() - interval '1 minute'
)
SELECT id, user_name, role FROM live;

-- console_session_revoke --
-- End the live session a token's hash names (sign-out, a changed role).
UPDATE console_session SET revoked_at = now()
WHERE token_hash = %(token_hash)s AND revoked_at IS NULL
RETURNING id;

-- console_session_revoke_id --
-- End a live session by its id (an operator's revoke); its user back.
UPDATE console_session SET revoked_at = now()
WHERE id = %(id)s AND revoked_at IS NULL AND expires_at > now()
RETURNING user_name, role;

-- console_session_list --
-- The live sessions, newest first.
SELECT id, token_hash, user_name, role, created_at, seen_at, expires_at
FROM console_session
WHERE revoked_at IS NULL AND expires_at > now()
ORDER BY id DESC LIMIT %(limit)s;

-- console_session_purge --
-- Delete a batch of sessions past their expiry, revoked or not (the oldest first).
DELETE FROM console_session
WHERE id IN (
    SELECT id FROM console_session WHERE expires_at <= now() ORDER BY expires_at LIMIT %(limit)s
);
