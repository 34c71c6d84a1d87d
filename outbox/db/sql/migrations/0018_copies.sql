-- Cc and bcc recipients of one email (NULL: none), and each recipient's reply
-- in an attempt ([{"address", "kind", "code", "text"}, ...]; NULL: the one
-- recipient's reply is the attempt's own).
-- Nullable columns without a default rewrite nothing and lock only briefly.
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS cc text[];
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS bcc text[];
ALTER TABLE email_attempt ADD COLUMN IF NOT EXISTS recipients jsonb;
