"""Postgres: the store (:mod:`outbox.db.store`, a module per concern) on Outbox's own
connections, the executors on an application's; the named queries and migrations
(:mod:`outbox.db.sql`). Nothing else talks to Postgres.
"""
