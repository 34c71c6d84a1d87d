-- The keys of `outbox web`'s HTTP API (`outbox api-keys create NAME`). A key is
-- a random 32-byte token shown once; only its SHA-256 is kept, which is enough
-- for a token of that entropy (no one can search 2^256 values for a match) and
-- lets a request find its key by one indexed lookup.
CREATE TABLE IF NOT EXISTS outbox_api_key (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    token_hash  text NOT NULL UNIQUE,  -- hex SHA-256 of the token
    prefix      text NOT NULL,         -- the token's first characters, to recognise it
    scopes      text[] NOT NULL
                CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['send', 'read']::text[]),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
-- One live key per name; a revoked key's name may be given again.
CREATE UNIQUE INDEX IF NOT EXISTS outbox_api_key_live_name
    ON outbox_api_key (name) WHERE revoked_at IS NULL;
