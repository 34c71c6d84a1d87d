-- The W3C traceparent of the business event, fixed at enqueue, so that every
-- attempt, however late, joins (or links to) the event's trace.
ALTER TABLE email_outbox ADD COLUMN IF NOT EXISTS trace_context text;
