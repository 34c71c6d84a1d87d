-- outbox:no-transaction
-- Bounces and complaints reported by an email API's webhook (Postmark, Resend)
-- are kept in email_bounce beside the ones that came by mail. A constant
-- default is stored once, not written into every row; the checks are added
-- NOT VALID and validated apart, so no scan runs under the strong lock.
ALTER TABLE email_bounce ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT 'mail';
ALTER TABLE email_bounce DROP CONSTRAINT IF EXISTS email_bounce_source_check,
    ADD CONSTRAINT email_bounce_source_check
    CHECK (source IN ('mail', 'postmark', 'resend')) NOT VALID;
ALTER TABLE email_bounce VALIDATE CONSTRAINT email_bounce_source_check;
-- A provider retries a webhook until it is answered; its event id makes the
-- retry a no-op.
ALTER TABLE email_bounce ADD COLUMN IF NOT EXISTS event_id text;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS email_bounce_event ON email_bounce (source, event_id)
    WHERE event_id IS NOT NULL;
-- A webhook names the message by the provider's id; rows sent over SMTP have
-- none and stay out of the index.
ALTER TABLE email_bounce DROP CONSTRAINT IF EXISTS email_bounce_link_check,
    ADD CONSTRAINT email_bounce_link_check
    CHECK (link IN ('verp', 'message_id', 'provider_id', 'none')) NOT VALID;
ALTER TABLE email_bounce VALIDATE CONSTRAINT email_bounce_link_check;
CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_provider_message_id ON email_outbox (provider_message_id)
    WHERE provider_message_id IS NOT NULL;
