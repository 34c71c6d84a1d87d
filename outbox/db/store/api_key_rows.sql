-- create_api_key --
-- A new API key; only the token's hash is stored. Owner NULL: the default owner.
INSERT INTO outbox_api_key (name, token_hash, prefix, scopes, owner, operator)
VALUES (%(name)s, %(token_hash)s, %(prefix)s, %(scopes)s, %(owner)s, %(operator)s)
RETURNING id, created_at;

-- list_api_keys --
-- Every API key, newest first, without anything that opens a door.
SELECT id, name, prefix, scopes, owner, operator, created_at, revoked_at
FROM outbox_api_key ORDER BY id DESC;

-- revoke_api_key --
-- Revoke the live key of a name; no row back: no live key of that name.
UPDATE outbox_api_key SET revoked_at = now()
WHERE name = %(name)s AND revoked_at IS NULL
RETURNING id;

-- find_api_key --
-- The live key a presented token's hash names.
SELECT id, name, scopes, owner, operator FROM outbox_api_key
WHERE token_hash = %(token_hash)s AND revoked_at IS NULL;
