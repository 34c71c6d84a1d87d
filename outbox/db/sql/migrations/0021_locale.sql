-- The template variant an email was enqueued with (a language folder such as
-- `de` or `de-AT` inside the template's folder; NULL: the default files).
-- A nullable column without a default rewrites nothing and locks only briefly.
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS locale text;
