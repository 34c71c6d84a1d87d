-- outbox:no-transaction
-- An operator's suppression carries the reason in their own words ("asked by
-- phone", "ticket 4411"). The codes written by bounces, complaints and
-- unsubscribes keep their meaning; any other one-line text is accepted too.
ALTER TABLE email_suppression DROP CONSTRAINT IF EXISTS email_suppression_reason_check,
    ADD CONSTRAINT email_suppression_reason_check
    CHECK (length(reason) BETWEEN 1 AND 200 AND reason !~ '[[:cntrl:]]') NOT VALID;
ALTER TABLE email_suppression VALIDATE CONSTRAINT email_suppression_reason_check;
