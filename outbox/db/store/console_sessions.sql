-- console_audit_add --
-- One console action: who, what, when, why.
INSERT INTO console_audit (actor, role, action, target, reason, detail)
VALUES (%(actor)s, %(role)s, %(action)s, %(target)s, %(reason)s, %(detail)s)
RETURNING id;

-- console_audit_list --
-- Console actions, newest first, below a keyset cursor.
SELECT id, at, actor, role, action, target, reason, detail
FROM console_audit WHERE id < %(before)s ORDER BY id DESC LIMIT %(limit)s;

-- console_session_add --
-- A signed-in session: the token's hash, the user and the role they signed in with.
INSERT INTO console_session (token_hash, user_name, role, expires_at)
VALUES (%(token_hash)s, %(user_name)s, %(role)s, %(expires_at)s)
RETURNING id;

-- console_session_find --
-- The live session a token's hash names (one unique-index lookup). Its seen_at
-- moves at most once a minute, so requests do not each write a row version.
WITH live AS (
    SELECT id, user_name, role FROM console_session
    WHERE token_hash = %(token_hash)s AND revoked_at IS NULL AND expires_at > now()
), seen AS (
    UPDATE console_session s SET seen_at = now()
    FROM live WHERE s.id = live.id AND s.seen_at < now() - interval '1 minute'
)
SELECT id, user_name, role FROM live;

-- console_session_revoke --
-- End the live session a token's hash names (sign-out, a changed role).
UPDATE console_session SET revoked_at = now()
WHERE token_hash = %(token_hash)s AND revoked_at IS NULL
RETURNING id;

-- console_session_revoke_id --
-- End a live session by its id (an operator's revoke); its user back.
UPDATE console_session SET revoked_at = now()
WHERE id = %(id)s AND revoked_at IS NULL AND expires_at > now()
RETURNING user_name, role;

-- console_session_list --
-- The live sessions, newest first.
SELECT id, token_hash, user_name, role, created_at, seen_at, expires_at
FROM console_session
WHERE revoked_at IS NULL AND expires_at > now()
ORDER BY id DESC LIMIT %(limit)s;

-- console_session_purge --
-- Delete a batch of sessions past their expiry, revoked or not (the oldest first).
DELETE FROM console_session
WHERE id IN (
    SELECT id FROM console_session WHERE expires_at <= now() ORDER BY expires_at LIMIT %(limit)s
);
