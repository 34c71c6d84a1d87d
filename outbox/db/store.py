"""One function per named query; psycopg errors become StoreError here only.

Functions take a connection and never commit, except :func:`migrate`; the
caller owns the transaction.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

import orjson
import psycopg
import psycopg.sql
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from outbox.db.sql import migrations, queries
from outbox.delivery.breaker import BreakerState
from outbox.errors import PoolExhausted, StoreError

Conn = psycopg.Connection[Any]
_log = logging.getLogger(__name__)

# Serialises concurrent `outbox migrate` runs; any constant works.
_MIGRATION_LOCK = 0x0B0C5


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    try:
        yield
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


def connection_lost(exc: BaseException, conn: Conn) -> bool:
    """Whether ``exc`` means the connection is gone (not the statement's own fault)."""
    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    return conn.closed or isinstance(cause, psycopg.OperationalError | psycopg.InterfaceError)


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
class Inserted:
    id: int
    message_id: str
    content_hash: str
    created: bool
    status: str


@dataclass(frozen=True, slots=True)
class InsertedMany:
    rows: list[tuple[str, int, str, bool, str]]  # key, id, message_id, created, status
    conflicts: list[str]


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


def migrate(conn: Conn) -> list[str]:
    """Apply the migrations not yet applied, each in its own transaction."""
    applied: list[str] = []
    with translate_errors():
        conn.execute(
            "CREATE TABLE IF NOT EXISTS outbox_schema_migration ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.commit()
        for version, name, sql in migrations():
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                done = conn.execute(
                    "SELECT 1 FROM outbox_schema_migration WHERE version = %s", (version,)
                ).fetchone()
                if done:
                    continue
                conn.execute(sql.encode("utf-8"))
                conn.execute(
                    "INSERT INTO outbox_schema_migration (version, name) VALUES (%s, %s)",
                    (version, name),
                )
                applied.append(f"{version:04d}_{name}")
        conn.commit()
    return applied


def insert_message(
    conn: Conn,
    *,
    key: str,
    recipient: str,
    template: str,
    params: str,
    content_hash: str,
    message_id: str,
    priority: str,
    template_version: str | None = None,
    trace_context: str | None = None,
    sender: str | None = None,
) -> Inserted:
    args = {
        "key": key,
        "recipient": recipient,
        "template": template,
        "params": params,
        "content_hash": content_hash,
        "message_id": message_id,
        "priority": priority,
        "template_version": template_version,
        "trace_context": trace_context,
        "sender": sender,
    }
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(queries["insert_message"], args).fetchone()
        if row is None:
            # Another transaction inserted the key after our statement's
            # snapshot; ON CONFLICT waited for it, so it is visible now.
            row = cur.execute(queries["find_by_key"], args).fetchone()
        if row is None:
            raise StoreError(f"idempotency key {key!r} neither inserted nor found")
    return Inserted(row[0], row[1], row[2], row[3], row[4])


# key, recipient, template, params, content_hash, message_id, priority,
# template_version, trace_context, sender: the columns enqueue_many writes
NewRow = tuple[str, str, str, str, str, str, str, str | None, str | None, str | None]


def insert_many(conn: Conn, rows: Iterable[NewRow]) -> InsertedMany:
    """Insert ``rows`` (consumed once), all or none.

    The common case, keys never seen before, is one COPY straight into the
    outbox, inside a savepoint. If a key exists, the COPY fails on the unique
    index, the savepoint is rolled back, and the rows go the careful way:
    a scratch table, then INSERT ... ON CONFLICT DO NOTHING.
    """
    written: list[NewRow] = []

    def tracked() -> Iterator[NewRow]:
        for row in rows:
            written.append(row)
            yield row

    stream = tracked()
    try:
        # Read outside the savepoint, this also opens the caller's transaction when
        # none is open yet; otherwise transaction() would begin and commit one of
        # its own, and the rows would outlive the caller's rollback.
        found = conn.execute(queries["outbox_id_mark"]).fetchone()
        mark = int(found[0]) if found else 0
        with conn.transaction():
            copied = _copy_new(conn, stream, written, mark)
    except psycopg.errors.UniqueViolation:
        copied = None
    except psycopg.Error as exc:
        raise StoreError(f"database error: {exc}") from exc
    if copied is None:
        written.extend(stream)  # the rows not yet streamed when the COPY failed
        copied = _insert_staged(conn, written)
    with translate_errors():
        for priority in sorted({row[6] for row in written}):
            conn.execute(queries["notify_due"], {"priority": priority})
    return copied


def _copy_new(
    conn: Conn, stream: Iterator[NewRow], written: list[NewRow], mark: int
) -> InsertedMany:
    with conn.cursor(row_factory=tuple_row) as cur:
        with cur.copy(queries["copy_outbox"]) as copy:
            for row in stream:
                copy.write_row(row)
        last = cur.execute(queries["outbox_id_last"]).fetchone()
        bounds = {"after": mark, "last": last[0] if last else 0}
        copied = cur.execute(queries["copied_rows"], bounds).fetchall()
        if len(copied) != len(written):
            raise StoreError(f"copied {len(written)} rows but found {len(copied)}")
        suppressed = [(id_, reason) for id_, reason in copied if reason]
        if suppressed:
            ids, reasons = zip(*suppressed, strict=True)
            cur.execute(queries["suppress_copied"], {"ids": list(ids), "reasons": list(reasons)})
    return InsertedMany(
        [
            (row[0], id_, row[5], True, "suppressed" if reason else "pending")
            for row, (id_, reason) in zip(written, copied, strict=True)
        ],
        [],
    )


def _insert_staged(conn: Conn, rows: Sequence[NewRow]) -> InsertedMany:
    with translate_errors(), conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(queries["create_staging"])
        cur.execute(queries["clear_staging"])
        with cur.copy(queries["copy_staging"]) as copy:
            for row in rows:
                copy.write_row(row)
        conflicts = [r[0] for r in cur.execute(queries["staging_conflicts"]).fetchall()]
        if conflicts:
            return InsertedMany([], conflicts)
        jit = cur.execute(queries["jit_off"]).fetchone()
        created = {r[0]: (r[1], r[2], True, r[3]) for r in cur.execute(queries["insert_staging"])}
        if jit is not None:
            cur.execute(queries["jit_restore"], {"previous": jit[0]})
        found: dict[str, tuple[int, str, bool, str]] = {}
        if len(created) < len(rows):
            keys = [row[0] for row in rows if row[0] not in created]
            found = {
                r[0]: (r[1], r[2], False, r[3])
                for r in cur.execute(queries["existing_keys"], {"keys": keys})
            }
        cur.execute(queries["clear_staging"])
    stored = created | found
    missing = [row[0] for row in rows if row[0] not in stored]
    if missing:  # existed at the insert, gone a moment later: deleted by hand meanwhile
        raise StoreError(f"rows of keys {missing[:5]} were deleted while being enqueued")
    return InsertedMany([(row[0], *stored[row[0]]) for row in rows], [])


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


def record_results(conn: Conn, worker: str, results: Sequence[AttemptRecord]) -> set[int]:
    """Store attempts and row states; returns the ids whose row was still ours."""
    # orjson writes dataclasses natively; the texts came from a peer and may hold
    # what Postgres cannot store.
    results_json = orjson.dumps([_storable_attempt(r) for r in results]).decode()
    with translate_errors():
        rows = conn.execute(
            queries["record_results"], {"results": results_json, "worker": worker}
        ).fetchall()
    return {r[0] for r in rows}


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


def find_message(conn: Conn, ref: str) -> dict[str, Any] | None:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["find_message"], {"ref": ref}).fetchone()


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


def requeue(conn: Conn, *, ref: str | None = None, status: str | None = None) -> list[str]:
    """Send parked rows again; returns the priorities woken, one per row."""
    with translate_errors():
        if ref is not None:
            rows = conn.execute(queries["requeue_key"], {"ref": ref}).fetchall()
        else:
            rows = conn.execute(queries["requeue_status"], {"status": status}).fetchall()
        for priority in sorted({r[1] for r in rows}):
            conn.execute(queries["notify_due"], {"priority": priority})
    return [r[1] for r in rows]


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


def store_template_version(
    conn: Conn,
    *,
    version: str,
    name: str,
    files: dict[str, str],
    compiled_html: str | None,
    compiled_text: str | None,
) -> None:
    """Commit a template version on a short connection of its own (see message.versions)."""
    args = {
        "hash": version,
        "name": name,
        "files": Jsonb(files),
        "compiled_html": compiled_html,
        "compiled_text": compiled_text,
    }
    try:
        with psycopg.connect(
            conn.info.dsn, password=conn.info.password, autocommit=True, connect_timeout=10
        ) as own:
            own.execute(queries["store_template_version"], args)
    except psycopg.Error as exc:
        raise StoreError(f"could not store template version: {exc}") from exc


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
) -> tuple[int, str] | None:
    with translate_errors():
        row = conn.execute(
            queries["find_row_for_bounce"], {"id": outbox_id, "message_id": message_id}
        ).fetchone()
    return (int(row[0]), str(row[1])) if row else None


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


