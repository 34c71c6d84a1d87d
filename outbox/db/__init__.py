"""Postgres: migrations, the named queries, and :mod:`outbox.db.store`, the only module that talks
to it.
"""
