-- find_message --
-- The rows an operator's reference names: key, Message-ID (with or without its
-- brackets), row id or provider id; each has an index.
SELECT id, idempotency_key, recipient, template, params, message_id, priority, status,
       status_reason, attempts, next_attempt_at, locked_by, locked_at, last_error,
       provider_message_id, created_at, queued_at, sent_at, failed_at, requeued_at,
       trace_context, tags, metadata, cc, bcc, sender, reply_to, send_at, locale, headers,
       subject, template_version, bounce_class, bounced_at,
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

-- sent_by_prefix --
-- Delivered rows of one run with their timings, oldest first.
SELECT idempotency_key, priority, message_id, provider_message_id,
       extract(epoch FROM sent_at - created_at)::float8 AS latency
FROM email_outbox
WHERE idempotency_key LIKE %(prefix)s || '%%' AND status = 'sent'
ORDER BY sent_at;

-- unsubscribe_recipient --
-- The recipient of the row an unsubscribe token names.
SELECT recipient FROM email_outbox WHERE id = %(id)s;

-- find_messages_to --
-- The latest rows to one address (support's lookup): settled rows through the
-- index of the address's keyed hash, unsent rows through the pending and the
-- in-flight indexes.
SELECT id, idempotency_key, recipient, template, params, message_id, priority, status,
       status_reason, attempts, next_attempt_at, locked_by, locked_at, last_error,
       provider_message_id, created_at, queued_at, sent_at, failed_at, requeued_at,
       trace_context, tags, metadata, cc, bcc, sender, reply_to, send_at, locale, headers,
       subject, template_version, bounce_class, bounced_at,
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
     WHERE lower(recipient) = lower(%(address)s) AND status = 'pending'
     ORDER BY id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT id FROM email_outbox
     WHERE lower(recipient) = lower(%(address)s) AND status IN ('queued', 'sending')
     ORDER BY id DESC LIMIT %(limit)s)
)
ORDER BY id DESC LIMIT %(limit)s;

-- api_email --
-- One email for the HTTP API, by id or by (stored) idempotency key, if the
-- asking key's owner reaches it (outbox.web.owners): an operator every email;
-- another owner those stored under its name; the default owner those stored
-- under no name. An email it does not reach is not found.
SELECT id, idempotency_key, message_id, recipient, template, priority, status, status_reason,
       attempts, created_at, next_attempt_at, sent_at, failed_at
FROM email_outbox
WHERE (id = %(id)s OR idempotency_key = %(key)s)
  AND (%(every_owner)s::boolean
       OR CASE WHEN %(owner_prefix)s::text = '' THEN strpos(idempotency_key, %(mark)s) = 0
               ELSE starts_with(idempotency_key, %(owner_prefix)s) END);
