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
       created_at, sent_at, tags, cc
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
       created_at, sent_at, tags, cc
FROM email_outbox
WHERE id = %(id)s OR idempotency_key = %(ref)s OR message_id = %(ref)s
   OR message_id = %(bracketed)s OR provider_message_id = %(ref)s
ORDER BY id DESC LIMIT %(limit)s;

-- console_find_to --
-- Emails to one address, newest first, below a keyset cursor: settled rows
-- (sent, parked, cancelled) through the index of the address's keyed hash,
-- unsent rows through the pending and the in-flight indexes (read whole: as
-- many as the unsent backlog; lower() is cheaper per row than the hash).
SELECT * FROM (
    (SELECT id, idempotency_key, recipient, template, priority, status, status_reason, attempts,
            created_at, sent_at, tags, cc
     FROM email_outbox
     WHERE email_recipient_hash(recipient) = email_recipient_hash(%(address)s)
       AND status IN ('sent', 'failed', 'dead', 'held', 'suppressed', 'cancelled')
       AND id < %(before)s
     ORDER BY id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT id, idempotency_key, recipient, template, priority, status, status_reason, attempts,
            created_at, sent_at, tags, cc
     FROM email_outbox
     WHERE lower(recipient) = lower(%(address)s) AND id < %(before)s AND status = 'pending'
     ORDER BY id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT id, idempotency_key, recipient, template, priority, status, status_reason, attempts,
            created_at, sent_at, tags, cc
     FROM email_outbox
     WHERE lower(recipient) = lower(%(address)s) AND id < %(before)s
       AND status IN ('queued', 'sending')
     ORDER BY id DESC LIMIT %(limit)s)
) AS found
ORDER BY id DESC LIMIT %(limit)s;

-- console_email --
-- One email whole, for its page: every field it was enqueued with, its content
-- when stored (no template), and where it is now.
SELECT id, idempotency_key, recipient, template, params, message_id, priority, status,
       status_reason, attempts, next_attempt_at, locked_by, locked_at, last_error,
       provider_message_id, created_at, queued_at, sent_at, failed_at, requeued_at,
       bounce_class, bounced_at, trace_context, template_version, sender,
       coalesce(reply_to, '{}') AS reply_to, coalesce(cc, '{}') AS cc,
       coalesce(bcc, '{}') AS bcc, subject, body_text, body_html,
       coalesce(headers, '[]') AS headers, coalesce(tags, '{}') AS tags,
       coalesce(metadata, '{}') AS metadata, send_at, locale,
       coalesce(attachments, '[]') AS attachments
FROM email_outbox WHERE id = %(id)s;

-- console_templates --
-- The template names in use (for the filter), from the newest rows.
SELECT DISTINCT template FROM (
    SELECT template FROM email_outbox ORDER BY id DESC LIMIT 5000
) AS recent ORDER BY 1;

-- console_suppressions --
-- Suppressed addresses, newest first, below a (created_at, address) cursor.
SELECT address, scope, reason, detail, source_bounce_id, created_at
FROM email_suppression
WHERE (created_at, address) < (%(before_at)s::timestamptz, %(before_address)s::text)
ORDER BY created_at DESC, address DESC LIMIT %(limit)s;
