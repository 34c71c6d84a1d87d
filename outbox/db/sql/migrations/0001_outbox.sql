-- The outbox, one row per business event, and its history.
-- Statuses are text with a CHECK, not an enum, so later versions can add one
-- inside a transaction.

CREATE TABLE email_outbox (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    idempotency_key     text NOT NULL UNIQUE CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    recipient           text NOT NULL,
    template            text NOT NULL,
    params              jsonb NOT NULL DEFAULT '{}',
    content_hash        text NOT NULL,
    message_id          text NOT NULL UNIQUE,
    priority            text NOT NULL CHECK (priority IN ('high', 'bulk')),
    status              text NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'queued', 'sending', 'sent', 'failed', 'dead', 'held')),
    status_reason       text,
    attempts            integer NOT NULL DEFAULT 0,
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    locked_by           text,
    locked_at           timestamptz,
    last_error          text,
    provider_message_id text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    queued_at           timestamptz,
    sent_at             timestamptz,
    failed_at           timestamptz
);

-- The relay's claim reads only due pending rows, whatever the history size.
CREATE INDEX email_outbox_due ON email_outbox (priority, next_attempt_at) WHERE status = 'pending';
-- Backpressure counts and the sweeper read only rows in flight.
CREATE INDEX email_outbox_in_flight ON email_outbox (priority, locked_at)
    WHERE status IN ('queued', 'sending');
CREATE INDEX email_outbox_parked ON email_outbox (status) WHERE status IN ('dead', 'held', 'failed');

-- History tables carry no foreign key: an FK check locks the outbox row
-- (FOR KEY SHARE) for every attempt and event written, which costs more than
-- the write itself on the hot path. Rows are only ever appended.
CREATE TABLE email_attempt (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outbox_id       bigint NOT NULL,
    attempt         integer NOT NULL,
    verdict         text NOT NULL CHECK (verdict IN ('sent', 'retry', 'failed', 'uncertain')),
    stage           text,
    reply_code      integer,
    enhanced_status text,
    reply_text      text,
    duration_ms     double precision,
    worker          text,
    attempted_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_attempt_outbox ON email_attempt (outbox_id, attempt);

-- Every status change with its reason, written by a statement-level trigger so
-- that no code path (nor an operator's manual UPDATE) can skip it. Creation is
-- the row's created_at; enqueue stays one cheap statement.
CREATE TABLE email_event (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outbox_id   bigint NOT NULL,
    from_status text,
    to_status   text NOT NULL,
    reason      text,
    actor       text,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_event_outbox ON email_event (outbox_id, id);

CREATE FUNCTION email_outbox_record_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_event (outbox_id, from_status, to_status, reason, actor)
    SELECT n.id, o.status, n.status, n.status_reason, n.locked_by
    FROM new_rows n JOIN old_rows o USING (id)
    WHERE n.status IS DISTINCT FROM o.status;
    RETURN NULL;
END $$;

CREATE TRIGGER email_outbox_updated AFTER UPDATE ON email_outbox
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION email_outbox_record_update();
