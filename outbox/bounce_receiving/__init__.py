"""What comes back: the bounce server, provider webhooks, and what a bounce does to the outbox."""
