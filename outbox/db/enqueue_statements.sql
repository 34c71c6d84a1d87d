-- insert_message --
-- Insert one email unless its key exists, or existed and was purged (its
-- tombstone answers then: the original id and Message-ID, status `purged`); a
-- suppressed recipient's email (by address, or by its hash once forgotten) is
-- written as a `suppressed` audit row that is never sent. Wakes the relays at
-- commit when there is something to send. No row back: the key exists
-- (find_by_key). The column list is intake's row (outbox.db.enqueue_statements
-- fills the markers); `key`, `recipient`, `priority` and `content_hash` are
-- among its values.
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
-- Whether the enqueue function of this release (outbox.db.enqueue_statements) is there:
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
-- with `locked_by` as its actor: here, who cancelled (unnamed: the connection's
-- application_name, else "application"), and the reason when one was given.
-- Returns the row's id, the status it had, and whether it was cancelled now.
WITH target AS (
    SELECT id, status FROM email_outbox WHERE idempotency_key = %(key)s FOR UPDATE
), cancelled AS (
    UPDATE email_outbox o
    SET status = 'cancelled',
        status_reason = 'cancelled' || coalesce(': ' || %(reason)s::text, ''),
        locked_by = coalesce(
            %(by)s::text, nullif(current_setting('application_name'), ''), 'application'
        ),
        locked_at = NULL
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

-- notify_due --
-- Wake the relays at commit.
SELECT pg_notify('outbox_due', %(priority)s);

-- store_template_version --
-- Keep one template version (content-addressed, never changed) before rows name it.
INSERT INTO email_template_version (hash, name, files, compiled_html, compiled_text)
VALUES (%(hash)s, %(name)s, %(files)s, %(compiled_html)s, %(compiled_text)s)
ON CONFLICT (hash) DO NOTHING
RETURNING hash;