def find_row_by_provider_id(conn: Conn, provider_message_id: str) -> tuple[int, str] | None:
    with translate_errors():
        row = conn.execute(
            queries["find_row_by_provider_id"], {"provider_message_id": provider_message_id}
        ).fetchone()
    return (int(row[0]), str(row[1])) if row else None


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


def record_results_each(conn: Conn, results: Sequence[tuple[str, AttemptRecord]]) -> set[int]:
    """:func:`record_results` for results of several workers: (worker, record) pairs."""
    rows = [
        {**_record_fields(_storable_attempt(record)), "worker": worker}
        for worker, record in results
    ]
    with translate_errors():
        found = conn.execute(
            queries["record_results_each"], {"results": orjson.dumps(rows).decode()}
        ).fetchall()
    return {r[0] for r in found}


def _record_fields(record: AttemptRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__slots__}


def return_unattempted(
    conn: Conn, rows: Sequence[Unattempted], *, max_age_seconds: float
) -> dict[int, str]:
    """Hand rows back without an attempt; the status each one took (pending, or dead
    past the age limit), by id. A row no longer held by its worker is left out."""
    payload = orjson.dumps(list(rows)).decode()  # orjson writes dataclasses natively
    args = {"rows": payload, "max_age_seconds": max_age_seconds}
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
    if value is None:
        return None
    if value.isascii() and "\x00" not in value:
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


def _storable_attempt(record: AttemptRecord) -> AttemptRecord:
    return dataclasses.replace(
        record,
        reason=storable_text(record.reason) or "",
        reply_text=storable_text(record.reply_text),
        provider_message_id=storable_text(record.provider_message_id),
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


# The console of `outbox web` (outbox.web.console): reads for its pages and its audit trail.


@dataclass(frozen=True, slots=True)
class EmailFilter:
    """Optional filters of the console's email list (None: any)."""

    status: str | None = None
    priority: str | None = None
    template: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None


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
