-- metrics_seed_counts --
-- Rows per status and priority outside the in-flight window, read once when the
-- exporter starts (a full scan); status changes keep the figures current after.
SELECT status, priority, count(*) FROM email_outbox
WHERE status NOT IN ('queued', 'sending')
GROUP BY 1, 2;

-- metrics_seed_sent_minutes --
-- Rows sent in the last 24 hours per minute, read once when the exporter starts.
SELECT floor(extract(epoch FROM sent_at) / 60)::bigint AS minute, count(*)
FROM email_outbox WHERE sent_at > now() - interval '24 hours'
GROUP BY 1;

-- metrics_seed_last_publish --
-- When a relay last published, as seen in the rows: the newest claim among the
-- rows in flight and the row sent last (the events carry it from then on).
SELECT extract(epoch FROM greatest(
    (SELECT max(queued_at) FROM email_outbox WHERE status IN ('queued', 'sending')),
    (SELECT queued_at FROM email_outbox WHERE sent_at IS NOT NULL ORDER BY sent_at DESC LIMIT 1)
))::float8;

-- metrics_tops --
-- The highest id of each table the exporter follows, and the database clock.
SELECT (SELECT max(id) FROM email_outbox), (SELECT max(id) FROM email_event),
       (SELECT max(id) FROM email_attempt), extract(epoch FROM now())::float8;

-- metrics_visible --
-- How many ids of each new range are visible; fewer than the range holds means
-- some are missing (the common case has none, and counting is cheap).
SELECT (SELECT count(*) FROM email_outbox WHERE id BETWEEN %(rows_low)s AND %(rows_high)s),
       (SELECT count(*) FROM email_event WHERE id BETWEEN %(events_low)s AND %(events_high)s),
       (SELECT count(*) FROM email_attempt
        WHERE id BETWEEN %(attempts_low)s AND %(attempts_high)s);

-- metrics_missing_rows --
-- Ids in a range with no visible outbox row: uncommitted, or rolled back.
SELECT g FROM generate_series(%(low)s::bigint, %(high)s::bigint) AS g
EXCEPT ALL
SELECT id FROM email_outbox WHERE id BETWEEN %(low)s AND %(high)s;

-- metrics_missing_events --
-- Ids in a range with no visible event: uncommitted, or rolled back.
SELECT g FROM generate_series(%(low)s::bigint, %(high)s::bigint) AS g
EXCEPT ALL
SELECT id FROM email_event WHERE id BETWEEN %(low)s AND %(high)s;

-- metrics_missing_attempts --
-- Ids in a range with no visible attempt: uncommitted, or rolled back.
SELECT g FROM generate_series(%(low)s::bigint, %(high)s::bigint) AS g
EXCEPT ALL
SELECT id FROM email_attempt WHERE id BETWEEN %(low)s AND %(high)s;

-- metrics_found_rows --
-- Which of the outbox ids missing at an earlier scrape are visible now.
SELECT id FROM email_outbox WHERE id = ANY(%(ids)s);

-- metrics_found_events --
-- Which of the event ids missing at an earlier scrape are visible now.
SELECT id FROM email_event WHERE id = ANY(%(ids)s);

-- metrics_found_attempts --
-- Which of the attempt ids missing at an earlier scrape are visible now.
SELECT id FROM email_attempt WHERE id = ANY(%(ids)s);

-- metrics_new_rows --
-- Rows enqueued since the last scrape (a range of the primary key), by priority;
-- `suppressed` rows never change status, every other row starts `pending`.
SELECT priority, status = 'suppressed' AS suppressed, count(*)
FROM email_outbox
WHERE (id > %(after)s AND id <= %(upto)s) OR id = ANY(%(found)s)
GROUP BY 1, 2;

-- metrics_new_transitions --
-- Status changes since the last scrape by priority, with the latest change
-- time; for rows marked sent, also the enqueue-to-sent latency bucket (index
-- into the bounds), its sum, and the minute they were sent.
SELECT o.priority, e.from_status, e.to_status, count(*), extract(epoch FROM max(e.at))::float8,
       s.bucket, s.minute, sum(s.latency)::float8
