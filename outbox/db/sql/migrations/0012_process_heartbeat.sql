-- Every relay and worker process says it is alive here, every sixth of
-- OUTBOX_STUCK_SECONDS. A row `sending` is swept back only when the process
-- holding it (its locked_by starts with the process's name) has been silent
-- that long: a slow send of a live worker is never taken for an abandoned one.
CREATE TABLE IF NOT EXISTS outbox_process (
    name       text PRIMARY KEY,                   -- host:pid (relays: relay:host:pid)
    kind       text NOT NULL,                      -- relay | worker
    detail     jsonb NOT NULL DEFAULT '{}',        -- queues, pool figures: for `outbox status`
    started_at timestamptz NOT NULL DEFAULT now(),
    beat_at    timestamptz NOT NULL DEFAULT now()
);
