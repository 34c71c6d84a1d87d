-- The From of each email, fixed at enqueue from the application's OUTBOX_FROM,
-- so a worker started with another setting still sends what the application
-- wrote. NULL on rows enqueued before: those take the worker's OUTBOX_FROM.
-- Adding a nullable column without a default rewrites nothing and locks only briefly.
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS sender text;
