-- An operator's requeue restarts the age limit without rewriting created_at.
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS requeued_at timestamptz;
