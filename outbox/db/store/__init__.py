"""Outbox's own reads and writes of Postgres, one module per concern.

Each module owns one concern's functions and, in the ``.sql`` file of its name
beside it, that concern's named queries (read by :func:`outbox.db.sql.load_queries`):

- :mod:`~outbox.db.store.connections`: connections, pools, and psycopg's errors
  made :class:`~outbox.errors.StoreError`
- :mod:`~outbox.db.store.listener`: LISTEN for the relays' wake-ups
- :mod:`~outbox.db.store.migration_runner`: ``outbox migrate`` and the enqueue function
- :mod:`~outbox.db.store.relaying`: the relay's claims, backpressure and sweeps
- :mod:`~outbox.db.store.sending`: a worker takes rows, reads what it sends, hands rows back
- :mod:`~outbox.db.store.results`: attempts recorded, rows handed back unattempted
- :mod:`~outbox.db.store.texts`: texts as Postgres can hold them (pure)
- :mod:`~outbox.db.store.suppressions`: the suppression list
- :mod:`~outbox.db.store.bounce_reports`: bounces and providers' reports, and the rows they name
- :mod:`~outbox.db.store.lookups`: an email found by reference or recipient, and its history
- :mod:`~outbox.db.store.counts`: rows per status, priority, tag; the oldest unsent
- :mod:`~outbox.db.store.requeues`: parked rows sent again
- :mod:`~outbox.db.store.api_key_rows`: the HTTP API's keys
- :mod:`~outbox.db.store.data_retention`: purge, forget, storage sizes
- :mod:`~outbox.db.store.metrics_reads`: the metrics exporter's snapshot reads
- :mod:`~outbox.db.store.processes`: relay and worker heartbeats
- :mod:`~outbox.db.store.breaker_rows`: the transports' shared circuit breakers
- :mod:`~outbox.db.store.console_reads`: what the console's pages read
- :mod:`~outbox.db.store.console_sessions`: console sessions and the audit trail

Callers import the module of the concern they use and call through it, so a
call names its concern: ``from outbox.db.store import relaying`` then
``relaying.claim_due(conn, ...)``, and ``connections.Conn`` for a type. The
modules of the package import each other's names directly.

Functions take a connection and never commit, except
:func:`~outbox.db.store.migration_runner.migrate` and the batched maintenance
functions (:func:`~outbox.db.store.requeues.requeue_matching`,
:func:`~outbox.db.store.data_retention.purge`), which commit after each bounded
batch so that no lock is held long; otherwise the caller owns the transaction.
"""
