-- The Reply-To mailboxes of each email, fixed at enqueue (NULL: none). The From
-- a caller chose per message already goes into `sender` (0011).
-- A nullable column without a default rewrites nothing and locks only briefly.
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS reply_to text[];
