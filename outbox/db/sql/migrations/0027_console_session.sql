-- Console sessions held server side: the cookie carries a random token, this
-- table its SHA-256 (never the token), so signing out, or an operator's
-- revoke, ends the session everywhere, and a copied cookie stops working with
-- it. The role is the one the user signed in with: a session whose user has
-- another role in OUTBOX_CONSOLE_USERS since is ended. Rows past their expiry
-- are deleted (a bounded batch at each sign-in). A new, small table:
-- nothing else waits on its creation.
CREATE TABLE IF NOT EXISTS console_session (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash  bytea NOT NULL UNIQUE,
    user_name   text NOT NULL,
    role        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);

-- The expired rows to delete, oldest first; and the live ones to list.
CREATE INDEX IF NOT EXISTS console_session_expires ON console_session (expires_at);
