"""The four ways in: :func:`enqueue`, :func:`enqueue_many` and their ``async`` twins.

Each checks its emails (:mod:`outbox.intake.checked_rows`), builds the plan of
its statements (:mod:`outbox.intake.plans`) and has the executor for the
caller's connection run it in the caller's transaction, inside a span.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from outbox.config import Settings, default_settings
from outbox.db import async_executors, executors, sql
from outbox.db.enqueue_statements import Plan
from outbox.db.row import Row
from outbox.errors import ConfigError, IdempotencyConflict
from outbox.intake.checked_rows import Fields, Ready, plain, validated, validated_rows
from outbox.intake.plans import Written, many_plan, one_plan
from outbox.message.render import Template
from outbox.telemetry.tracing import (
    current_traceparent,
    email_attributes,
    label_attributes,
    quiet_span,
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


def _settings(given: Settings | None) -> Settings:
    """``given`` (else the environment's), refused when it names another schema.

    The statements name their tables in this process's OUTBOX_SCHEMA; settings
    built with another ``schema`` would be obeyed by nobody.
    """
    settings = given or default_settings()
    if settings.schema != sql.schema():
        raise ConfigError(
            f"settings.schema is {settings.schema!r} but this process's statements use"
            f" OUTBOX_SCHEMA={sql.schema()!r}: set OUTBOX_SCHEMA in the environment"
        )
    return settings


def enqueue(
    conn: Any,
    *,
    idempotency_key: str,
    to: str,
    template: str | None,  # None: the email's own subject, text and/or html below
    params: Mapping[str, Any] | None = None,
    priority: str | None = None,  # None: the template's default (template.toml), else bulk
    sender: str | None = None,  # From, within OUTBOX_SENDER_DOMAINS; None: OUTBOX_FROM
    reply_to: str | Sequence[str] | None = None,
    subject: str | None = None,
    text: str | None = None,
    html: str | None = None,
    headers: Mapping[str, str] | None = None,
    tags: Sequence[str] | None = None,
    metadata: Mapping[str, str | int | float | bool] | None = None,
    cc: str | Sequence[str] | None = None,
    bcc: str | Sequence[str] | None = None,
    send_at: dt.datetime | None = None,
    locale: str | None = None,
    attachments: Sequence[Mapping[str, Any]] | None = None,
    settings: Settings | None = None,
) -> Enqueued:
    """Add one email to the outbox in ``conn``'s current transaction.

    ``conn`` is the application's own connection: a psycopg 3 ``Connection``,
    a psycopg2 connection, an SQLAlchemy ``Connection`` or ``Session`` (its
    pending objects are flushed first), or Django's. A new email is one
    statement (one more each for cc/bcc and for files given by content; a
    known key takes one to read the stored row) and nothing here commits: the
    email exists exactly when the caller's business transaction commits.
    A recipient on the suppression list (for a ``bulk`` email, or for all
    mail) gets an audit row in status ``suppressed`` that is never sent:
    ``result.suppressed`` says so; the check is an indexed lookup inside the
    same statement. A key that exists already returns ``created=False`` and
    the stored Message-ID; a key reused for different content (recipient,
    template, params, priority or a per-message field) raises
    :class:`~outbox.errors.IdempotencyConflict`, because one business event is
    one email. Bad input raises an :class:`~outbox.errors.InvalidMessage` and
    writes nothing. Another kind of connection raises ``TypeError``.

    ``sender`` sets the From (``"Billing <billing@example.com>"``); its domain
    must be one of ``OUTBOX_SENDER_DOMAINS`` (default: the domain of
    ``OUTBOX_FROM``), so DKIM and DMARC stay aligned. ``reply_to`` is one
    address or a list of up to ten. With ``template=None`` the email is its
    own ``subject`` and ``text`` and/or ``html`` (text derived from the HTML
    when absent), stored with the row. ``headers`` adds X-* and a few
    standard headers; ``tags`` and ``metadata`` label the email for
    ``outbox show``, ``outbox status --tag``, spans and the providers' tags.
    ``cc`` and ``bcc`` add recipients of the same message (ten in all, ``to``
    included); a suppressed one is dropped and recorded, the rest still get it.
    ``send_at`` (timezone-aware) holds the email until then. ``locale``
    (``de-AT``) picks the template's language folder: ``de-AT``, else ``de``,
    else the default files. ``attachments`` are files given by content
    (``{"filename", "content": bytes, "content_type"?}``), stored once per
    distinct content.
    """
    executor = executors.executor_for(conn)
    settings = _settings(settings)
    given = Fields(
        sender=sender,
        reply_to=reply_to,
        subject=subject,
        text=text,
        html=html,
        headers=headers,
        tags=tags,
        metadata=metadata,
        cc=cc,
        bcc=bcc,
        send_at=send_at,
        locale=locale,
        attachments=attachments,
    )
    given = plain(given)
    with quiet_span("outbox enqueue") as span:
        row, found_template = _one(settings, idempotency_key, to, template, params, priority, given)
        plan = one_plan(row, found_template, executor.database, prepares=executor.prepares)
        found = executors.run(plan, executor)
        _describe(span, settings, row, found)
    return _enqueued(row, found)


async def enqueue_async(
    conn: Any,
    *,
    idempotency_key: str,
    to: str,
    template: str | None,
    params: Mapping[str, Any] | None = None,
    priority: str | None = None,
    sender: str | None = None,  # From, within OUTBOX_SENDER_DOMAINS; None: OUTBOX_FROM
    reply_to: str | Sequence[str] | None = None,
    subject: str | None = None,
    text: str | None = None,
    html: str | None = None,
    headers: Mapping[str, str] | None = None,
    tags: Sequence[str] | None = None,
    metadata: Mapping[str, str | int | float | bool] | None = None,
    cc: str | Sequence[str] | None = None,
    bcc: str | Sequence[str] | None = None,
    send_at: dt.datetime | None = None,
    locale: str | None = None,
    attachments: Sequence[Mapping[str, Any]] | None = None,
    settings: Settings | None = None,
) -> Enqueued:
    """:func:`enqueue` for asynchronous code: same arguments, result and errors.

    ``conn`` is a psycopg 3 ``AsyncConnection``, an asyncpg ``Connection``
    (inside ``conn.transaction()``, or the statement commits by itself, as
    asyncpg does), or an SQLAlchemy ``AsyncConnection`` or ``AsyncSession``.
    """
    executor = await async_executors.executor_for(conn)
    settings = _settings(settings)
    given = Fields(
        sender=sender,
        reply_to=reply_to,
        subject=subject,
        text=text,
        html=html,
        headers=headers,
        tags=tags,
        metadata=metadata,
        cc=cc,
        bcc=bcc,
        send_at=send_at,
        locale=locale,
        attachments=attachments,
    )
    given = plain(given)
    with quiet_span("outbox enqueue") as span:
        row, found_template = _one(settings, idempotency_key, to, template, params, priority, given)
        plan = one_plan(row, found_template, executor.database, prepares=executor.prepares)
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
    (``idempotency_key``, ``to``, ``template``, ``params``, ``priority``,
    ``sender``, ``reply_to``, ``subject``, ``text``, ``html``, ``headers``,
    ``tags``, ``metadata``, ``cc``, ``bcc``, ``send_at``, ``locale``,
    ``attachments``);
    ``conn`` is any connection :func:`enqueue` takes. On psycopg 3 the rows
    are validated as they stream into Postgres by COPY, so checking and
    inserting run side by side; the first invalid row aborts the COPY and
    nothing is written. Other drivers, and a batch with keys already known,
    take one multi-row ``INSERT``.
    """
    executor = executors.executor_for(conn)
    settings = _settings(settings)
    with quiet_span("outbox enqueue_many") as span:
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
    settings = _settings(settings)
    with quiet_span("outbox enqueue_many") as span:
        plan = _many(settings, emails, executor)
        written = [] if plan is None else await async_executors.run(plan, executor)
        span.set_attribute("outbox.count", len(written))
    return [Enqueued(i, m, c, k, s) for k, i, m, c, s in written]


def _one(  # noqa: PLR0917  # enqueue's own arguments, passed on
    settings: Settings,
    key: object,
    to: object,
    template: object,
    params: object,
    priority: object,
    given: Fields,
) -> tuple[Row, Template | None]:
    ready: Ready = {}
    row = validated(
        settings,
        key=key,
        to=to,
        template_name=template,
        params=params,
        priority=priority,
        fields=given,
        ready=ready,
        trace_context=current_traceparent(),
    )
    return row, next(iter(ready.values()), None)


def _describe(span: Any, settings: Settings, row: Row, found: tuple[Any, ...]) -> None:
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
        span.set_attributes(
            label_attributes(
                row.tags,
                orjson.loads(row.metadata) if row.metadata else {},
                tag_secret=settings.secret,
            )
        )
        span.set_attribute("outbox.created", found[3])
        span.set_attribute("outbox.status", found[4])


def _enqueued(row: Row, found: tuple[Any, ...]) -> Enqueued:
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
    ready: Ready = {}
    # Every row links to the one enqueue_many span: a newsletter is not one giant trace.
    rows = validated_rows(settings, emails, ready, current_traceparent())
    first = next(rows, None)
    if first is None:
        return None
    copy = executor.has_copy and executor.transactional()
    return many_plan(itertools.chain([first], rows), ready, copy=copy, database=executor.database)
