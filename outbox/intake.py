"""Intake: writing emails into the outbox inside the caller's transaction.

Validation and the statements are built once, here, whatever the driver:
each call is a *plan* (a generator of :mod:`outbox.db.statement` operations)
that an executor of :mod:`outbox.db.executors` or
:mod:`outbox.db.async_executors` runs on the caller's connection, in its
transaction, without committing. So psycopg 3, psycopg2, asyncpg and
SQLAlchemy write the same rows, return the same results and raise the same
errors.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from outbox.config import Settings, default_settings
from outbox.db import async_executors, executors, statement
from outbox.db.statement import Column, Plan
from outbox.errors import DuplicateKey, IdempotencyConflict, InvalidMessage, StoreError
from outbox.message import attachments
from outbox.message import versions as template_versions
from outbox.message.message_id import message_id as derive_message_id
from outbox.message.render import Template, template_set
from outbox.telemetry.tracing import (
    QUIET,
    current_traceparent,
    email_attributes,
    failures_by_type,
    tracer,
)
from outbox.validate import (
    check_key,
    check_params_for,
    check_params_shape,
    check_priority,
    content_hash,
    dump_params,
    normalize_address,
)


@dataclass(frozen=True, slots=True)
class Enqueued:
    id: int
    message_id: str
    created: bool  # False when the key already existed: nothing new was written
    idempotency_key: str
    status: str = "pending"  # "suppressed": the recipient is on the suppression list

    @property
    def suppressed(self) -> bool:
        return self.status == "suppressed"


@dataclass(frozen=True, slots=True)
class _Row:
    """One validated email: its fields are the columns every statement writes.

    ``column`` metadata names a column that differs from the field, ``json``
    marks JSON text stored as jsonb; a field added here reaches every driver.
    """

    key: str = field(metadata={"column": "idempotency_key"})
    recipient: str
    template: str
    params: str = field(metadata={"json": True})
    content_hash: str
    message_id: str
    priority: str
    template_version: str  # renders the same files on every attempt (outbox.message.versions)
    trace_context: str | None = None  # the enqueue span's traceparent: the send joins it
    sender: str | None = None  # From: the application's OUTBOX_FROM, so workers need not agree


COLUMNS = tuple(
    Column(f.name, f.metadata.get("column", f.name), f.metadata.get("json", False))
    for f in fields(_Row)
)
# A row as returned by a plan: key, id, Message-ID, created, status.
Written = tuple[str, int, str, bool, str]


def enqueue(
    conn: Any,
    *,
    idempotency_key: str,
    to: str,
    template: str,
    params: Mapping[str, Any] | None = None,
    priority: str | None = None,  # None: the template's default (template.toml), else bulk
    settings: Settings | None = None,
) -> Enqueued:
    """Add one email to the outbox in ``conn``'s current transaction.

    ``conn`` is the application's own connection: a psycopg 3 ``Connection``,
    a psycopg2 connection, an SQLAlchemy ``Connection`` or ``Session`` (its
    pending objects are flushed first), or Django's. A new email is one
    statement (a known key takes a second, to read the stored row) and nothing
    here commits: the email exists exactly when the caller's business
    transaction commits.
    A recipient on the suppression list (for a ``bulk`` email, or for all
    mail) gets an audit row in status ``suppressed`` that is never sent:
    ``result.suppressed`` says so; the check is an indexed lookup inside the
    same statement. A key that exists already returns ``created=False`` and
    the stored Message-ID; a key reused for different content (recipient,
    template, params or priority) raises
    :class:`~outbox.errors.IdempotencyConflict`, because one business event is
    one email. Bad input raises an :class:`~outbox.errors.InvalidMessage` and
    writes nothing. Another kind of connection raises ``TypeError``.
    """
    executor = executors.executor_for(conn)
    settings = settings or default_settings()
    with (
        tracer.start_as_current_span("outbox enqueue", **QUIET) as span,
        failures_by_type(span),
    ):
        ready: dict[str, Template] = {}
        row = _one(settings, ready, idempotency_key, to, template, params, priority)
        found = executors.run(_one_plan(row, ready[row.template], executor.database), executor)
        _describe(span, settings, row, found)
    return _enqueued(row, found)


async def enqueue_async(
    conn: Any,
    *,
    idempotency_key: str,
    to: str,
    template: str,
    params: Mapping[str, Any] | None = None,
    priority: str | None = None,
    settings: Settings | None = None,
) -> Enqueued:
    """:func:`enqueue` for asynchronous code: same arguments, result and errors.

    ``conn`` is a psycopg 3 ``AsyncConnection``, an asyncpg ``Connection``
    (inside ``conn.transaction()``, or the statement commits by itself, as
    asyncpg does), or an SQLAlchemy ``AsyncConnection`` or ``AsyncSession``.
    """
    executor = await async_executors.executor_for(conn)
    settings = settings or default_settings()
    with (
        tracer.start_as_current_span("outbox enqueue", **QUIET) as span,
        failures_by_type(span),
    ):
        ready: dict[str, Template] = {}
        row = _one(settings, ready, idempotency_key, to, template, params, priority)
        plan = _one_plan(row, ready[row.template], executor.database)
        found = await async_executors.run(plan, executor)
        _describe(span, settings, row, found)
    return _enqueued(row, found)


def enqueue_many(
    conn: Any,
    emails: Iterable[Mapping[str, Any]],
    *,
    settings: Settings | None = None,
) -> list[Enqueued]:
    """Add many emails (a newsletter) at once, all or none.

    Each mapping takes the keyword arguments of :func:`enqueue`
    (``idempotency_key``, ``to``, ``template``, ``params``, ``priority``);
    ``conn`` is any connection :func:`enqueue` takes. On psycopg 3 the rows
    are validated as they stream into Postgres by COPY, so checking and
    inserting run side by side; the first invalid row aborts the COPY and
    nothing is written. Other drivers, and a batch with keys already known,
    take one multi-row ``INSERT``.
    """
    executor = executors.executor_for(conn)
    settings = settings or default_settings()
    with (
        tracer.start_as_current_span("outbox enqueue_many", **QUIET) as span,
        failures_by_type(span),
    ):
        plan = _many(settings, emails, executor)
        written = [] if plan is None else executors.run(plan, executor)
        span.set_attribute("outbox.count", len(written))
    return [Enqueued(i, m, c, k, s) for k, i, m, c, s in written]


async def enqueue_many_async(
    conn: Any,
    emails: Iterable[Mapping[str, Any]],
    *,
    settings: Settings | None = None,
) -> list[Enqueued]:
    """:func:`enqueue_many` for asynchronous code (the connections of :func:`enqueue_async`).

    asyncpg and psycopg 3 take the COPY way inside a transaction.
    """
    executor = await async_executors.executor_for(conn)
    settings = settings or default_settings()
    with (
        tracer.start_as_current_span("outbox enqueue_many", **QUIET) as span,
        failures_by_type(span),
    ):
        plan = _many(settings, emails, executor)
        written = [] if plan is None else await async_executors.run(plan, executor)
        span.set_attribute("outbox.count", len(written))
    return [Enqueued(i, m, c, k, s) for k, i, m, c, s in written]


def _one(  # noqa: PLR0917  # enqueue's own arguments, passed on
    settings: Settings,
    ready: dict[str, Template],
    key: object,
    to: object,
    template: object,
    params: object,
    priority: object,
) -> _Row:
    return _validated(
        settings,
        key=key,
        to=to,
        template_name=template,
        params=params,
        priority=priority,
        ready=ready,
        trace_context=current_traceparent(),
    )


def _describe(span: Any, settings: Settings, row: _Row, found: tuple[Any, ...]) -> None:
    if span.is_recording():
        span.set_attributes(
            email_attributes(
                outbox_id=found[0],
                idempotency_key=row.key,
                message_id=row.message_id,
                template=row.template,
                priority=row.priority,
                recipient=row.recipient,
                tag_secret=settings.secret,
            )
        )
        span.set_attribute("outbox.created", found[3])
        span.set_attribute("outbox.status", found[4])


def _enqueued(row: _Row, found: tuple[Any, ...]) -> Enqueued:
    id_, message_id, stored_hash, created, status = found[:5]
    if stored_hash != row.content_hash:
        raise IdempotencyConflict(
            f"idempotency key {row.key!r} was used before for an email with different content"
        )
    return Enqueued(id_, message_id, created, row.key, status)


def _many(
    settings: Settings,
    emails: Iterable[Mapping[str, Any]],
    executor: executors.Executor | async_executors.AsyncExecutor,
) -> Plan[list[Written]] | None:
    """The plan for a batch, or None for an empty one; the first row is checked here."""
    ready: dict[str, Template] = {}
    # Every row links to the one enqueue_many span: a newsletter is not one giant trace.
    rows = _validated_rows(settings, emails, ready, current_traceparent())
    first = next(rows, None)
    if first is None:
        return None
    copy = executor.has_copy and executor.transactional()
    return _many_plan(itertools.chain([first], rows), ready, copy=copy, database=executor.database)


def _values(row: _Row) -> tuple[Any, ...]:
    return tuple(getattr(row, c.field) for c in COLUMNS)


def _store_versions(templates: Iterable[Template], database: object) -> Plan[None]:
    """Keep each template version in the caller's transaction until known committed."""
    for template in templates:
        if not template_versions.is_stored(database, template.version):
            written = yield template_versions.store_statement(template)
            template_versions.stored(database, template.version, written=bool(written))


