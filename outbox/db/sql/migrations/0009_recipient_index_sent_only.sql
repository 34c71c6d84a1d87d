-- outbox:no-transaction
-- The rows per recipient that anything reads are sent rows (the soft-bounce
-- streak). Indexing only those spares every other status change an entry in
-- this index: an update that changes status adds an entry to every index the
-- new row version falls in, and this one, over the whole history, was the
-- coldest such write of the relay's claim. The new index is built before the
-- old one goes, both CONCURRENTLY, so no read is left without one.
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_recipient_sent ON email_outbox (lower(recipient), id)
    WHERE status = 'sent';
DROP INDEX CONCURRENTLY IF EXISTS email_outbox_recipient;
