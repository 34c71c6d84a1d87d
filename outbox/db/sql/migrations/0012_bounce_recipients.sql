-- A message to several bounce addresses is stored once: envelope_to is the
-- one it is processed for, envelope_recipients all that the server accepted.
ALTER TABLE email_bounce ADD COLUMN IF NOT EXISTS envelope_recipients text[];