def _one_plan(row: _Row, template: Template, database: object) -> Plan[tuple[Any, ...]]:
    values = {c.field: getattr(row, c.field) for c in COLUMNS}
    found = yield statement.insert_message(COLUMNS, values)
    if not found:
        # The key exists: a new statement sees it, even when another transaction
        # inserted it after the insert's snapshot (ON CONFLICT waited for it).
        found = yield statement.find_by_key(row.key, row.content_hash)
    if not found:
        raise StoreError(f"idempotency key {row.key!r} neither inserted nor found")
    # After the row, as enqueue_many does: transactions that wait on each other's
    # keys and versions take them in one order, so they cannot deadlock.
    yield from _store_versions([template], database)
    return found[0]


def _many_plan(
    rows: Iterator[_Row], ready: dict[str, Template], *, copy: bool, database: object
) -> Plan[list[Written]]:
    written: list[_Row] = []
    result = (yield from _copy_plan(rows, written)) if copy else None
    if result is None:
        written.extend(rows)  # the rows not yet streamed when the COPY failed
        result = yield from _insert_rows_plan(written)
    # After the rows, in the same transaction: no statement may run during a COPY.
    yield from _store_versions(ready.values(), database)
    for priority in sorted({row.priority for row in written}):
        yield statement.notify_due(priority)
    return result


