-- purge_batch --
-- Delete the next batch (by id, after the last one) of finished emails whose
-- last change is older than `before`, with their attempts, events and bounce
-- reports; each key leaves a tombstone so it stays taken. Rows a worker or
-- another purge holds are skipped, and so are emails with an event still on
-- its way to a webhook endpoint that is not disabled (a delivery waiting, or
-- an event not yet handed to the endpoint): they go once it is delivered.
WITH doomed AS (
    SELECT id FROM email_outbox o
    WHERE id > %(after)s
      AND status IN ('sent', 'failed', 'dead', 'suppressed', 'cancelled')
      AND greatest(created_at, requeued_at, sent_at, failed_at, bounced_at) < %(before)s
      AND NOT EXISTS (SELECT FROM webhook_delivery d WHERE d.outbox_id = o.id)
      AND NOT EXISTS (SELECT FROM outbox_event e
                      JOIN webhook_endpoint w ON w.state <> 'disabled'
                       AND (e.xid, e.id) > (w.cursor_xid, w.cursor_id)
                      WHERE e.outbox_id = o.id)
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
), told AS (
    DELETE FROM outbox_event e USING gone g WHERE e.outbox_id = g.id
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
    -- Settled rows through the index of the address's keyed hash, unsent rows
    -- through the pending and the in-flight indexes (one status list or
    -- another: a row sent meanwhile is locked as it now is, and still matches).
    SELECT id, status, idempotency_key, message_id, content_hash, created_at FROM email_outbox
    WHERE (email_recipient_hash(recipient) = email_recipient_hash(%(address)s)
           AND status IN ('sent', 'failed', 'dead', 'held', 'suppressed', 'cancelled'))
       OR (lower(recipient) = lower(%(address)s) AND status = 'pending')
       OR (lower(recipient) = lower(%(address)s) AND status IN ('queued', 'sending'))
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
-- Erase the address from the attempts, events (the history's and the
-- application's) and bounce reports of rows
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
), told AS (
    UPDATE outbox_event
    SET reason = regexp_replace(reason, %(pattern)s, '[erased]', 'gi')
    WHERE outbox_id = ANY(%(ids)s) AND reason ~* %(pattern)s
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
