"""The per-message fields of an email, checked before anything is written.

Each function takes plain values and returns the value as it is stored, or
raises an :class:`~outbox.errors.InvalidMessage`; none of them reads
settings, files or the database, so an HTTP API or a mail backend can run
the same checks on its own input.
"""
