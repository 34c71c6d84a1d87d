"""One function per named query, on Outbox's own psycopg connections; psycopg
errors become StoreError here (and, for enqueue on an application's
connection of any driver, in :mod:`outbox.db.executors`).

Functions take a connection and never commit, except :func:`migrate` and the
batched maintenance functions (:func:`requeue_matching`, :func:`purge`), which commit after
each bounded batch so that no lock is held long; otherwise the caller owns the
transaction.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

import orjson
import psycopg
import psycopg.conninfo
import psycopg.sql
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from outbox.db.enqueue_statements import enqueue_function
from outbox.db.row import COLUMNS
from outbox.db.sql import migrations, qualified, queries, schema
from outbox.db.sql.migration_files import Migration, concurrent_index_name, is_concurrent
from outbox.delivery.breaker import BreakerState
from outbox.errors import DuplicateKey, PoolExhausted, SchemaMissing, StoreError

Conn = psycopg.Connection[Any]
_log = logging.getLogger(__name__)

# Serialises concurrent `outbox migrate` runs; any constant works.
_MIGRATION_LOCK = 0x0B0C5


# What a statement meets on a database that was never migrated, or migrated
# by an older version: a table, column or function it names is not there.
_SCHEMA_MISSING = (
    psycopg.errors.UndefinedTable,
    psycopg.errors.UndefinedColumn,
    psycopg.errors.UndefinedFunction,
)


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    try:
        yield
    except _SCHEMA_MISSING as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SchemaMissing(
            f"the database has no Outbox tables or older ones ({first}): run `outbox migrate`"
        ) from exc
    except psycopg.Error as exc:
        raise StoreError(f"database error: {exc}") from exc


def connect(
    url: str, *, autocommit: bool = False, timeout: float = 10.0, prepare: bool = True
) -> Conn:
    """A connection of its own, for the processes that keep one (metrics, LISTEN, CLI,
    a worker's result writer); ``prepare=False`` behind PgBouncer's transaction mode."""
    with translate_errors():
        return psycopg.connect(
            url,
            autocommit=autocommit,
            connect_timeout=max(1, int(timeout)),
            prepare_threshold=5 if prepare else None,
        )


def connect_params(**params: str | None) -> Conn:
    """A connection from libpq keywords (dbname, user, host…), as a framework's settings give."""
    conninfo = psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if v is not None})
    with translate_errors():
        return psycopg.connect(conninfo)


def connection_lost(exc: BaseException, conn: Conn) -> bool:
    """Whether ``exc`` means the connection is gone (not the statement's own fault)."""
    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    return conn.closed or isinstance(cause, psycopg.OperationalError | psycopg.InterfaceError)


def transaction_failed(conn: Conn) -> bool:
    """The transaction hit an error: Postgres will commit none of it."""
    return conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR


def ping(conn: Conn) -> None:
    with translate_errors():
        conn.execute("SELECT 1")


def commit(conn: Conn) -> None:
    with translate_errors():
        conn.commit()


def rollback(conn: Conn) -> None:
    with translate_errors():
        conn.rollback()


