-- outbox:no-transaction
-- The oldest-unsent index holds pending rows only. An update that changes a
-- row's status is never HOT, so it adds an entry to every index whose
-- predicate the new version meets: with queued and sending in the predicate,
-- the claim and the take each added one here for every email (about a tenth
-- of their index writes and WAL). Rows in flight are read through the
-- in-flight index instead, as many as OUTBOX_MAX_IN_FLIGHT allows.
-- Built CONCURRENTLY: enqueues and sends go on meanwhile; the old index goes
-- once the new one is there.
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_unsent_pending
    ON email_outbox (priority, greatest(created_at, requeued_at, send_at))
    WHERE status = 'pending';
DROP INDEX CONCURRENTLY IF EXISTS email_outbox_unsent_from;

-- An outcome's event (outbox_event) is written by the status history's
-- statement trigger, in the statement that writes the history: the row
-- trigger of migration 0029 cost a PL/pgSQL call and an INSERT of its own for
-- every email sent, more than the rest of recording its result. The same
-- changes make the same events, in the transaction of their change as before;
-- an email created suppressed keeps its insert trigger. One DO block, one
-- transaction: no change is recorded twice or missed while the triggers swap.
DO $migration$
BEGIN
    CREATE OR REPLACE FUNCTION email_outbox_record_update() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        WITH changed AS (
            SELECT n.id, o.status AS from_status, n.status, n.status_reason, n.locked_by
            FROM new_rows n JOIN old_rows o USING (id)
            WHERE n.status IS DISTINCT FROM o.status
        ), history AS (
            INSERT INTO email_event (outbox_id, from_status, to_status, reason, actor)
            SELECT id, from_status, status, status_reason, locked_by FROM changed
        )
        INSERT INTO outbox_event (outbox_id, type, status, reason)
        SELECT id, CASE status WHEN 'held' THEN 'email.uncertain' ELSE 'email.' || status END,
               status, status_reason
        FROM changed
        WHERE status IN ('sent', 'failed', 'dead', 'held', 'suppressed', 'cancelled')
        ORDER BY id;
        RETURN NULL;
    END $$;
    DROP TRIGGER IF EXISTS outbox_event_on_update ON email_outbox;
END
$migration$;
