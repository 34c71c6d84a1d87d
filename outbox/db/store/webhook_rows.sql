-- create_endpoint --
-- A new endpoint; it receives the events committed from now on (the feed's
-- position below every transaction still running).
INSERT INTO webhook_endpoint (url, event_types, addresses, secret_sealed, cursor_xid)
VALUES (%(url)s, %(types)s, %(addresses)s, %(sealed)s, pg_snapshot_xmin(pg_current_snapshot()))
RETURNING id;

-- list_endpoints --
-- Every endpoint with its figures: open deliveries and the age of the event
-- of the oldest (the first by id, through the endpoint's index).
SELECT w.id, w.url, w.event_types, w.addresses, w.state, w.state_reason, w.delivered, w.failed,
       (SELECT count(*) FROM webhook_delivery d WHERE d.endpoint_id = w.id),
       (SELECT extract(epoch FROM now() - e.at) FROM webhook_delivery d
        JOIN outbox_event e ON e.id = d.event_id
        WHERE d.endpoint_id = w.id ORDER BY d.id LIMIT 1),
       w.created_at, w.previous_until > now()
FROM webhook_endpoint w
ORDER BY w.id;

-- set_state --
-- Pause, disable or enable an endpoint, with why. Disabled, its open
-- deliveries go (nothing keeps their emails any more); enabled, they are due
-- now with a fresh schedule.
WITH changed AS (
    UPDATE webhook_endpoint
    SET state = %(state)s, state_reason = %(reason)s, changed_at = now()
    WHERE id = %(id)s
    RETURNING id, state
), dropped AS (
    DELETE FROM webhook_delivery d USING changed c
    WHERE d.endpoint_id = c.id AND c.state = 'disabled'
), resumed AS (
    UPDATE webhook_delivery d SET attempts = 0, next_attempt_at = now()
    FROM changed c
    WHERE d.endpoint_id = c.id AND c.state = 'enabled'
)
SELECT id FROM changed;

-- rotate_secret --
-- A new signing secret; the one before keeps signing until `previous_until`.
UPDATE webhook_endpoint
SET previous_sealed = secret_sealed, secret_sealed = %(sealed)s,
    previous_until = now() + make_interval(secs => %(grace_seconds)s), changed_at = now()
WHERE id = %(id)s
RETURNING id;

-- live_endpoints --
-- The endpoints deliveries go to, with their sealed secrets (the previous one
-- while it still signs).
SELECT id, url, event_types, addresses, secret_sealed,
       CASE WHEN previous_until > now() THEN previous_sealed END
FROM webhook_endpoint WHERE state = 'enabled' ORDER BY id;

-- fan_out --
-- Hand the next events of the feed (as outbox.db.event_statements serves it)
-- to every endpoint not disabled, as deliveries in feed order, and move each
-- endpoint's cursor past them. A paused endpoint's events wait as deliveries.
WITH endpoints AS (
    SELECT id, event_types, cursor_xid, cursor_id FROM webhook_endpoint
    WHERE state <> 'disabled'
    FOR UPDATE SKIP LOCKED
), picked AS (
    SELECT w.id AS endpoint_id, w.event_types, e.id, e.xid, e.outbox_id, e.type
    FROM endpoints w
    CROSS JOIN LATERAL (
        SELECT id, xid, outbox_id, type FROM outbox_event
        WHERE (xid, id) > (w.cursor_xid, w.cursor_id)
          AND xid < outbox_event_horizon()
        ORDER BY xid, id
        LIMIT %(limit)s
    ) e
), handed AS (
    INSERT INTO webhook_delivery (endpoint_id, event_id, outbox_id)
    SELECT endpoint_id, id, outbox_id FROM picked
    WHERE event_types IS NULL OR type = ANY(event_types)
    ORDER BY endpoint_id, xid, id
    ON CONFLICT (endpoint_id, event_id) DO NOTHING
), last AS (
    SELECT DISTINCT ON (endpoint_id) endpoint_id, xid, id FROM picked
    ORDER BY endpoint_id, xid DESC, id DESC
)
UPDATE webhook_endpoint w SET cursor_xid = l.xid, cursor_id = l.id
FROM last l WHERE w.id = l.endpoint_id
RETURNING w.id;

-- due_deliveries --
-- An endpoint's deliveries due now, oldest first, each the first open one of
-- its email (order per email), leaving out those in flight; with the event's
-- body as the feed builds it.
SELECT d.id, d.attempts, e.id, e.xid::text, o.recipient, o.idempotency_key,
       jsonb_build_object(
           'type', e.type,
           'timestamp', to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           'id', o.id, 'message_id', o.message_id, 'provider_id', o.provider_message_id,
           'status', e.status, 'reason', e.reason, 'bounce_class', e.detail,
           'tags', coalesce(to_jsonb(o.tags), '[]'::jsonb),
           'metadata', coalesce(o.metadata, '{}'::jsonb))::text,
       d.outbox_id
FROM webhook_delivery d
JOIN outbox_event e ON e.id = d.event_id
JOIN email_outbox o ON o.id = d.outbox_id
WHERE d.endpoint_id = %(endpoint)s AND d.next_attempt_at <= now()
  AND NOT (d.id = ANY(%(busy)s::bigint[]))
  AND NOT EXISTS (SELECT FROM webhook_delivery p
                  WHERE p.endpoint_id = d.endpoint_id AND p.outbox_id = d.outbox_id
                    AND p.id < d.id)
ORDER BY d.id
LIMIT %(limit)s;

-- finish_deliveries --
-- Delivered or refused for good: the deliveries go, the endpoint's counts
-- (delivered, failed attempts) grow.
WITH gone AS (
    DELETE FROM webhook_delivery WHERE id = ANY(%(ids)s::bigint[])
    RETURNING endpoint_id, id
), outcome AS (
    SELECT g.endpoint_id, count(*) FILTER (WHERE g.id = ANY(%(delivered)s::bigint[])) AS ok,
           count(*) FILTER (WHERE NOT g.id = ANY(%(delivered)s::bigint[])) AS refused
    FROM gone g GROUP BY g.endpoint_id
)
UPDATE webhook_endpoint w SET delivered = w.delivered + o.ok, failed = w.failed + o.refused
FROM outcome o WHERE w.id = o.endpoint_id;

-- retry_deliveries --
-- Failed attempts that will be tried again, each after its delay; each
-- counts as failed on its endpoint.
WITH retried AS (
    UPDATE webhook_delivery d
    SET attempts = d.attempts + 1, last_error = r.error,
        next_attempt_at = now() + make_interval(secs => r.delay)
    FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(id bigint, delay float8, error text)
    WHERE d.id = r.id
    RETURNING d.endpoint_id
)
UPDATE webhook_endpoint w SET failed = w.failed + c.n
FROM (SELECT endpoint_id, count(*) AS n FROM retried GROUP BY endpoint_id) c
WHERE w.id = c.endpoint_id;

-- replay --
-- The events of an endpoint since a time, delivered again (those it was
-- handed already; the ones after its cursor come anyway).
WITH endpoint AS (
    SELECT id, event_types, cursor_xid, cursor_id FROM webhook_endpoint
    WHERE id = %(id)s AND state <> 'disabled'
), again AS (
    INSERT INTO webhook_delivery (endpoint_id, event_id, outbox_id)
    SELECT w.id, e.id, e.outbox_id
    FROM endpoint w
    JOIN outbox_event e ON (e.xid, e.id) <= (w.cursor_xid, w.cursor_id)
    WHERE e.at >= %(since)s AND (w.event_types IS NULL OR e.type = ANY(w.event_types))
    ORDER BY e.xid, e.id
    ON CONFLICT (endpoint_id, event_id) DO UPDATE SET attempts = 0, next_attempt_at = now()
    RETURNING 1
)
SELECT (SELECT count(*) FROM endpoint), (SELECT count(*) FROM again);

-- deliverer_lock --
-- One `outbox webhooks deliver` at a time per schema (a session lock); another
-- waits as a standby.
SELECT pg_try_advisory_lock(%(lock)s, hashtext(%(schema)s));

-- endpoint_figures --
-- What the metrics show per endpoint: delivered, failed tries, open
-- deliveries, the age of the oldest one's event (the lag) and whether it is
-- paused.
SELECT w.id, w.state, w.delivered, w.failed,
       (SELECT count(*) FROM webhook_delivery d WHERE d.endpoint_id = w.id),
       coalesce((SELECT extract(epoch FROM now() - e.at) FROM webhook_delivery d
                 JOIN outbox_event e ON e.id = d.event_id
                 WHERE d.endpoint_id = w.id ORDER BY d.id LIMIT 1), 0)
FROM webhook_endpoint w
WHERE w.state <> 'disabled'
ORDER BY w.id;
