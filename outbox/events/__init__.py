"""What became of each email, told to the application: the event feed it
reads in its own transaction (:func:`outbox.read_events`), and the signed
webhooks ``outbox webhooks deliver`` posts (docs/events.md)."""
