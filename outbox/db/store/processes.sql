-- beat --
-- A relay or worker process is alive; what it reports goes with it.
INSERT INTO outbox_process (name, kind, detail) VALUES (%(name)s, %(kind)s, %(detail)s)
ON CONFLICT (name) DO UPDATE SET beat_at = now(), detail = excluded.detail;

-- forget_process --
-- A process that stops cleanly leaves; one silent for a day is forgotten.
DELETE FROM outbox_process
WHERE name = %(name)s OR beat_at < now() - interval '1 day';

-- sweep_guard --
-- How long Postgres has run, and the age of the freshest heartbeat of any
-- process (NULL: none registered): whether silent processes can be trusted gone.
SELECT extract(epoch FROM now() - pg_postmaster_start_time())::float8,
       (SELECT extract(epoch FROM now() - max(beat_at))::float8 FROM outbox_process);

-- list_processes --
-- Relays and workers by kind, with seconds since each one's last heartbeat.
SELECT name, kind, detail, started_at, extract(epoch FROM now() - beat_at)::float8
FROM outbox_process ORDER BY kind, name;
