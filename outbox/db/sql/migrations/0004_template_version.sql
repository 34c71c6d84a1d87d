-- Every template version an email was enqueued with, so a retry renders what
-- the first attempt would have even after the template directory changed.
-- Rows are written once per version (content-addressed) and never changed.
CREATE TABLE IF NOT EXISTS email_template_version (
    hash          text PRIMARY KEY,  -- sha256 of the files and the compiler, 32 hex digits
    name          text NOT NULL,
    files         jsonb NOT NULL,    -- the source files as they were: {"subject.txt": "...", ...}
    compiled_html text,              -- the Jinja source of the HTML part (MJML output)
    compiled_text text NOT NULL,     -- the Jinja source of the text part (body.txt or derived)
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- Fixed at enqueue; NULL for rows enqueued before versions were recorded
-- (they render with the directory's current version).
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS template_version text;
