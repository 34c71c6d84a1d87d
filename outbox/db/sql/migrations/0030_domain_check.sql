-- The last check of each sending domain's authentication (`outbox domain
-- check`, and the relay's daily re-check): one row per domain and check,
-- replaced by each run, read by `outbox status`, the console and the metrics
-- exporter. Only public DNS facts are kept: record texts, key fingerprints.
-- A new, small table: nothing else waits on its creation.
CREATE TABLE IF NOT EXISTS domain_check (
    domain      text NOT NULL,
    check_name  text NOT NULL,
    state       text NOT NULL CHECK (state IN ('ok', 'warning', 'error')),
    found       text NOT NULL,
    fix         text NOT NULL,
    checked_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (domain, check_name)
);