def _copy_plan(rows: Iterator[_Row], written: list[_Row]) -> Plan[list[Written] | None]:
    """The common case, keys never seen: one COPY straight into the outbox, in a savepoint.

    A known key makes the COPY fail on the unique index, and a purged key
    (its tombstone) is found right after it: the savepoint is rolled back and
    None says to take the multi-row insert instead.
    """

    def tracked() -> Iterator[tuple[Any, ...]]:
        for row in rows:
            written.append(row)
            yield _values(row)

    # Read before the savepoint, this also opens the caller's transaction when
    # none is open yet.
    found = yield statement.outbox_id_mark()
    mark = int(found[0][0]) if found else 0
    yield statement.SAVEPOINT
    try:
        yield statement.copy_outbox(COLUMNS, tracked())
        last = yield statement.outbox_id_last()
        copied = yield statement.copied_rows(mark, last[0][0] if last else 0)
        if len(copied) != len(written):
            raise StoreError(f"copied {len(written)} rows but found {len(copied)}")
        if any(purged for _, _, purged in copied):
            # A purged key is a taken key, yet its row is gone, so the COPY took
            # it: undone, and the multi-row insert answers with its tombstone.
            raise DuplicateKey("an idempotency key of the batch was taken by a purged email")
        suppressed = [(id_, reason) for id_, reason, _ in copied if reason]
        if suppressed:
            ids, reasons = zip(*suppressed, strict=True)
            yield statement.suppress_copied(ids, reasons)
    except DuplicateKey:
        yield statement.ROLLBACK_TO_SAVEPOINT
        yield statement.RELEASE_SAVEPOINT
        return None
    except Exception:
        yield statement.ROLLBACK_TO_SAVEPOINT  # a refused row: the caller's transaction lives on
        yield statement.RELEASE_SAVEPOINT
        raise
    yield statement.RELEASE_SAVEPOINT
    return [
        (row.key, id_, row.message_id, True, "suppressed" if reason else "pending")
        for row, (id_, reason, _) in zip(written, copied, strict=True)
    ]


