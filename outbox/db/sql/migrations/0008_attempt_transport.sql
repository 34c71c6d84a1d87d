-- Which transport carried each attempt: with a failover transport configured,
-- an email's attempts may go through different providers.
ALTER TABLE email_attempt ADD COLUMN IF NOT EXISTS transport text;
