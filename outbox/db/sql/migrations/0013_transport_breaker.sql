-- The sending path's circuit breaker, one row per transport, shared by every
-- worker process (outbox.delivery.breaker): while it is open, rows wait in
-- `pending` without spending attempts and one probe at a time tests the path.
CREATE TABLE IF NOT EXISTS outbox_breaker (
    transport   text PRIMARY KEY,
    state       text NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open')),
    failures    integer NOT NULL DEFAULT 0,
    opened_at   timestamptz,
    retry_at    timestamptz,
    probe_by    text,
    probe_until timestamptz,
    last_error  text,
    changed_at  timestamptz NOT NULL DEFAULT now()
);