class Pool:
    """A connection pool whose every failure is a :class:`StoreError`.

    psycopg_pool raises its own errors (a wait that timed out, a closed pool)
    and the connection's exit commits, which can fail too: callers see one
    error type, whichever step broke.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 30.0,
        prepare: bool = True,
    ) -> None:
        # PgBouncer before 1.21 in transaction mode cannot keep a prepared
        # statement: psycopg must not prepare (OUTBOX_PREPARED_STATEMENTS=off).
        self._pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            check=ConnectionPool.check_connection,
            name=name,
            open=True,
            kwargs={} if prepare else {"prepare_threshold": None},
        )

    @contextlib.contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Conn]:
        """A connection whose transaction commits when the block ends without error."""
        try:
            with translate_errors(), self._pool.connection(timeout) as conn:
                yield conn
        except StoreError as exc:
            if isinstance(exc.__cause__, PoolTimeout):
                raise PoolExhausted(str(exc)) from exc.__cause__
            raise

    def get_stats(self) -> dict[str, int]:
        """psycopg_pool's counters (pool_size, pool_available, requests_waiting, …)."""
        return dict(self._pool.get_stats())

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Listener:
    """LISTEN on a dedicated connection, re-opened when it breaks.

    A connection pooler in transaction mode (PgBouncer's common setting) takes
    LISTEN without complaint and then drops every notification: the server
    connection that listens is handed to other clients between transactions.
    So each new listening connection is probed with a NOTIFY sent from another
    connection; when the probe never arrives, the listener says so once and the
    caller polls (``wait`` just sleeps its timeout).
    """

    PROBE = "outbox-listen-probe"

    def __init__(self, conninfo: str, channel: str, *, probe_seconds: float = 2.0) -> None:
        self.conninfo = conninfo
        self.channel_name = channel
        self.channel = psycopg.sql.Identifier(channel)
        self.probe_seconds = probe_seconds
        self.conn: psycopg.Connection[tuple[object, ...]] | None = None
        self.working: bool | None = None  # None: not probed yet

    def wait(self, timeout: float, stop: threading.Event) -> None:
        if self.working is False:
            stop.wait(timeout)  # notifications cannot arrive here: poll
            return
        try:
            if self.conn is None or self.conn.closed:
                self.conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5)
                self.conn.execute(psycopg.sql.SQL("LISTEN {}").format(self.channel))
                if not self._probe(self.conn):
                    self.working = False
                    self.close()
                    _log.warning(
                        "LISTEN/NOTIFY does not work through this connection (a pooler in "
                        "transaction mode?): polling every %.1fs; set OUTBOX_LISTEN_DATABASE_URL "
                        "to a direct connection to Postgres for immediate wake-ups",
                        timeout,
                    )
                    stop.wait(timeout)
                    return
                self.working = True
            # Short slices so that a stop request is seen within a quarter second.
            deadline = time.monotonic() + timeout
            while not stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0 or list(self.conn.notifies(timeout=min(left, 0.25), stop_after=1)):
                    return
        except psycopg.Error as exc:
            # Said at debug level: the relay's round says once that Postgres is down.
            _log.debug("LISTEN connection lost (%s); polling", exc)
            self.close()
            stop.wait(timeout)

    def _probe(self, conn: psycopg.Connection[tuple[object, ...]]) -> bool:
        with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5) as other:
            other.execute("SELECT pg_notify(%s, %s)", (self.channel_name, self.PROBE))
        deadline = time.monotonic() + self.probe_seconds
        while (left := deadline - time.monotonic()) > 0:
            for note in conn.notifies(timeout=left, stop_after=1):
                if note.payload == self.PROBE:
                    return True
        return False

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@dataclass(frozen=True, slots=True)
class OutboxRow:
    id: int
    idempotency_key: str
    recipient: str
    template: str
    params: dict[str, Any]
    message_id: str
    priority: str
    attempts: int
    created_at: dt.datetime
    age_from: dt.datetime
    template_version: str | None = None  # None: enqueued before versions were recorded
    trace_context: str | None = None  # the business event's traceparent
    sender: str | None = None  # From, fixed at enqueue; None: enqueued before it was recorded
    reply_to: Sequence[str] = ()  # Reply-To mailboxes, fixed at enqueue
    subject: str | None = None  # inline content (template '(inline)'); None for templates
    body_text: str | None = None
    body_html: str | None = None
    headers: Sequence[Sequence[str]] = ()  # the caller's own headers, [name, value] pairs
    tags: Sequence[str] = ()
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    cc: Sequence[str] = ()  # more recipients, in the Cc header
    bcc: Sequence[str] = ()  # more recipients, in no header (RCPT TO only)
    locale: str | None = None  # the template's language folder; None: its default files
    # Files given by content: [{"sha256", "filename", "content_type", "size"}].
    attachments: Sequence[dict[str, Any]] = ()


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt and the row state it leads to (a row of record_results)."""

    id: int
    attempt: int
    status: str
    reason: str
    delay_seconds: float
    provider_message_id: str | None
    verdict: str
    stage: str | None
    reply_code: int | None
    enhanced_status: str | None
    reply_text: str | None
    duration_ms: float
    transport: str | None = None  # the transport that carried it (smtp, postmark...)
    suppress: bool = False  # refused at RCPT TO as non-existent: suppress the recipient
    # With cc or bcc, each recipient's reply: {"address", "kind", "code", "text"}.
    recipients: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class MigrationState:
    version: int
    name: str
    applied_at: dt.datetime | None  # None: pending


def migrate(
    conn: Conn,
    *,
    lock_timeout: float = 0.5,
    retries: int = 60,
    upto: int | None = None,
    on_wait: Callable[[str, int], None] | None = None,
) -> list[str]:
    """Apply the migrations not yet applied (up to ``upto``); the applied ones' labels.

    A statement that needs a lock waits at most ``lock_timeout`` seconds for it:
    a lock request queued behind a long transaction would otherwise hold up
    every enqueue queued behind it. On a timeout the statement (for a
    transactional migration, the whole file) is tried again after a pause,
    ``retries`` times, and ``on_wait(label, try)`` is told. Concurrent runs wait
    for each other (a session advisory lock).
    """
    applied: list[str] = []
    autocommit = conn.autocommit
    with translate_errors():
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.rollback()
        conn.autocommit = True  # each migration (or statement) owns its transaction
        try:
            wait = f"{max(1, int(lock_timeout * 1000))}ms"
            _set_lock_timeout(conn, wait)
            if schema():
                conn.execute(
                    psycopg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                        psycopg.sql.Identifier(schema())
                    )
                )
            _retry_locked(
                conn,
                "outbox_schema_migration",
                lambda: conn.execute(
                    qualified(
                        "CREATE TABLE IF NOT EXISTS outbox_schema_migration ("
                        " version integer PRIMARY KEY, name text NOT NULL,"
                        " applied_at timestamptz NOT NULL DEFAULT now())"
                    ).encode()
                ),
                retries,
                on_wait,
            )
            # One migration run at a time per schema (the schemas' outboxes are apart).
            conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_MIGRATION_LOCK, schema()))
            try:
                done = {
                    v
                    for (v,) in conn.execute(
                        qualified("SELECT version FROM outbox_schema_migration").encode()
                    )
                }
                for migration in migrations():
                    if migration.version in done or (upto is not None and migration.version > upto):
                        continue
                    _apply(conn, migration, wait, retries, on_wait)
                    applied.append(migration.label)
                if upto is None or upto >= migrations()[-1].version:
                    applied += _create_enqueue_function(conn, retries, on_wait)
            finally:
                conn.execute(
                    "SELECT pg_advisory_unlock(%s, hashtext(%s))", (_MIGRATION_LOCK, schema())
                )
                conn.execute("RESET lock_timeout")
        finally:
            if not conn.closed:
                conn.autocommit = autocommit
    return applied


def _apply(
    conn: Conn,
    migration: Migration,
    wait: str,
    retries: int,
    on_wait: Callable[[str, int], None] | None,
) -> None:
    record = (
        qualified("INSERT INTO outbox_schema_migration (version, name) VALUES (%s, %s)").encode(),
        (migration.version, migration.name),
    )
    if migration.transactional:

        def whole_file() -> None:
            with conn.transaction():
                conn.execute(migration.sql.encode("utf-8"))
                conn.execute(*record)

        _retry_locked(conn, migration.label, whole_file, retries, on_wait)
        return
    for statement in migration.statements():
        if is_concurrent(statement):
            _run_concurrently(conn, statement, wait)
        else:
            _retry_locked(
                conn,
                migration.label,
                functools.partial(conn.execute, statement.encode("utf-8")),
                retries,
                on_wait,
            )
    conn.execute(*record)


def _set_lock_timeout(conn: Conn, value: str) -> None:
    conn.execute("SELECT set_config('lock_timeout', %s, false)", (value,))


def _run_concurrently(conn: Conn, statement: str, wait: str) -> None:
    """A CONCURRENTLY build or drop, which lets reads and writes through while it runs.

    It waits for the transactions running when it starts, however long: a
    timeout there would throw a half-built index away for nothing.
    """
    index = concurrent_index_name(statement)
    if index is not None:
        _drop_invalid_index(conn, index)
    _set_lock_timeout(conn, "0")
    try:
        conn.execute(statement.encode("utf-8"))
    finally:
        _set_lock_timeout(conn, wait)


def _drop_invalid_index(conn: Conn, name: str) -> None:
    """Drop ``name`` when an interrupted concurrent build left it INVALID."""
    invalid = conn.execute(
        "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname = %s"
        " AND c.relnamespace = coalesce(nullif(%s, ''), current_schema())::regnamespace"
        " AND NOT i.indisvalid",
        (name, schema()),
    ).fetchone()
    if invalid:
        _log.warning("index %s was left invalid by an interrupted build: rebuilding it", name)
        conn.execute(qualified(f"DROP INDEX CONCURRENTLY IF EXISTS {name}").encode())


def enqueue_function_present(conn: Conn) -> bool:
    """Whether this release's enqueue function is there. ``migrate`` creates it
    after the migrations (its name is its definition's hash); functions of
    earlier releases stay, for a release still running to call its own."""
    function = enqueue_function(COLUMNS, schema())
    with translate_errors():
        row = conn.execute(function.exists.sql, function.exists.params).fetchone()
    return bool(row and row[0])


def _create_enqueue_function(
    conn: Conn, retries: int, on_wait: Callable[[str, int], None] | None
) -> list[str]:
    """This release's enqueue function, unless it is there: its name, as applied."""
    if enqueue_function_present(conn):
        return []
    function = enqueue_function(COLUMNS, schema())
    create = function.create.encode()
    _retry_locked(conn, "enqueue function", lambda: conn.execute(create), retries, on_wait)
    return [function.name.rsplit(".", 1)[-1]]


def _retry_locked(
    conn: Conn,
    label: str,
    step: Callable[[], object],
    retries: int,
    on_wait: Callable[[str, int], None] | None,
) -> None:
    for attempt in range(1, retries + 2):
        try:
            step()
            return
        except psycopg.errors.LockNotAvailable as exc:
            if attempt > retries:
                raise StoreError(
                    f"migration {label} could not take its lock in {attempt} tries: a long"
                    " transaction holds the table; run `outbox migrate` again when it ends"
                ) from exc
            if on_wait is not None:
                on_wait(label, attempt)
            _log.info("migration %s waits for a lock (try %d): traffic goes first", label, attempt)
            # Short pauses at first, then up to 5 s: traffic's own locks are brief.
            time.sleep(min(5.0, 0.1 * 2 ** min(attempt, 6)))


def migration_status(conn: Conn) -> list[MigrationState]:
    """Every migration, applied (with when) or pending, in order."""
    with translate_errors():
        exists = conn.execute(
            qualified("SELECT to_regclass('outbox_schema_migration') IS NOT NULL").encode()
        ).fetchone()
        applied: dict[int, dt.datetime] = {}
        if exists and exists[0]:
            applied = dict(
                conn.execute(
                    qualified("SELECT version, applied_at FROM outbox_schema_migration").encode()
                ).fetchall()
            )
    return [MigrationState(m.version, m.name, applied.get(m.version)) for m in migrations()]


def load_attachments(conn: Conn, hashes: Sequence[str]) -> dict[str, bytes]:
    with translate_errors():
        rows = conn.execute(queries["load_attachment_blobs"], {"hashes": list(hashes)}).fetchall()
    return {str(r[0]): bytes(r[1]) for r in rows}


def count_in_flight(conn: Conn, priority: str) -> int:
    with translate_errors():
        row = conn.execute(queries["count_in_flight"], {"priority": priority}).fetchone()
    return int(row[0]) if row else 0


def seconds_to_next_due(conn: Conn, priority: str) -> float | None:
    with translate_errors():
        row = conn.execute(queries["seconds_to_next_due"], {"priority": priority}).fetchone()
    return None if row is None or row[0] is None else float(row[0])


@dataclass(frozen=True, slots=True)
class Claimed:
    id: int
    trace_context: str | None


def claim_due(conn: Conn, *, priority: str, limit: int, relay: str) -> list[Claimed]:
    args = {"priority": priority, "limit": limit, "relay": relay}
    with translate_errors():
        return [Claimed(r[0], r[1]) for r in conn.execute(queries["claim_due"], args).fetchall()]


def take_for_sending(conn: Conn, ids: Sequence[int], worker: str) -> list[OutboxRow]:
    args = {"ids": list(ids), "worker": worker}
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(queries["lock_published"], args)
        # A new statement, a new snapshot: the relay's commit is visible now.
        rows = cur.execute(queries["take_for_sending"], args).fetchall()
    return [OutboxRow(*r) for r in rows]


def release_unattempted(conn: Conn, ids: Sequence[int], worker: str, reason: str) -> None:
    args = {"ids": list(ids), "worker": worker, "reason": reason}
    with translate_errors():
        conn.execute(queries["release_unattempted"], args)


@dataclass(frozen=True, slots=True)
class Deferral:
    id: int
    delay_seconds: float
    reason: str


def defer_paced(conn: Conn, deferrals: Sequence[Deferral], worker: str) -> None:
    args = {
        "ids": [d.id for d in deferrals],
        "delays": [d.delay_seconds for d in deferrals],
        "reasons": [d.reason for d in deferrals],
        "worker": worker,
    }
    with translate_errors():
        conn.execute(queries["defer_paced"], args)


@dataclass(frozen=True, slots=True)
class Swept:
    requeued: int  # queued rows whose broker message was lost
    uncertain: dict[str, int]  # sending rows of a silent worker process, by new status


def sweep(
    conn: Conn,
    *,
    stuck_seconds: float,
    max_attempts: int,
    hold: bool,
    lost: Collection[int] = (),
    sending: bool = True,
    limit: int = 10_000,
) -> Swept:
    """Return lost rows: the ``queued`` rows of ``lost`` (found by :func:`queued_ids`,
    then not held by the broker), and the ``sending`` rows of worker processes
    silent for ``stuck_seconds`` (unless ``sending`` is False: the caller cannot
    yet tell a silent process from one that could not reach the database)."""
    args = {
        "stuck_seconds": stuck_seconds,
        "max_attempts": max_attempts,
        "hold": hold,
        "limit": limit,
        "lost": sorted(lost),
    }
    queued: list[Any] = []
    stuck: list[Any] = []
    with translate_errors():
        if lost:
            queued = conn.execute(queries["sweep_queued"], args).fetchall()
        if sending:
            stuck = conn.execute(queries["sweep_sending"], args).fetchall()
    by_status: dict[str, int] = {}
    for _, status in stuck:
        by_status[status] = by_status.get(status, 0) + 1
    return Swept(len(queued), by_status)


def status_counts(conn: Conn) -> list[tuple[str, str, int]]:
    with translate_errors():
        return [(r[0], r[1], int(r[2])) for r in conn.execute(queries["status_counts"]).fetchall()]


def paced_pending(conn: Conn) -> dict[str, int]:
    """Pending rows waiting for their receiver's rate, per receiver."""
    with translate_errors():
        return {str(r[0]): int(r[1]) for r in conn.execute(queries["paced_pending"]).fetchall()}


def oldest_unsent(conn: Conn) -> dict[str, float]:
    with translate_errors():
        return {r[0]: float(r[1]) for r in conn.execute(queries["oldest_unsent"]).fetchall()}


def status_counts_by_tag(conn: Conn, tag: str) -> list[tuple[str, str, int]]:
    with translate_errors():
        rows = conn.execute(queries["status_counts_by_tag"], {"tag": tag}).fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


def find_messages(conn: Conn, ref: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows ``ref`` (:func:`outbox.cli_input.email_ref`) names, oldest first."""
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["find_message"], ref).fetchall()


def list_attempts(conn: Conn, outbox_id: int) -> list[dict[str, Any]]:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["list_attempts"], {"id": outbox_id}).fetchall()


def list_events(conn: Conn, outbox_id: int) -> list[dict[str, Any]]:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["list_events"], {"id": outbox_id}).fetchall()


def list_bounces(conn: Conn, outbox_id: int) -> list[dict[str, Any]]:
    """Reports about one row; their results without the recipient (who is the row's)."""
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(queries["list_bounces"], {"id": outbox_id}).fetchall()
    for row in rows:
        row["results"] = [
            {k: v for k, v in result.items() if k in ("class", "status", "reason")}
            for result in row["results"] or []
        ]
    return rows


def requeue(conn: Conn, ref: dict[str, Any]) -> list[str]:
    """Send the parked rows ``ref`` names again; the priorities woken, one per row."""
    with translate_errors():
        rows = conn.execute(queries["requeue_key"], ref).fetchall()
        for priority in sorted({r[1] for r in rows}):
            conn.execute(queries["notify_due"], {"priority": priority})
    return [r[1] for r in rows]


def requeue_row(conn: Conn, outbox_id: int) -> list[str]:
    """:func:`requeue` of exactly the row ``outbox_id`` (the console names rows by id)."""
    return requeue(conn, {"ref": None, "bracketed": None, "row_id": outbox_id})


def requeue_count(conn: Conn, selected: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(status, priority, count) of the parked rows a filter's ``params()`` selects."""
    with translate_errors():
        rows = conn.execute(queries["requeue_count"], selected).fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


def requeue_matching(
    conn: Conn,
    selected: dict[str, Any],
    *,
    batch: int = 1000,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Send every parked row a filter's ``params()`` selects again; rows per priority.

    Commits after each batch of ``batch`` rows, so no lock outlives a batch and
    an interrupted run keeps what it did; ``on_batch(done so far)`` follows
    each commit.
    """
    woken: dict[str, int] = {}
    with translate_errors():
        started = conn.execute("SELECT clock_timestamp()").fetchone()
        conn.commit()
        args = {**selected, "started": started[0] if started else None, "limit": batch}
        while True:
            rows = conn.execute(queries["requeue_batch"], args).fetchall()
            for priority in sorted({r[1] for r in rows}):
                conn.execute(queries["notify_due"], {"priority": priority})
                woken[priority] = woken.get(priority, 0) + sum(1 for r in rows if r[1] == priority)
            conn.commit()
            if on_batch is not None and rows:
                on_batch(sum(woken.values()))
            if len(rows) < batch:
                return woken


def status_counts_by_prefix(conn: Conn, prefix: str) -> list[tuple[str, str, int]]:
    with translate_errors():
        rows = conn.execute(queries["status_counts_by_prefix"], {"prefix": prefix}).fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


def sent_by_prefix(conn: Conn, prefix: str) -> list[dict[str, Any]]:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["sent_by_prefix"], {"prefix": prefix}).fetchall()


def unsubscribe_recipient(conn: Conn, outbox_id: int) -> str | None:
    with translate_errors():
        row = conn.execute(queries["unsubscribe_recipient"], {"id": outbox_id}).fetchone()
    return None if row is None else str(row[0])


def find_template_version(conn: Conn, version: str) -> tuple[Any, ...] | None:
    """(files, compiled_html, compiled_text, name) of a stored version, if any."""
    with translate_errors():
        row = conn.execute(queries["find_template_version"], {"hash": version}).fetchone()
    return None if row is None else tuple(row)


# The metrics exporter's reads. Each scrape is one read-only REPEATABLE READ
# snapshot (connect_snapshot); the exporter follows three id sequences.
_METRIC_STREAMS: dict[str, tuple[LiteralString, LiteralString, LiteralString]] = {
    # stream: (ids not visible yet, ids now visible, what is new)
    "rows": (
        queries["metrics_missing_rows"],
        queries["metrics_found_rows"],
        queries["metrics_new_rows"],
    ),
    "events": (
        queries["metrics_missing_events"],
        queries["metrics_found_events"],
        queries["metrics_new_transitions"],
    ),
    "attempts": (
        queries["metrics_missing_attempts"],
        queries["metrics_found_attempts"],
        queries["metrics_new_attempts"],
    ),
}


def connect_snapshot(url: str) -> Conn:
    conn = connect(url, timeout=5)
    with translate_errors():
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
    return conn


def metrics_tops(conn: Conn) -> tuple[int, int, int, float]:
    """Highest visible id of rows, events and attempts, and the database clock."""
    with translate_errors():
        row = conn.execute(queries["metrics_tops"]).fetchone()
    assert row is not None
    return int(row[0] or 0), int(row[1] or 0), int(row[2] or 0), float(row[3])


def metrics_missing(conn: Conn, stream: str, *, low: int, high: int) -> list[int]:
    with translate_errors():
        rows = conn.execute(_METRIC_STREAMS[stream][0], {"low": low, "high": high}).fetchall()
    return [int(r[0]) for r in rows]


def metrics_found(conn: Conn, stream: str, ids: list[int]) -> list[int]:
    with translate_errors():
        rows = conn.execute(_METRIC_STREAMS[stream][1], {"ids": ids}).fetchall()
    return [int(r[0]) for r in rows]


def metrics_new(conn: Conn, stream: str, args: dict[str, Any]) -> list[tuple[Any, ...]]:
    with translate_errors():
        return [tuple(r) for r in conn.execute(_METRIC_STREAMS[stream][2], args).fetchall()]


def metrics_visible(conn: Conn, bounds: dict[str, Any]) -> tuple[int, int, int]:
    with translate_errors():
        row = conn.execute(queries["metrics_visible"], bounds).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def metrics_seed(conn: Conn) -> tuple[list[Any], list[Any], Any]:
    """Counts per status and priority, sends per minute, the last publish."""
    with translate_errors():
        last = conn.execute(queries["metrics_seed_last_publish"]).fetchone()
        counts = conn.execute(queries["metrics_seed_counts"]).fetchall()
        minutes = conn.execute(queries["metrics_seed_sent_minutes"]).fetchall()
    return list(counts), list(minutes), last[0] if last else None


@dataclass(frozen=True, slots=True)
class MetricsCurrent:
    in_flight: list[tuple[Any, ...]]  # priority, status, count
    heads: list[tuple[Any, ...]]  # priority, oldest unsent age, oldest due age
    bounces: list[tuple[Any, ...]]  # class, count over 24 h
    reports: list[tuple[Any, ...]]  # source, outcome, count over 24 h
    suppressed: int
    breakers: list[tuple[Any, ...]]  # transport, seconds its shared breaker has been open


def metrics_current(conn: Conn, priorities: list[str]) -> MetricsCurrent:
    with translate_errors():
        in_flight = conn.execute(queries["metrics_in_flight"]).fetchall()
        heads = conn.execute(queries["metrics_heads"], {"priorities": priorities}).fetchall()
        bounces = conn.execute(queries["metrics_bounces_24h"]).fetchall()
        reports = conn.execute(queries["metrics_bounce_reports_24h"]).fetchall()
        suppressed = conn.execute(queries["metrics_suppressed"]).fetchone()
        breakers = conn.execute(queries["metrics_breakers"]).fetchall()
    return MetricsCurrent(
        [tuple(r) for r in in_flight],
        [tuple(r) for r in heads],
        [tuple(r) for r in bounces],
        [tuple(r) for r in reports],
        int(suppressed[0]) if suppressed else 0,
        [tuple(r) for r in breakers],
    )


@dataclass(frozen=True, slots=True)
class Suppression:
    address: str
    scope: str  # all | bulk
    reason: str
    detail: str | None
    source_bounce_id: int | None
    created_at: dt.datetime


def suppress(
    conn: Conn,
    address: str,
    *,
    reason: str,
    scope: str = "all",
    detail: str | None = None,
    source_bounce_id: int | None = None,
) -> bool:
    """Add (or widen) a suppression; False when the address was already covered."""
    args = {
        "address": address,
        "scope": scope,
        "reason": reason,
        "detail": detail,
        "source_bounce_id": source_bounce_id,
    }
    with translate_errors():
        return conn.execute(queries["suppress"], args).fetchone() is not None


def unsuppress(conn: Conn, address: str) -> bool:
    with translate_errors():
        return conn.execute(queries["unsuppress"], {"address": address}).fetchone() is not None


def find_suppression(conn: Conn, address: str) -> Suppression | None:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(queries["find_suppression"], {"address": address}).fetchone()
    return Suppression(*row) if row else None


def list_suppressions(conn: Conn, limit: int = 1000) -> list[Suppression]:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(queries["list_suppressions"], {"limit": limit}).fetchall()
    return [Suppression(*r) for r in rows]


def store_bounce(conn: Conn, raw: bytes, envelope_to: str | None) -> int:
    bounce_id = store_report(conn, raw, envelope_to=envelope_to)
    assert bounce_id is not None  # only a provider's event id can repeat
    return bounce_id


def store_report(
    conn: Conn,
    raw: bytes,
    *,
    envelope_to: str | None = None,
    source: str = "mail",
    event_id: str | None = None,
) -> int | None:
    """Keep a bounce or a provider's report; ``None`` if that event was stored before."""
    args = {
        "raw": raw,
        "envelope_to": storable_text(envelope_to),
        "source": source,
        "event_id": storable_text(event_id),
    }
    with translate_errors():
        row = conn.execute(queries["store_bounce"], args).fetchone()
    return int(row[0]) if row else None


@dataclass(frozen=True, slots=True)
class StoredBounce:
    id: int
    envelope_to: str | None
    raw: bytes
    processed_at: dt.datetime | None
    source: str = "mail"  # or the provider whose webhook reported it


def load_bounce(conn: Conn, bounce_id: int) -> StoredBounce | None:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(queries["load_bounce"], {"id": bounce_id}).fetchone()
    return StoredBounce(row[0], row[1], bytes(row[2]), row[3], row[4]) if row else None


def unprocessed_bounces(conn: Conn, limit: int = 1000) -> list[int]:
    with translate_errors():
        return [r[0] for r in conn.execute(queries["unprocessed_bounces"], {"limit": limit})]


def finish_bounce(
    conn: Conn,
    bounce_id: int,
    *,
    outbox_id: int | None,
    link: str,
    forged: bool,
    results: list[dict[str, Any]],
    error: str | None = None,
) -> None:
    args = {
        "id": bounce_id,
        "outbox_id": outbox_id,
        "link": link,
        "forged": forged,
        "results": orjson.dumps(storable(results)).decode(),
        "error": storable_text(error),
    }
    with translate_errors():
        conn.execute(queries["finish_bounce"], args)


def find_row_for_bounce(
    conn: Conn, *, outbox_id: int | None, message_id: str | None
) -> tuple[int, str, frozenset[str]] | None:
    """The row's id, recipient and (lower-cased) cc and bcc addresses."""
    with translate_errors():
        row = conn.execute(
            queries["find_row_for_bounce"], {"id": outbox_id, "message_id": message_id}
        ).fetchone()
    return (int(row[0]), str(row[1]), frozenset(a.lower() for a in row[2])) if row else None


@dataclass(frozen=True, slots=True)
class RowTrace:
    idempotency_key: str
    message_id: str
    template: str
    priority: str
    provider_message_id: str | None
    trace_context: str | None


def bounced_row_trace(conn: Conn, outbox_id: int) -> RowTrace | None:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(queries["bounced_row_trace"], {"id": outbox_id}).fetchone()
    return RowTrace(*row) if row else None


def find_row_by_provider_id(
    conn: Conn, provider_message_id: str
) -> tuple[int, str, frozenset[str]] | None:
    with translate_errors():
        row = conn.execute(
            queries["find_row_by_provider_id"], {"provider_message_id": provider_message_id}
        ).fetchone()
    return (int(row[0]), str(row[1]), frozenset(a.lower() for a in row[2])) if row else None


def mark_bounced(conn: Conn, outbox_id: int, *, klass: str, reason: str, bounce_id: int) -> None:
    args = {"id": outbox_id, "class": klass, "reason": reason, "bounce_id": bounce_id}
    with translate_errors():
        conn.execute(queries["mark_bounced"], args)


def recent_sends_to(conn: Conn, address: str, limit: int) -> list[str | None]:
    """Bounce verdicts of the latest rows sent to ``address``, newest first."""
    with translate_errors():
        rows = conn.execute(queries["recent_sends_to"], {"address": address, "limit": limit})
        return [r[1] for r in rows]


def beat(conn: Conn, name: str, kind: str, detail: dict[str, Any]) -> None:
    """A relay's or worker process's heartbeat (autocommit connections: one statement)."""
    args = {"name": name, "kind": kind, "detail": orjson.dumps(detail).decode()}
    with translate_errors():
        conn.execute(queries["beat"], args)


def forget_process(conn: Conn, name: str) -> None:
    with translate_errors():
        conn.execute(queries["forget_process"], {"name": name})


@dataclass(frozen=True, slots=True)
class ProcessBeat:
    name: str
    kind: str
    detail: dict[str, Any]
    started_at: dt.datetime
    silent_seconds: float


def sweep_guard(conn: Conn) -> tuple[float, float | None]:
    """(seconds Postgres has run, age of the freshest process heartbeat or None)."""
    with translate_errors():
        row = conn.execute(queries["sweep_guard"]).fetchone()
    assert row is not None
    return float(row[0]), None if row[1] is None else float(row[1])


def list_processes(conn: Conn) -> list[ProcessBeat]:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        return [ProcessBeat(*r) for r in cur.execute(queries["list_processes"]).fetchall()]


def queued_ids(conn: Conn, *, lost_after: float, limit: int = 10_000) -> list[int]:
    with translate_errors():
        rows = conn.execute(queries["queued_ids"], {"lost_after": lost_after, "limit": limit})
        return [int(r[0]) for r in rows]


def unsent_counts(conn: Conn) -> dict[str, int]:
    """Rows waiting to be sent (pending, queued or sending) per priority."""
    with translate_errors():
        return {str(r[0]): int(r[1]) for r in conn.execute(queries["unsent_counts"]).fetchall()}


def _breaker(row: Sequence[Any]) -> BreakerState:
    return BreakerState(*row[:8])


def read_breaker(conn: Conn, transport: str) -> tuple[BreakerState, dt.datetime]:
    """A transport's breaker (closed when never written) and the database's clock."""
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(queries["read_breaker"], {"transport": transport}).fetchone()
        if row is None:
            now = cur.execute("SELECT now()").fetchone()
            return BreakerState(transport), now[0] if now else dt.datetime.now(dt.UTC)
    return _breaker(row), row[8]


def change_breaker(
    conn: Conn, transport: str, change: Callable[[BreakerState, dt.datetime], BreakerState | None]
) -> tuple[BreakerState, BreakerState | None]:
    """Apply ``change`` to the locked state at the database's time, in one transaction;
    returns the state before and the one written (None: ``change`` declined)."""
    with translate_errors(), conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(queries["ensure_breaker"], {"transport": transport})
        row = cur.execute(queries["lock_breaker"], {"transport": transport}).fetchone()
        clock = cur.execute("SELECT now()").fetchone()
        if row is None or clock is None:
            raise StoreError(f"breaker of {transport!r} neither created nor found")
        before = _breaker(row)
        after = change(before, clock[0])
        if after is not None and after != before:
            fields = {name: getattr(after, name) for name in after.__slots__}
            cur.execute(queries["save_breaker"], fields)
    return before, after


@dataclass(frozen=True, slots=True)
class BreakerRow:
    state: BreakerState
    changed_seconds_ago: float


def list_breakers(conn: Conn) -> list[BreakerRow]:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(queries["list_breakers"]).fetchall()
    return [BreakerRow(_breaker(r), float(r[8])) for r in rows]


@dataclass(frozen=True, slots=True)
class Unattempted:
    """A row handed back without an attempt (its send never reached a verdict)."""

    id: int
    worker: str
    reason: str
    delay_seconds: float


def record_results(conn: Conn, results: Sequence[tuple[str, AttemptRecord]]) -> set[int]:
    """Store (worker, attempt) pairs and their rows' states; the ids still the worker's."""
    return record_entries(
        conn,
        [result_entry(worker, record) for worker, record in results],
        [record.id for _, record in results],
        refused=any(record.suppress for _, record in results),
    )


def record_entries(
    conn: Conn, entries: Sequence[bytes], ids: Sequence[int], *, refused: bool
) -> set[int]:
    """:func:`record_results` of results already encoded by :func:`result_entry`
    (the journal's entries, written as they were journaled); ``refused``: some
    of them call for a suppression."""
    payload = {"results": (b"[%b]" % b",".join(entries)).decode(), "ids": list(ids)}
    # The results and the suppressions they call for, together; most groups have none.
    together = conn.transaction() if refused else contextlib.nullcontext()
    with translate_errors(), together:
        found = conn.execute(queries["record_results"], payload).fetchall()
        if refused:
            conn.execute(queries["suppress_refused"], payload)
    return {r[0] for r in found}


def result_entry(worker: str, record: AttemptRecord) -> bytes:
    """One result as record_results reads it: a JSON array of the worker holding
    its row and the attempt's fields, in :data:`ENTRY_FIELDS` order, its texts
    made storable. The journal keeps results in this form, so each is encoded once.

    Made once per email on the sending thread, amid its other work, so it is
    made as cheaply as orjson can: an array of the values took a quarter of the
    time of an object of the same fields (0.3 against 1.2 µs, warm) and is
    half the bytes (157 against 349 for a plain reply)."""
    r = record
    if not (_plain(r.reason) and _plain(r.reply_text) and _plain(r.provider_message_id)):
        r = storable_attempt(r)  # a rare reply: NUL, non-ASCII or a lone surrogate
    return orjson.dumps(
        (
            worker,
            r.id,
            r.attempt,
            r.status,
            r.reason,
            r.delay_seconds,
            r.provider_message_id,
            r.verdict,
            r.stage,
            r.reply_code,
            r.enhanced_status,
            r.reply_text,
            r.duration_ms,
            r.transport,
            r.suppress,
            r.recipients,
        )
    )


# What each place of an entry holds (record_results reads them by position).
ENTRY_FIELDS = ("worker", *(f.name for f in dataclasses.fields(AttemptRecord)))


def _plain(value: str | None) -> bool:
    """A text every column holds as it is: :func:`storable_text` leaves it alone."""
    return value is None or (value.isascii() and "\x00" not in value)


def recover_journaled(
    conn: Conn, results: Sequence[tuple[str, AttemptRecord]], *, stuck_seconds: float
) -> int:
    """Record the journaled results whose rows a silent process still holds
    (:mod:`outbox.delivery.journal`); the number recorded. In the caller's
    transaction, before :func:`sweep` marks the remaining rows uncertain."""
    if not results:
        return 0
    pairs = orjson.dumps(
        [{"id": r.id, "worker": w, "attempt": r.attempt} for w, r in results]
    ).decode()
    with translate_errors():
        rows = conn.execute(
            queries["journaled_stuck"], {"rows": pairs, "stuck_seconds": stuck_seconds}
        ).fetchall()
    stuck = {int(r[0]) for r in rows}
    chosen = [(w, r) for w, r in results if r.id in stuck]
    return len(record_results(conn, chosen)) if chosen else 0


def finished_journals(
    conn: Conn,
    results: Sequence[tuple[str, AttemptRecord]],
    processes: Sequence[str],
    *,
    stuck_seconds: float,
) -> list[str]:
    """The silent journaling processes (``host:pid``) with nothing left to apply."""
    pairs = orjson.dumps([{"id": r.id, "worker": w} for w, r in results]).decode()
    args = {"rows": pairs, "processes": list(processes), "stuck_seconds": stuck_seconds}
    with translate_errors():
        rows = conn.execute(queries["journals_finished"], args).fetchall()
    return [str(r[0]) for r in rows]


def return_unattempted(
    conn: Conn, rows: Sequence[Unattempted], *, max_age_seconds: float
) -> dict[int, str]:
    """Hand rows back without an attempt; the status each one took (pending, or dead
    past the age limit), by id. A row no longer held by its worker is left out."""
    payload = orjson.dumps(list(rows)).decode()  # orjson writes dataclasses natively
    args = {"rows": payload, "ids": [r.id for r in rows], "max_age_seconds": max_age_seconds}
    with translate_errors():
        found = conn.execute(queries["return_unattempted"], args).fetchall()
    return {int(r[0]): str(r[1]) for r in found}


def storable_text(value: str | None) -> str | None:
    """``value`` as a text or jsonb column can hold it.

    Postgres refuses NUL in text and ``\\u0000`` in jsonb, and lone surrogates
    (what decoding invalid UTF-8 with ``surrogateescape`` leaves) are no UTF-8
    at all: each becomes U+FFFD, so a hostile reply or report is kept, readable,
    instead of failing the statement that records it.
    """
    if value is None or _plain(value):
        return value
    raw = value.encode("utf-8", "surrogatepass")  # a lone surrogate: three invalid bytes
    return raw.decode("utf-8", "replace").replace("\x00", "\ufffd")


def storable(value: Any) -> Any:
    """:func:`storable_text` applied to every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(str(k)): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def storable_attempt(record: AttemptRecord) -> AttemptRecord:
    """``record`` with its texts as Postgres can hold them (itself when they are)."""
    texts = (record.reason, record.reply_text, record.provider_message_id)
    reason, reply_text, provider_message_id = stored = tuple(storable_text(t) for t in texts)
    if stored == texts:
        return record  # nearly every reply: no copy of the record
    return dataclasses.replace(
        record,
        reason=reason or "",
        reply_text=reply_text,
        provider_message_id=provider_message_id,
    )


def mark_bounce_unprocessable(conn: Conn, bounce_id: int, reason: str) -> None:
    """Set a report aside that processing fails on: kept, with why, and skipped."""
    args = {"id": bounce_id, "error": storable_text(f"unprocessable: {reason}"[:2000])}
    with translate_errors():
        conn.execute(queries["mark_bounce_unprocessable"], args)


def find_messages_to(conn: Conn, address: str, limit: int = 20) -> list[dict[str, Any]]:
    """The latest ``limit`` emails to ``address``, newest first."""
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            queries["find_messages_to"], {"address": address, "limit": limit}
        ).fetchall()


def create_api_key(
    conn: Conn, *, name: str, token_hash: str, prefix: str, scopes: Sequence[str]
) -> tuple[int, dt.datetime]:
    args = {"name": name, "token_hash": token_hash, "prefix": prefix, "scopes": list(scopes)}
    try:
        row = conn.execute(queries["create_api_key"], args).fetchone()
    except psycopg.errors.UniqueViolation as exc:
        raise DuplicateKey(f"a live API key named {name!r} exists") from exc
    except psycopg.Error as exc:
        raise StoreError(f"database error: {exc}") from exc
    if row is None:
        raise StoreError("the API key was not stored")
    return int(row[0]), row[1]


def list_api_keys(conn: Conn) -> list[dict[str, Any]]:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["list_api_keys"]).fetchall()


def revoke_api_key(conn: Conn, name: str) -> bool:
    """Whether a live key of that name was there (and is revoked now)."""
    with translate_errors():
        return conn.execute(queries["revoke_api_key"], {"name": name}).fetchone() is not None


def find_api_key(conn: Conn, token_hash: str) -> tuple[int, str, list[str]] | None:
    """(id, name, scopes) of the live key whose token hashes to ``token_hash``."""
    with translate_errors():
        row = conn.execute(queries["find_api_key"], {"token_hash": token_hash}).fetchone()
    return None if row is None else (int(row[0]), str(row[1]), list(row[2]))


def api_email(
    conn: Conn, *, id_: int | None = None, key: str | None = None
) -> dict[str, Any] | None:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["api_email"], {"id": id_, "key": key}).fetchone()


@dataclass(frozen=True, slots=True)
class Purged:
    emails: int
    attempts: int
    events: int
    bounces: int


# Serialises the retention of every relay: one of them purges at a time.
RETENTION_LOCK = 0x0B0C6


def purge(
    conn: Conn,
    *,
    before: dt.datetime,
    batch: int = 5000,
    on_batch: Callable[[Purged], None] | None = None,
) -> Purged:
    """Delete finished emails whose last change is older than ``before``.

    Attempts, events and bounce reports go with them; every idempotency key
    stays taken (a tombstone). Each batch of ``batch`` rows is its own
    transaction, so no lock is held long and an interrupted purge keeps what
    it did; ``on_batch(total so far)`` follows each commit.
    """
    total = Purged(0, 0, 0, 0)
    after = 0
    with translate_errors():
        while True:
            row = conn.execute(
                queries["purge_batch"], {"after": after, "before": before, "limit": batch}
            ).fetchone()
            conn.commit()
            emails, last, attempts, events, bounces = row if row else (0, None, 0, 0, 0)
            total = Purged(
                total.emails + emails,
                total.attempts + attempts,
                total.events + events,
                total.bounces + bounces,
            )
            if emails and total.emails == emails:  # the first batch that wrote tombstones
                conn.execute(queries["analyze_tombstones"])
                conn.commit()
            if on_batch is not None and emails:
                on_batch(total)
            # A short batch was the last: nothing older is left (but rows held meanwhile).
            if last is None or emails < batch:
                return total
            after = int(last)


def purge_count(conn: Conn, *, before: dt.datetime) -> int:
    with translate_errors():
        row = conn.execute(queries["purge_count"], {"before": before}).fetchone()
    return int(row[0]) if row else 0


@contextlib.contextmanager
def retention_lock(conn: Conn) -> Iterator[bool]:
    """Whether this session took the retention lock (held for the block)."""
    with translate_errors():
        row = conn.execute(
            queries["retention_lock"], {"lock": RETENTION_LOCK, "schema": schema()}
        ).fetchone()
        conn.commit()
    taken = bool(row and row[0])
    try:
        yield taken
    finally:
        if taken and not conn.closed:
            with translate_errors():
                conn.rollback()
                conn.execute(
                    queries["retention_unlock"], {"lock": RETENTION_LOCK, "schema": schema()}
                )
                conn.commit()


@dataclass(frozen=True, slots=True)
class Forgotten:
    emails: int
    attempts: int
    events: int
    bounces: int
    suppression_kept: bool  # the address was suppressed: its keyed hash still is


def forget(conn: Conn, address: str, *, pattern: str) -> Forgotten:
    """Erase ``address`` from every table; ``pattern`` matches it in texts (a regex)."""
    args = {"address": address, "pattern": pattern}
    with translate_errors():
        ids = [r[0] for r in conn.execute(queries["forget_rows"], args).fetchall()]
        found = conn.execute(queries["forget_history"], {**args, "ids": ids}).fetchone()
        hashed = conn.execute(queries["forget_suppression"], args).fetchone() is not None
        plain = conn.execute(queries["forget_suppression_plain"], args).fetchone() is not None
    attempts, events, bounces = found if found else (0, 0, 0)
    return Forgotten(len(ids), attempts, events, bounces, hashed or plain)


def storage_bytes(conn: Conn) -> dict[str, int]:
    """The bytes each outbox table takes, indexes and TOAST included."""
    with translate_errors():
        return {str(r[0]): int(r[1]) for r in conn.execute(queries["storage_bytes"]).fetchall()}


def conninfo_problem(url: str) -> str | None:
    """libpq's complaint about ``url`` as a connection string; None when it reads it."""
    try:
        psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error as exc:
        return str(exc)
    return None


def drop_schema(conn: Conn, schema: str) -> None:
    """Drop ``schema`` and everything in it."""
    with translate_errors():
        conn.execute(
            psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                psycopg.sql.Identifier(schema)
            )
        )
        conn.commit()


# The console of `outbox web` (outbox.web.console): reads for its pages and its audit trail.


@dataclass(frozen=True, slots=True)
class EmailFilter:
    """Optional filters of the console's email list (None: any)."""

    status: str | None = None
    priority: str | None = None
    template: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    tag: str | None = None  # one of the email's tags (a scan, like the template filter)


_NO_CURSOR = 2**63 - 1  # above every id


def console_overview(conn: Conn) -> dict[str, Any]:
    """Counts (sent as the planner's estimate), oldest unsent, sends per minute, bounces."""
    with translate_errors():
        counts = [tuple(r) for r in conn.execute(queries["console_counts"]).fetchall()]
        estimate = conn.execute(queries["console_table_estimate"]).fetchone()
        minutes = conn.execute(queries["console_sent_per_minute"]).fetchall()
        bounces = conn.execute(queries["metrics_bounces_24h"]).fetchall()
    return {
        "counts": [(str(s), str(p), int(n)) for s, p, n in counts],
        "rows_estimate": int(estimate[0]) if estimate else 0,
        "sent_per_minute": {int(m): int(n) for m, n in minutes},
        "bounces_24h": {str(k): int(n) for k, n in bounces},
        "oldest_unsent": oldest_unsent(conn),
    }


def console_emails(
    conn: Conn,
    filters: EmailFilter,
    *,
    before: int | None,
    limit: int,
    from_id: int = 0,
) -> list[dict[str, Any]]:
    """Newest first, ids in ``[from_id, before)``, the filters applied."""
    args = {
        **dataclasses.asdict(filters),
        "before": before or _NO_CURSOR,
        "from_id": from_id,
        "limit": limit,
    }
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_emails"], args, prepare=False).fetchall()


def console_id_range(conn: Conn) -> tuple[int, int] | None:
    with translate_errors():
        row = conn.execute(queries["console_id_range"]).fetchone()
    return None if row is None or row[0] is None else (int(row[0]), int(row[1]))


def console_created_at(conn: Conn, outbox_id: int) -> dt.datetime | None:
    """When the first row from ``outbox_id`` on was enqueued (None: no row from there)."""
    with translate_errors():
        row = conn.execute(queries["console_created_at"], {"id": outbox_id}).fetchone()
    return None if row is None else row[0]


def console_find(conn: Conn, ref: str, *, limit: int = 50) -> list[dict[str, Any]]:
    """Emails whose id, key, Message-ID (bracketed or not) or provider id is ``ref``."""
    bare = ref.strip().removeprefix("<").removesuffix(">")
    args = {
        "ref": ref,
        "bracketed": f"<{bare}>",
        "id": int(ref) if ref.isdigit() and int(ref) < _NO_CURSOR else None,
        "limit": limit,
    }
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_find"], args, prepare=False).fetchall()


def console_find_to(
    conn: Conn, address: str, *, before: int | None, limit: int
) -> list[dict[str, Any]]:
    args = {"address": address.lower(), "before": before or _NO_CURSOR, "limit": limit}
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_find_to"], args).fetchall()


def console_email(conn: Conn, outbox_id: int) -> dict[str, Any] | None:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_email"], {"id": outbox_id}).fetchone()


def console_templates(conn: Conn) -> list[str]:
    with translate_errors():
        return [str(r[0]) for r in conn.execute(queries["console_templates"]).fetchall()]


def console_audit_add(
    conn: Conn,
    *,
    actor: str,
    role: str,
    action: str,
    target: str | None,
    reason: str,
    detail: dict[str, Any] | None = None,
) -> int:
    args = {
        "actor": actor,
        "role": role,
        "action": action,
        "target": target,
        "reason": storable_text(reason),
        "detail": Jsonb(storable(detail or {})),
    }
    with translate_errors():
        row = conn.execute(queries["console_audit_add"], args).fetchone()
    assert row is not None
    return int(row[0])


def console_audit_list(conn: Conn, *, before: int | None, limit: int = 100) -> list[dict[str, Any]]:
    args = {"before": before or _NO_CURSOR, "limit": limit}
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_audit_list"], args).fetchall()


def console_suppressions(
    conn: Conn, *, before: tuple[dt.datetime, str] | None, limit: int = 100
) -> list[Suppression]:
    far = dt.datetime.max.replace(tzinfo=dt.UTC)
    at, address = before or (far, "")
    args = {"before_at": at, "before_address": address, "limit": limit}
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(queries["console_suppressions"], args).fetchall()
    return [Suppression(*r) for r in rows]


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    id: int
    user_name: str
    role: str


def console_session_add(
    conn: Conn, *, token_hash: bytes, user_name: str, role: str, expires_at: dt.datetime
) -> int:
    args = {
        "token_hash": token_hash,
        "user_name": user_name,
        "role": role,
        "expires_at": expires_at,
    }
    with translate_errors():
        row = conn.execute(queries["console_session_add"], args).fetchone()
    assert row is not None
    return int(row[0])


def console_session_find(conn: Conn, token_hash: bytes) -> ConsoleSession | None:
    """The live session of a token's hash (seen now, written at most once a minute)."""
    with translate_errors():
        row = conn.execute(queries["console_session_find"], {"token_hash": token_hash}).fetchone()
    return None if row is None else ConsoleSession(int(row[0]), str(row[1]), str(row[2]))


def console_session_revoke(conn: Conn, token_hash: bytes) -> bool:
    with translate_errors():
        rows = conn.execute(queries["console_session_revoke"], {"token_hash": token_hash})
        return rows.fetchone() is not None


def console_session_revoke_id(conn: Conn, session_id: int) -> tuple[str, str] | None:
    """End a live session by id: its user and role, None when none is live."""
    with translate_errors():
        row = conn.execute(queries["console_session_revoke_id"], {"id": session_id}).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def console_session_list(conn: Conn, *, limit: int = 100) -> list[dict[str, Any]]:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_session_list"], {"limit": limit}).fetchall()


def console_session_purge(conn: Conn, *, limit: int = 1000) -> int:
    """Delete up to ``limit`` expired sessions; how many went."""
    with translate_errors():
        return conn.execute(queries["console_session_purge"], {"limit": limit}).rowcount
