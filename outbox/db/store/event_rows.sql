-- record_event --
-- An event for the application about one email, with the email's status now
-- (an unsubscribe by link: the row itself does not change).
INSERT INTO outbox_event (outbox_id, type, status, reason)
SELECT id, %(type)s, status, %(reason)s FROM email_outbox WHERE id = %(id)s;
