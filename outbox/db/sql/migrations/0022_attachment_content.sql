-- Attachments given by content at enqueue: each distinct file once, by the
-- SHA-256 of its bytes, and which rows use it. A row's `attachments` lists its
-- files ([{"sha256", "filename", "content_type", "size"}]; NULL: none).
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS attachments jsonb;

CREATE TABLE IF NOT EXISTS email_attachment_blob (
    sha256     text PRIMARY KEY,
    content    bytea NOT NULL,
    size       integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS email_attachment_use (
    outbox_id bigint NOT NULL,
    sha256    text NOT NULL,
    PRIMARY KEY (outbox_id, sha256)
);
CREATE INDEX IF NOT EXISTS email_attachment_use_blob ON email_attachment_use (sha256);

-- Retention follows the row: deleting rows deletes their uses, and the files
-- no other row uses. Statement-level, like the status trigger.
CREATE OR REPLACE FUNCTION email_outbox_release_attachments() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    released text[];
BEGIN
    WITH gone AS (
        DELETE FROM email_attachment_use u USING old_rows o
        WHERE u.outbox_id = o.id
        RETURNING u.sha256
    )
    SELECT array_agg(DISTINCT sha256) INTO released FROM gone;
    -- A statement of its own: it sees the uses just deleted as gone.
    DELETE FROM email_attachment_blob b
    WHERE b.sha256 = ANY(released)
      AND NOT EXISTS (SELECT FROM email_attachment_use u WHERE u.sha256 = b.sha256);
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS email_outbox_deleted ON email_outbox;
CREATE TRIGGER email_outbox_deleted AFTER DELETE ON email_outbox
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION email_outbox_release_attachments();
