-- The subject and bodies of an email enqueued without a template (its
-- `template` is '(inline)', a name no template can have), stored as given so
-- every attempt sends the same bytes. NULL for template emails.
-- Nullable columns without a default rewrite nothing and lock only briefly.
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS subject text;
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS body_text text;
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS body_html text;
