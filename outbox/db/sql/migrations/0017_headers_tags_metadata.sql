-- Per-email headers ([[name, value], ...]), tags and metadata, fixed at enqueue
-- (NULL: none). Tags and metadata never reach the message; they label it for
-- `outbox show`, `outbox status --tag`, spans and the providers' own tags.
-- Nullable columns without a default rewrite nothing and lock only briefly.
-- No index on tags: the migration runner cannot build one concurrently, and
-- `outbox status --tag` is an operator's occasional count.
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS headers jsonb;
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS tags text[];
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS metadata jsonb;
