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
- :mod:`~outbox.db.store.shared_breakers`: the transports' shared circuit breakers
- :mod:`~outbox.db.store.console_pages`: what the console's pages read
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

# Re-exports for callers not yet moved to their concern's module.
# (From here to the end of the file, __all__ included.)
from outbox.db.store.api_key_rows import create_api_key, find_api_key, list_api_keys, revoke_api_key
from outbox.db.store.bounce_reports import (
    RowTrace,
    StoredBounce,
    bounced_row_trace,
    find_row_by_provider_id,
    find_row_for_bounce,
    finish_bounce,
    load_bounce,
    mark_bounce_unprocessable,
    mark_bounced,
    recent_sends_to,
    store_bounce,
    store_report,
    unprocessed_bounces,
)
from outbox.db.store.connections import (
    Conn,
    Pool,
    commit,
    connect,
    connect_params,
    connection_lost,
    conninfo_problem,
    ping,
    rollback,
    transaction_failed,
    translate_errors,
)
from outbox.db.store.console_pages import (
    EmailFilter,
    console_created_at,
    console_email,
    console_emails,
    console_find,
    console_find_to,
    console_id_range,
    console_overview,
    console_suppressions,
    console_templates,
)
from outbox.db.store.console_sessions import (
    ConsoleSession,
    console_audit_add,
    console_audit_list,
    console_session_add,
    console_session_find,
    console_session_list,
    console_session_purge,
    console_session_revoke,
    console_session_revoke_id,
)
from outbox.db.store.counts import (
    oldest_unsent,
    paced_pending,
    status_counts,
    status_counts_by_prefix,
    status_counts_by_tag,
    unsent_counts,
)
from outbox.db.store.data_retention import (
    RETENTION_LOCK,
    Forgotten,
    Purged,
    forget,
    purge,
    purge_count,
    retention_lock,
    storage_bytes,
)
from outbox.db.store.listener import Listener
from outbox.db.store.lookups import (
    api_email,
    find_messages,
    find_messages_to,
    list_attempts,
    list_bounces,
    list_events,
    sent_by_prefix,
    unsubscribe_recipient,
)
from outbox.db.store.metrics_reads import (
    MetricsCurrent,
    connect_snapshot,
    metrics_current,
    metrics_found,
    metrics_missing,
    metrics_new,
    metrics_seed,
    metrics_tops,
    metrics_visible,
)
from outbox.db.store.migration_runner import (
    MigrationState,
    drop_schema,
    enqueue_function_present,
    migrate,
    migration_status,
)
from outbox.db.store.processes import ProcessBeat, beat, forget_process, list_processes, sweep_guard
from outbox.db.store.relaying import (
    Claimed,
    Swept,
    claim_due,
    count_in_flight,
    queued_ids,
    seconds_to_next_due,
    sweep,
)
from outbox.db.store.requeues import requeue, requeue_count, requeue_matching, requeue_row
from outbox.db.store.results import (
    ENTRY_FIELDS,
    AttemptRecord,
    Unattempted,
    finished_journals,
    record_entries,
    record_results,
    recover_journaled,
    result_entry,
    return_unattempted,
    storable_attempt,
)
from outbox.db.store.sending import (
    Deferral,
    OutboxRow,
    defer_paced,
    find_template_version,
    load_attachments,
    release_unattempted,
    take_for_sending,
)
from outbox.db.store.shared_breakers import BreakerRow, change_breaker, list_breakers, read_breaker
from outbox.db.store.suppressions import (
    Suppression,
    find_suppression,
    list_suppressions,
    suppress,
    unsuppress,
)
from outbox.db.store.texts import storable, storable_text

__all__ = [
    "ENTRY_FIELDS",
    "RETENTION_LOCK",
    "AttemptRecord",
    "BreakerRow",
    "Claimed",
    "Conn",
    "ConsoleSession",
    "Deferral",
    "EmailFilter",
    "Forgotten",
    "Listener",
    "MetricsCurrent",
    "MigrationState",
    "OutboxRow",
    "Pool",
    "ProcessBeat",
    "Purged",
    "RowTrace",
    "StoredBounce",
    "Suppression",
    "Swept",
    "Unattempted",
    "api_email",
    "beat",
    "bounced_row_trace",
    "change_breaker",
    "claim_due",
    "commit",
    "connect",
    "connect_params",
    "connect_snapshot",
    "connection_lost",
    "conninfo_problem",
    "console_audit_add",
    "console_audit_list",
    "console_created_at",
    "console_email",
    "console_emails",
    "console_find",
    "console_find_to",
    "console_id_range",
    "console_overview",
    "console_session_add",
    "console_session_find",
    "console_session_list",
    "console_session_purge",
    "console_session_revoke",
    "console_session_revoke_id",
    "console_suppressions",
    "console_templates",
    "count_in_flight",
    "create_api_key",
    "defer_paced",
    "drop_schema",
    "enqueue_function_present",
    "find_api_key",
    "find_messages",
    "find_messages_to",
    "find_row_by_provider_id",
    "find_row_for_bounce",
    "find_suppression",
    "find_template_version",
    "finish_bounce",
    "finished_journals",
    "forget",
    "forget_process",
    "list_api_keys",
    "list_attempts",
    "list_bounces",
    "list_breakers",
    "list_events",
    "list_processes",
    "list_suppressions",
    "load_attachments",
    "load_bounce",
    "mark_bounce_unprocessable",
    "mark_bounced",
    "metrics_current",
    "metrics_found",
    "metrics_missing",
    "metrics_new",
    "metrics_seed",
    "metrics_tops",
    "metrics_visible",
    "migrate",
    "migration_status",
    "oldest_unsent",
    "paced_pending",
    "ping",
    "purge",
    "purge_count",
    "queued_ids",
    "read_breaker",
    "recent_sends_to",
    "record_entries",
    "record_results",
    "recover_journaled",
    "release_unattempted",
    "requeue",
    "requeue_count",
    "requeue_matching",
    "requeue_row",
    "result_entry",
    "retention_lock",
    "return_unattempted",
    "revoke_api_key",
    "rollback",
    "seconds_to_next_due",
    "sent_by_prefix",
    "status_counts",
    "status_counts_by_prefix",
    "status_counts_by_tag",
    "storable",
    "storable_attempt",
    "storable_text",
    "storage_bytes",
    "store_bounce",
    "store_report",
    "suppress",
    "sweep",
    "sweep_guard",
    "take_for_sending",
    "transaction_failed",
    "translate_errors",
    "unprocessed_bounces",
    "unsent_counts",
    "unsubscribe_recipient",
    "unsuppress",
]