def _insert_rows_plan(rows: list[_Row]) -> Plan[list[Written]]:
    """One multi-row INSERT: known keys come back as they are stored."""
    found = yield statement.insert_rows(COLUMNS, map(_values, rows))
    conflicts = [r[0] for r in found if r[5]]
    if conflicts:  # nothing was written
        raise IdempotencyConflict(
            "keys used before for emails with different content: " + ", ".join(conflicts[:5])
        )
    result: list[Written] = [(k, i, m, c, s) for k, i, m, c, s, _ in found]
    late = [r[0] for r in result if r[1] is None]
    if late:  # inserted by a concurrent transaction after this statement's snapshot
        hashes = {row.key: row.content_hash for row in rows}
        stored = {k: (i, m, s, h) for k, i, m, s, h in (yield statement.existing_keys(late))}
        # A tombstone keeps the first 16 hex digits of the hash: a prefix of the same content's.
        changed = [k for k in late if k in stored and not hashes[k].startswith(stored[k][3])]
        if changed:
            raise IdempotencyConflict(
                "keys used meanwhile for emails with different content: " + ", ".join(changed[:5])
            )
        missing = [k for k in late if k not in stored]
        if missing:  # existed at the insert, gone a moment later: deleted by hand meanwhile
            raise StoreError(f"rows of keys {missing[:5]} were deleted while being enqueued")
        result = [
            r
            if r[1] is not None
            else (r[0], stored[r[0]][0], stored[r[0]][1], False, stored[r[0]][2])
            for r in result
        ]
    return result


def _validated_rows(
    settings: Settings,
    emails: Iterable[Mapping[str, Any]],
    ready: dict[str, Template],
    trace_context: str | None,
) -> Iterator[_Row]:
    seen: set[str] = set()
    for index, email in enumerate(emails):
        try:
            row = _validated(
                settings,
                key=email.get("idempotency_key"),
                to=email.get("to"),
                template_name=email.get("template"),
                params=email.get("params"),
                priority=email.get("priority"),
                ready=ready,
                trace_context=trace_context,
            )
        except InvalidMessage as exc:
            raise type(exc)(f"email #{index}: {exc}") from None
        if row.key in seen:
            raise IdempotencyConflict(f"email #{index}: key {row.key!r} appears twice in the batch")
        seen.add(row.key)
        yield row


def _validated(
    settings: Settings,
    *,
    key: object,
    to: object,
    template_name: object,
    params: object,
    priority: object,
    ready: dict[str, Template],
    trace_context: str | None = None,
) -> _Row:
    """The one validation path: a checked row, or an InvalidMessage; no I/O but files.

    ``ready`` keeps each template looked up (once per call or batch); the
    plans store their versions.
    """
    checked_key = check_key(key)
    recipient = normalize_address(to)
    if not isinstance(template_name, str):
        raise InvalidMessage("template must be a string")
    template = ready.get(template_name)
    if template is None:
        template = ready[template_name] = template_set(settings.templates).get(template_name)
    checked_priority = check_priority(
        (template.priority or "bulk") if priority is None else priority
    )
    params_json = dump_params(params, max_bytes=settings.max_params_bytes)
    check_params_for(template, params or {})  # type: ignore[arg-type]  # a dict, checked above
    check_params_shape(template, params or {})  # type: ignore[arg-type]  # a dict, checked above
    attachments.references(
        params or {},  # type: ignore[arg-type]  # a dict, checked above
        directory=settings.attachments_dir,
        max_bytes=settings.max_attachment_bytes,
    )
    return _Row(
        key=checked_key,
        recipient=recipient,
        template=template_name,
        params=params_json,
        content_hash=content_hash(recipient, template_name, params_json, checked_priority),
        message_id=derive_message_id(checked_key, settings.message_id_domain, settings.secret),
        priority=checked_priority.value,
        template_version=template.version,
        trace_context=trace_context,
        sender=settings.sender,
    )
