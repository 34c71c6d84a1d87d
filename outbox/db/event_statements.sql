-- events_after --
-- The events after a cursor, in feed order (xid, id), each with what its body
-- shows of its email as JSON text (every driver reads text alike). Only events
-- of transactions older than the oldest one still running that may write here
-- are served (outbox_event_horizon): those are all committed (or rolled back,
-- and invisible), and any event committed later belongs to a transaction no
-- older than that one, so it sorts after every event served here and no
-- reader passes it by. Filtered to the emails
-- the asking owner reaches (outbox.web.owners).
SELECT e.id, e.xid::text, o.recipient, o.idempotency_key,
       jsonb_build_object(
           'type', e.type,
           'timestamp', to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           'id', o.id, 'message_id', o.message_id, 'provider_id', o.provider_message_id,
           'status', e.status, 'reason', e.reason, 'bounce_class', e.detail,
           'tags', coalesce(to_jsonb(o.tags), '[]'::jsonb),
           'metadata', coalesce(o.metadata, '{}'::jsonb))::text
FROM outbox_event e
JOIN email_outbox o ON o.id = e.outbox_id
WHERE (e.xid, e.id) > (%(xid)s::text::xid8, %(id)s::bigint)
  AND e.xid < outbox_event_horizon()
  AND (%(every_owner)s::boolean
       OR CASE WHEN %(owner_prefix)s::text = '' THEN strpos(o.idempotency_key, %(mark)s::text) = 0
               ELSE starts_with(o.idempotency_key, %(owner_prefix)s::text) END)
ORDER BY e.xid, e.id
LIMIT %(limit)s::int;
