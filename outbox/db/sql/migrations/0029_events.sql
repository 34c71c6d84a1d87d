-- What became of each email, as an application acts on it: one row per
-- outcome (sent, failed, dead, uncertain, suppressed, cancelled, bounced,
-- complained, unsubscribed), written in the transaction of the change that
-- causes it. Routine steps (pending, queued, sending) write nothing here.
--
-- Readers follow the table in (xid, id) order and only below the oldest
-- transaction still running that may write here (outbox_event_horizon): a bigserial id alone would
-- let a reader pass an id taken by a transaction that commits later. xid8 is
-- 64 bits: it never wraps.
CREATE TABLE IF NOT EXISTS outbox_event (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid       xid8 NOT NULL DEFAULT pg_current_xact_id(),
    outbox_id bigint NOT NULL,
    type      text NOT NULL,
    status    text NOT NULL,
    reason    text,
    detail    text,  -- email.bounced: hard or soft
    at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS outbox_event_order ON outbox_event (xid, id);
-- Purged with their emails.
CREATE INDEX IF NOT EXISTS outbox_event_outbox ON outbox_event (outbox_id);

-- How far readers may follow the events: below every transaction that may
-- still write one, the oldest of those still running when the statement's
-- snapshot was taken (or the snapshot's end when none runs). A transaction of
-- another database cannot write here: the ones a backend of another database
-- runs are left out, so a long transaction elsewhere on the server does not
-- hold the feed back (one whose database is not known, finished meanwhile or
-- not shown to this role, still counts). STABLE: once per statement.
CREATE OR REPLACE FUNCTION outbox_event_horizon() RETURNS xid8 LANGUAGE sql STABLE AS $$
    SELECT coalesce(min(x), pg_snapshot_xmax(pg_current_snapshot()))
    FROM pg_snapshot_xip(pg_current_snapshot()) AS x
    WHERE x::text::numeric % 4294967296 NOT IN (
        SELECT backend_xid::text::numeric FROM pg_stat_activity
        WHERE backend_xid IS NOT NULL AND datname IS DISTINCT FROM current_database())
$$;

-- Row triggers whose WHEN is false for a routine step: Postgres evaluates the
-- condition and queues nothing, so sending costs one function call per email
-- (its sent row), not one per status change.
CREATE OR REPLACE FUNCTION outbox_event_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_event (outbox_id, type, status, reason)
    VALUES (NEW.id,
            CASE NEW.status WHEN 'held' THEN 'email.uncertain' ELSE 'email.' || NEW.status END,
            NEW.status, NEW.status_reason);
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS outbox_event_on_update ON email_outbox;
CREATE TRIGGER outbox_event_on_update AFTER UPDATE OF status ON email_outbox
    FOR EACH ROW
    WHEN (NEW.status IS DISTINCT FROM OLD.status
          AND NEW.status IN ('sent', 'failed', 'dead', 'held', 'suppressed', 'cancelled'))
    EXECUTE FUNCTION outbox_event_record();

-- An email to a suppressed address is created suppressed.
DROP TRIGGER IF EXISTS outbox_event_on_insert ON email_outbox;
CREATE TRIGGER outbox_event_on_insert AFTER INSERT ON email_outbox
    FOR EACH ROW WHEN (NEW.status = 'suppressed')
    EXECUTE FUNCTION outbox_event_record();

-- Where events are posted (outbox webhooks). The signing secret is kept
-- sealed under a key derived from OUTBOX_SECRET: it must sign, so it cannot be
-- hashed. A rotated-out secret keeps signing until previous_until.
CREATE TABLE IF NOT EXISTS webhook_endpoint (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url             text NOT NULL,
    event_types     text[],  -- NULL: every type
    addresses       boolean NOT NULL DEFAULT false,  -- `to` in clear, not the keyed tag
    secret_sealed   text NOT NULL,
    previous_sealed text,
    previous_until  timestamptz,
    state           text NOT NULL DEFAULT 'enabled'
                    CHECK (state IN ('enabled', 'paused', 'disabled')),
    state_reason    text,
    -- The last event handed to this endpoint's deliveries, in feed order.
    cursor_xid      xid8 NOT NULL,
    cursor_id       bigint NOT NULL DEFAULT 0,
    delivered       bigint NOT NULL DEFAULT 0,
    failed          bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    changed_at      timestamptz NOT NULL DEFAULT now()
);

-- Events on their way to an endpoint, deleted once delivered (or refused for
-- good); a retry keeps the row, its attempts and the time it is due again.
CREATE TABLE IF NOT EXISTS webhook_delivery (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id     bigint NOT NULL,
    event_id        bigint NOT NULL,
    outbox_id       bigint NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    UNIQUE (endpoint_id, event_id)
);
-- An endpoint's deliveries in order, the due ones among them read by a filter:
-- nearly every open delivery is due (a retry waits only while its endpoint fails).
CREATE INDEX IF NOT EXISTS webhook_delivery_endpoint ON webhook_delivery (endpoint_id, id);
-- Order per email: a delivery waits while an earlier one of its email is open.
CREATE INDEX IF NOT EXISTS webhook_delivery_email ON webhook_delivery (endpoint_id, outbox_id, id);
-- Retention keeps an email while one of its events is on its way.
CREATE INDEX IF NOT EXISTS webhook_delivery_outbox ON webhook_delivery (outbox_id);