FROM email_event e JOIN email_outbox o ON o.id = e.outbox_id
LEFT JOIN LATERAL (
    SELECT width_bucket(extract(epoch FROM o.sent_at - o.created_at)::float8,
                        %(bounds)s::float8[]) AS bucket,
           floor(extract(epoch FROM o.sent_at) / 60)::bigint AS minute,
           extract(epoch FROM o.sent_at - o.created_at) AS latency
    WHERE e.to_status = 'sent' AND o.sent_at IS NOT NULL
) s ON true
WHERE ((e.id > %(after)s AND e.id <= %(upto)s) OR e.id = ANY(%(found)s))
  AND e.from_status IS DISTINCT FROM e.to_status
  -- queued -> sending changes no figure: both are counted whole on every scrape
  AND NOT (e.from_status IN ('queued', 'sending') AND e.to_status IN ('queued', 'sending'))
GROUP BY 1, 2, 3, 6, 7;

-- metrics_new_attempts --
-- Attempts since the last scrape by priority, verdict, reply code, the first
-- words of a code-less reply (what broke) and duration bucket.
SELECT o.priority, a.verdict, a.reply_code,
       CASE WHEN a.reply_code IS NULL
            THEN lower(left(split_part(coalesce(a.reply_text, ''), ':', 1), 40)) END,
       width_bucket(a.duration_ms / 1000, %(bounds)s::float8[]),
       count(*), coalesce(sum(a.duration_ms) / 1000, 0)::float8
FROM email_attempt a JOIN email_outbox o ON o.id = a.outbox_id
WHERE (a.id > %(after)s AND a.id <= %(upto)s) OR a.id = ANY(%(found)s)
GROUP BY 1, 2, 3, 4, 5;

-- metrics_in_flight --
-- Rows queued or sending per priority (bounded by OUTBOX_MAX_IN_FLIGHT).
SELECT priority, status, count(*) FROM email_outbox
WHERE status IN ('queued', 'sending')
GROUP BY 1, 2;

-- metrics_heads --
-- Per priority: age of the oldest unsent row and of the oldest due pending row
-- (0 when none), each the first entry of a partial index; an unsent row may
-- also be in flight (the in-flight index, at most OUTBOX_MAX_IN_FLIGHT rows).
SELECT p.priority,
       greatest(coalesce(extract(epoch FROM now() - least(
           (SELECT greatest(created_at, requeued_at, send_at) FROM email_outbox
            WHERE status = 'pending' AND priority = p.priority
            ORDER BY greatest(created_at, requeued_at, send_at) LIMIT 1),
           (SELECT min(greatest(created_at, requeued_at, send_at)) FROM email_outbox
            WHERE status IN ('queued', 'sending') AND priority = p.priority))), 0), 0)::float8,
       greatest(coalesce(extract(epoch FROM now() - (
           SELECT min(next_attempt_at) FROM email_outbox
           WHERE status = 'pending' AND priority = p.priority)), 0), 0)::float8
FROM unnest(%(priorities)s::text[]) AS p(priority);

-- metrics_bounces_24h --
-- Rows whose bounce or complaint arrived in the last 24 hours, by class.
SELECT bounce_class, count(*) FROM email_outbox
WHERE bounced_at > now() - interval '24 hours'
GROUP BY 1;

-- metrics_bounce_reports_24h --
-- Bounce and complaint reports received in the last 24 hours, by where they
-- came from and what became of them: linked (how), forged, or not processed.
SELECT source,
       CASE WHEN forged THEN 'forged'
            WHEN processed_at IS NULL THEN 'unprocessed'
            ELSE coalesce(link, 'none') END AS outcome,
       count(*)
FROM email_bounce
WHERE received_at > now() - interval '24 hours'
GROUP BY 1, 2;

-- metrics_suppressed --
-- Addresses on the suppression list.
SELECT count(*) FROM email_suppression;

-- metrics_breakers --
-- Per transport, seconds its breaker has been open (0 when closed; never
-- below a millisecond while open, so that 0 always means up).
SELECT transport,
       CASE WHEN state = 'open'
            THEN greatest(extract(epoch FROM now() - opened_at)::float8, 0.001) ELSE 0 END
FROM outbox_breaker;
