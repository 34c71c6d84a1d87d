-- suppress --
-- Stop mail to an address; a wider scope ('all') replaces a narrower one.
INSERT INTO email_suppression (address, scope, reason, detail, source_bounce_id)
VALUES (lower(%(address)s), %(scope)s, %(reason)s, %(detail)s, %(source_bounce_id)s)
ON CONFLICT (address) DO UPDATE
SET scope = 'all', reason = excluded.reason, detail = excluded.detail,
    source_bounce_id = excluded.source_bounce_id, created_at = now()
WHERE excluded.scope = 'all' AND email_suppression.scope <> 'all'
RETURNING address;

-- unsuppress --
-- Allow mail to an address again.
DELETE FROM email_suppression
WHERE address IN (lower(%(address)s), email_address_hash(%(address)s))
RETURNING address;

-- find_suppression --
-- Why an address is suppressed, if it is.
SELECT address, scope, reason, detail, source_bounce_id, created_at
FROM email_suppression
WHERE address IN (lower(%(address)s), email_address_hash(%(address)s))
ORDER BY scope = 'all' DESC LIMIT 1;

-- list_suppressions --
-- Suppressed addresses, newest first.
SELECT address, scope, reason, detail, source_bounce_id, created_at
FROM email_suppression ORDER BY created_at DESC LIMIT %(limit)s;
