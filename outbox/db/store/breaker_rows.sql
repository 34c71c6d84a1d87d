-- ensure_breaker --
-- The breaker row of a transport, created closed the first time.
INSERT INTO outbox_breaker (transport) VALUES (%(transport)s) ON CONFLICT DO NOTHING;

-- lock_breaker --
-- One transport's breaker, locked for a change (every change is made by one process).
SELECT transport, state, failures, opened_at, retry_at, probe_by, probe_until, last_error
FROM outbox_breaker WHERE transport = %(transport)s FOR UPDATE;

-- read_breaker --
-- One transport's breaker and the database clock, for a worker's cached copy.
SELECT transport, state, failures, opened_at, retry_at, probe_by, probe_until, last_error, now()
FROM outbox_breaker WHERE transport = %(transport)s;

-- save_breaker --
-- Write a breaker state computed by outbox.delivery.breaker.
UPDATE outbox_breaker
SET state = %(state)s, failures = %(failures)s, opened_at = %(opened_at)s, retry_at = %(retry_at)s,
    probe_by = %(probe_by)s, probe_until = %(probe_until)s, last_error = %(last_error)s,
    changed_at = now()
WHERE transport = %(transport)s;

-- list_breakers --
-- Every transport's breaker, for `outbox status` and the exporter.
SELECT transport, state, failures, opened_at, retry_at, probe_by, probe_until, last_error,
       extract(epoch FROM now() - changed_at)::float8
FROM outbox_breaker ORDER BY transport;

-- last_sends --
-- Each transport's last attempt and last send among the latest 1,000 attempts
-- (the primary key read backwards), in seconds ago: what a closed breaker
-- keeps no row for.
SELECT transport,
       extract(epoch FROM now() - max(attempted_at))::float8,
       extract(epoch FROM now() - max(attempted_at) FILTER (WHERE verdict = 'sent'))::float8,
       (array_agg(verdict ORDER BY id DESC))[1]
FROM (SELECT id, transport, verdict, attempted_at FROM email_attempt ORDER BY id DESC LIMIT 1000)
    AS recent
WHERE transport IS NOT NULL
GROUP BY transport ORDER BY transport;
