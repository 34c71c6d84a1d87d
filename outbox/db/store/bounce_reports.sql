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
-- The outbox row a provider's webhook is about, by the id the provider gave it:
-- among the rows that provider sent (another transport's ids are not its own,
-- and a relay's queue ids repeat after a restart), the latest one sent before
-- the report arrived. The failover transport's attempts read "<name> (failover)".
SELECT o.id, o.recipient, coalesce(o.cc, '{}') || coalesce(o.bcc, '{}'), o.priority
FROM email_outbox o
WHERE o.provider_message_id = %(provider_message_id)s
  AND o.sent_at <= (SELECT received_at FROM email_bounce WHERE id = %(bounce_id)s)
  AND EXISTS (SELECT 1 FROM email_attempt a
              WHERE a.outbox_id = o.id AND a.verdict = 'sent'
                AND split_part(a.transport, ' ', 1) = %(provider)s)
ORDER BY o.sent_at DESC, o.id DESC
LIMIT 1;

-- bounced_row_trace --
-- What a bounce's span needs of its row: the business event's trace context.
SELECT idempotency_key, message_id, template, priority, provider_message_id, trace_context
FROM email_outbox WHERE id = %(id)s;

-- find_row_for_bounce --
-- The outbox row a bounce is about: by id (VERP) or by its Message-ID.
SELECT id, recipient, coalesce(cc, '{}') || coalesce(bcc, '{}'), priority FROM email_outbox
WHERE id = %(id)s OR message_id = %(message_id)s
LIMIT 1;

-- mark_bounced --
-- Record a bounce or complaint on its row, with an event for the history and
-- one for the application (email.bounced, email.complained, email.unsubscribed).
WITH marked AS (
    UPDATE email_outbox SET bounce_class = %(class)s, bounced_at = now()
    WHERE id = %(id)s
    RETURNING id, status
), told AS (
    INSERT INTO outbox_event (outbox_id, type, status, reason, detail)
    SELECT id, %(event)s, status, %(reason)s,
           CASE WHEN %(class)s IN ('hard', 'soft') THEN %(class)s END
    FROM marked
)
INSERT INTO email_event (outbox_id, from_status, to_status, reason, actor)
SELECT id, status, status, %(reason)s, 'bounce #' || %(bounce_id)s FROM marked;

-- recent_sends_to --
-- The latest rows sent to an address with their bounce verdicts (soft-bounce
-- streak), through the index of the address's keyed hash.
SELECT id, bounce_class FROM email_outbox
WHERE email_recipient_hash(recipient) = email_recipient_hash(%(address)s) AND status = 'sent'
ORDER BY id DESC LIMIT %(limit)s;

-- mark_bounce_unprocessable --
-- A report that processing failed on: processed (so nothing retries it for
-- ever and the reports after it go on), linked to nothing, with the reason.
UPDATE email_bounce
SET processed_at = now(), link = 'none', results = '[]'::jsonb, error = %(error)s
WHERE id = %(id)s AND processed_at IS NULL;

-- count_unprocessable_bounces --
-- Reports set aside because processing failed on them (kept, never retried).
SELECT count(*) FROM email_bounce WHERE error LIKE 'unprocessable:%%';
