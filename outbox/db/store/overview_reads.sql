-- overview_live_counts --
-- Rows per status and priority of the live outbox, exact, each part from an
-- index of its own: pending (scheduled apart: send_at still ahead) from
-- email_outbox_due, queued and sending from email_outbox_in_flight, the parked
-- statuses from email_outbox_parked_id.
SELECT CASE WHEN send_at > now() THEN 'scheduled' ELSE 'pending' END, priority, count(*)
FROM email_outbox WHERE status = 'pending' GROUP BY 1, 2
UNION ALL
SELECT status, priority, count(*) FROM email_outbox
WHERE status IN ('queued', 'sending') GROUP BY 1, 2
UNION ALL
SELECT status, priority, count(*) FROM email_outbox
WHERE status IN ('dead', 'held', 'failed', 'suppressed') GROUP BY 1, 2
ORDER BY 1, 2;

-- overview_table_size --
-- The planner's row count of email_outbox (-1: never analysed), kept by autovacuum.
SELECT reltuples::bigint FROM pg_class WHERE oid = 'email_outbox'::regclass;

-- overview_settled_counts --
-- The settled history (sent, cancelled) counted exactly: run only while the
-- table is small enough to read whole quickly.
SELECT status, priority, count(*) FROM email_outbox
WHERE status IN ('sent', 'cancelled') GROUP BY 1, 2 ORDER BY 1, 2;

-- overview_status_shares --
-- The planner's share of each common status (pg_stats, kept by ANALYZE): with
-- the table's row count, the estimate of a history too large to count.
SELECT u.status, u.share::float8
FROM pg_stats s
CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs)
    AS u(status, share)
WHERE (quote_ident(s.schemaname) || '.' || quote_ident(s.tablename))::regclass
      = 'email_outbox'::regclass
  AND s.attname = 'status';

-- overview_feedback_24h --
-- Hard bounces, soft bounces and complaints of the last 24 hours, one per
-- address: a report linked to a row (email_outbox_bounced_at) or a
-- suppression it made without one, such as a 550 5.1.1 refused at RCPT TO
-- (email_suppression_created).
SELECT kind, count(DISTINCT address) FROM (
    SELECT bounce_class AS kind, lower(recipient) AS address FROM email_outbox
    WHERE bounced_at > now() - interval '24 hours'
    UNION ALL
    SELECT CASE reason WHEN 'hard_bounce' THEN 'hard' ELSE reason END, address
    FROM email_suppression
    WHERE created_at > now() - interval '24 hours' AND reason IN ('hard_bounce', 'complaint')
) AS feedback
GROUP BY 1;

-- overview_sent_24h --
-- Rows sent in the last 24 hours (the sent_at index): what the rates divide by.
SELECT count(*) FROM email_outbox WHERE sent_at > now() - interval '24 hours';

-- overview_hourly --
-- Sent, failed and bounced per hour of the last 24, per template and set of
-- tags: sent from the sent_at index, failed from the parked index, bounced
-- from the bounced_at index.
WITH happened AS (
    SELECT 'sent' AS kind, sent_at AS at, template, tags FROM email_outbox
    WHERE sent_at > now() - interval '24 hours'
    UNION ALL
    SELECT 'failed', failed_at, template, tags FROM email_outbox
    WHERE status IN ('failed', 'dead') AND failed_at > now() - interval '24 hours'
    UNION ALL
    SELECT 'bounced', bounced_at, template, tags FROM email_outbox
    WHERE bounced_at > now() - interval '24 hours'
)
SELECT floor(extract(epoch FROM at) / 3600)::bigint AS hour, kind, template,
       coalesce(tags, '{}'), count(*)
FROM happened
GROUP BY 1, 2, 3, 4;
