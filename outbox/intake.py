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

import dataclasses
import datetime as dt
import itertools
import operator
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from outbox.config import Settings, default_settings
from outbox.db import async_executors, executors, sql, statement
from outbox.db.row import COLUMNS as COLUMNS  # noqa: PLC0414  # intake.COLUMNS, as before
from outbox.db.row import Row as _Row
from outbox.db.row import named_values
from outbox.db.row import values as row_values
from outbox.db.statement import Plan, Rows
from outbox.errors import (
    ConfigError,
    DuplicateKey,
    IdempotencyConflict,
    InvalidAddress,
    InvalidMessage,
    StoreError,
)
from outbox.fields import (
    extra_headers,
    files,
    inline,
    labels,
    locales,
    recipients,
    schedule,
    senders,
)
from outbox.message import attachments
from outbox.message import versions as template_versions
from outbox.message.message_id import message_id as derive_message_id
from outbox.message.render import Template, template_set
from outbox.telemetry.tracing import (
    current_traceparent,
    email_attributes,
    label_attributes,
    quiet_span,
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


# A row as returned by a plan: key, id, Message-ID, created, status.
Written = tuple[str, int, str, bool, str]
# The templates a call or batch looked up, by name and language.
Ready = dict[tuple[str, str | None], Template]


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
    given = _Fields(
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
    given = _plain(given)
    with quiet_span("outbox enqueue") as span:
        row, found_template = _one(settings, idempotency_key, to, template, params, priority, given)
        plan = _one_plan(row, found_template, executor.database, prepares=executor.prepares)
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
    given = _Fields(
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
    given = _plain(given)
    with quiet_span("outbox enqueue") as span:
        row, found_template = _one(settings, idempotency_key, to, template, params, priority, given)
        plan = _one_plan(row, found_template, executor.database, prepares=executor.prepares)
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
    given: _Fields,
) -> tuple[_Row, Template | None]:
    ready: Ready = {}
    row = _validated(
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
        span.set_attributes(
            label_attributes(
                row.tags,
                orjson.loads(row.metadata) if row.metadata else {},
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
    ready: Ready = {}
    # Every row links to the one enqueue_many span: a newsletter is not one giant trace.
    rows = _validated_rows(settings, emails, ready, current_traceparent())
    first = next(rows, None)
    if first is None:
        return None
    copy = executor.has_copy and executor.transactional()
    return _many_plan(itertools.chain([first], rows), ready, copy=copy, database=executor.database)


def _store_versions(templates: Iterable[Template], database: object) -> Plan[None]:
    """Keep each template version in the caller's transaction until known committed."""
    for template in templates:
        if not template_versions.is_stored(database, template.version):
            written = yield template_versions.store_statement(template)
            template_versions.stored(database, template.version, written=bool(written))


def _after_insert(created: Iterable[tuple[_Row, int]], *, copied: bool) -> Plan[None]:
    """What new rows need once they exist, in the same transaction.

    Suppressed cc and bcc recipients are taken off (and recorded), files given
    by content are stored once each, and rows written by COPY (which cannot
    compute next_attempt_at) are scheduled for their send_at.
    """
    new = list(created)
    with_copies = [id_ for row, id_ in new if row.cc or row.bcc]
    if with_copies:
        yield statement.drop_suppressed_copies(with_copies)
    scheduled = [id_ for row, id_ in new if row.send_at is not None]
    if copied and scheduled:
        yield statement.schedule_new(scheduled)
    uses = [(id_, f) for row, id_ in new for f in row.files]
    if uses:
        # In hash order: transactions storing the same files wait for each other
        # in one order, so they cannot deadlock.
        files_by_hash = {f.sha256: f.content for _, f in sorted(uses, key=lambda u: u[1].sha256)}
        yield statement.store_attachment_blobs(files_by_hash)
        yield statement.use_attachments([(id_, f.sha256) for id_, f in uses])


def _one_plan(
    row: _Row, template: Template | None, database: object, *, prepares: bool
) -> Plan[tuple[Any, ...]]:
    values = named_values(row)
    found = yield from _insert(values, database, prepares=prepares)
    if not found:
        # The key exists: a new statement sees it, even when another transaction
        # inserted it after the insert's snapshot (ON CONFLICT waited for it).
        found = yield statement.find_by_key(row.key, row.content_hash)
    if not found:
        raise StoreError(f"idempotency key {row.key!r} neither inserted nor found")
    if found[0][3]:  # created
        yield from _after_insert([(row, found[0][0])], copied=False)
    # After the row, as enqueue_many does: transactions that wait on each other's
    # keys and versions take them in one order, so they cannot deadlock.
    yield from _store_versions([template] if template else [], database)
    return found[0]


# Whether a database has this release's enqueue function: True once seen (a
# running release's function is never dropped), else when to look again.
_functions: dict[tuple[object, str], bool | float] = {}
_LOOK_AGAIN_SECONDS = 60.0


def _insert(values: dict[str, Any], database: object, *, prepares: bool) -> Plan[Rows]:
    """Insert one row: insert_message, or on a driver that prepares nothing (and
    so would plan it on every call) the function ``outbox migrate`` made of it."""
    if not prepares:
        function = statement.enqueue_function(COLUMNS, sql.schema())
        if (yield from _has_function(database, function)):
            return (yield function.call(values))
    return (yield statement.insert_message(COLUMNS, values))


def _has_function(database: object, function: statement.EnqueueFunction) -> Plan[bool]:
    # Only a database named by value is remembered: a connection object is not kept.
    key = (database, function.name)
    known = _functions.get(key) if isinstance(database, tuple) else None
    if known is True:
        return True
    if isinstance(known, float) and time.monotonic() < known:
        return False
    rows = yield function.exists
    there = bool(rows and rows[0][0])
    if isinstance(database, tuple):
        _functions[key] = True if there else time.monotonic() + _LOOK_AGAIN_SECONDS
    return there


def _many_plan(
    rows: Iterator[_Row], ready: Ready, *, copy: bool, database: object
) -> Plan[list[Written]]:
    written: list[_Row] = []
    result = (yield from _copy_plan(rows, written)) if copy else None
    copied = result is not None
    if result is None:
        written.extend(rows)  # the rows not yet streamed when the COPY failed
        result = yield from _insert_rows_plan(written)
    new = [(row, w[1]) for row, w in zip(written, result, strict=True) if w[3]]
    yield from _after_insert(new, copied=copied)
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
            yield row_values(row)

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
    found = yield statement.insert_rows(COLUMNS, map(row_values, rows))
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
    ready: Ready,
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
                fields=NO_FIELDS
                if email.keys() <= _PLAIN_KEYS
                else _Fields(
                    sender=email.get("sender"),
                    reply_to=email.get("reply_to"),
                    subject=email.get("subject"),
                    text=email.get("text"),
                    html=email.get("html"),
                    headers=email.get("headers"),
                    tags=email.get("tags"),
                    metadata=email.get("metadata"),
                    cc=email.get("cc"),
                    bcc=email.get("bcc"),
                    send_at=email.get("send_at"),
                    locale=email.get("locale"),
                    attachments=email.get("attachments"),
                ),
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
    fields: _Fields,
    ready: Ready,
    trace_context: str | None = None,
) -> _Row:
    """The one validation path: a checked row, or an InvalidMessage; no I/O but files.

    ``ready`` keeps each template looked up (once per call or batch, per
    language); the plans store their versions.
    """
    checked_key = check_key(key)
    recipient = normalize_address(to)
    if template_name is None:
        return _validated_inline(
            settings,
            key=checked_key,
            recipient=recipient,
            params=params,
            priority=priority,
            fields=fields,
            trace_context=trace_context,
        )
    if not isinstance(template_name, str):
        raise InvalidMessage("template must be a string (or None, with subject and text or html)")
    if (fields.subject, fields.text, fields.html) != (None, None, None):
        raise InvalidMessage("subject, text and html are for an email without a template")
    locale = locales.check_locale(fields.locale)
    cache_key = (template_name, locale)
    template = ready.get(cache_key)
    if template is None:
        templates = template_set(settings.templates)
        variant = templates.pick(template_name, locales.fallbacks(locale)) if locale else None
        template = ready[cache_key] = templates.get(template_name, variant)
    checked_priority = check_priority(
        (template.priority or "bulk") if priority is None else priority
    )
    params_json = dump_params(params, max_bytes=settings.max_params_bytes)
    check_params_for(template, params or {})  # type: ignore[arg-type]  # a dict, checked above
    check_params_shape(template, params or {})  # type: ignore[arg-type]  # a dict, checked above
    referenced = attachments.references(
        params or {},  # type: ignore[arg-type]  # a dict, checked above
        directory=settings.attachments_dir,
        max_bytes=settings.max_attachment_bytes,
    )
    # Files by reference and by content share one limit.
    room = settings.max_attachment_bytes - sum(r.size for r in referenced)
    checked = _checked_fields(settings, fields, recipient, attachment_bytes=room)
    if locale is not None:
        checked.hashed["locale"] = locale
    return _Row(
        key=checked_key,
        recipient=recipient,
        template=template_name,
        params=params_json,
        content_hash=content_hash(
            recipient, template_name, params_json, checked_priority, checked.hashed
        ),
        message_id=derive_message_id(checked_key, settings.message_id_domain, settings.secret),
        priority=checked_priority.value,
        template_version=template.version,
        trace_context=trace_context,
        sender=checked.sender,
        reply_to=checked.reply_to,
        headers=checked.headers,
        tags=checked.tags,
        metadata=checked.metadata,
        cc=checked.cc,
        bcc=checked.bcc,
        send_at=checked.send_at,
        locale=template.variant,
        attachments=checked.attachments,
        files=checked.files,
    )


def _validated_inline(
    settings: Settings,
    *,
    key: str,
    recipient: str,
    params: object,
    priority: object,
    fields: _Fields,
    trace_context: str | None,
) -> _Row:
    """An email without a template: its own subject and bodies, stored with the row."""
    if fields.locale is not None:
        raise InvalidMessage("locale picks a template's variant: an email without one has none")
    content = inline.check_content(
        fields.subject, fields.text, fields.html, max_bytes=settings.max_content_bytes
    )
    checked_priority = check_priority("bulk" if priority is None else priority)
    params_json = dump_params(params, max_bytes=settings.max_params_bytes)
    inline.check_inline_params(params)
    referenced = attachments.references(
        params or {},  # type: ignore[arg-type]  # a dict, checked above
        directory=settings.attachments_dir,
        max_bytes=settings.max_attachment_bytes,
    )
    # Files by reference and by content share one limit.
    room = settings.max_attachment_bytes - sum(r.size for r in referenced)
    checked = _checked_fields(settings, fields, recipient, attachment_bytes=room)
    hashed = {**checked.hashed, **content.hashed()}
    return _Row(
        key=key,
        recipient=recipient,
        template=inline.INLINE,
        params=params_json,
        content_hash=content_hash(recipient, inline.INLINE, params_json, checked_priority, hashed),
        message_id=derive_message_id(key, settings.message_id_domain, settings.secret),
        priority=checked_priority.value,
        template_version=None,
        trace_context=trace_context,
        sender=checked.sender,
        reply_to=checked.reply_to,
        headers=checked.headers,
        tags=checked.tags,
        metadata=checked.metadata,
        cc=checked.cc,
        bcc=checked.bcc,
        send_at=checked.send_at,
        attachments=checked.attachments,
        files=checked.files,
        subject=content.subject,
        body_text=content.text,
        body_html=content.html,
    )


@dataclass(slots=True)  # not frozen, as outbox.db.row.Row is not: made per email
class _Fields:
    """The per-message fields as the caller gave them (checked by outbox.fields)."""

    sender: object = None
    reply_to: object = None
    subject: object = None
    text: object = None
    html: object = None
    headers: object = None
    tags: object = None
    metadata: object = None
    cc: object = None
    bcc: object = None
    send_at: object = None
    locale: object = None
    attachments: object = None


# The fields of an email that gives none of them: _checked_fields skips their checks.
NO_FIELDS = _Fields()
# The keys of an email (enqueue_many) with none of the per-message fields.
_PLAIN_KEYS = frozenset({"idempotency_key", "to", "template", "params", "priority"})
_FIELD_VALUES = operator.attrgetter(*(f.name for f in dataclasses.fields(_Fields)))


def _plain(given: _Fields) -> _Fields:
    """NO_FIELDS when ``given`` holds none (compared by identity, not by ==)."""
    return NO_FIELDS if all(v is None for v in _FIELD_VALUES(given)) else given


@dataclass(slots=True)  # not frozen: made per email
class _Checked:
    """The per-message fields as stored, and what of them the content hash covers."""

    hashed: dict[str, Any]
    sender: str
    reply_to: tuple[str, ...]
    headers: str | None
    tags: tuple[str, ...]
    metadata: str | None
    cc: tuple[str, ...]
    bcc: tuple[str, ...]
    send_at: dt.datetime | None
    files: tuple[files.File, ...]
    attachments: str | None


def _checked_fields(
    settings: Settings, fields: _Fields, recipient: str, *, attachment_bytes: int
) -> _Checked:
    if fields is NO_FIELDS:  # the usual email: nothing to check, nothing hashed
        return _Checked(
            hashed={}, sender=settings.sender, reply_to=(), headers=None, tags=(),
            metadata=None, cc=(), bcc=(), send_at=None, files=(), attachments=None,
        )  # fmt: skip
    # Only the fields given are hashed: an email without them hashes as before they existed.
    hashed: dict[str, Any] = {}
    sender = settings.sender
    if fields.sender is not None:
        sender = senders.check_sender(fields.sender, allowed_domains=_sender_domains(settings))
        if sender != settings.sender:  # OUTBOX_FROM given explicitly is the default
            hashed["sender"] = sender
    reply_to = senders.check_reply_to(fields.reply_to)
    if reply_to:
        hashed["reply_to"] = list(reply_to)
    headers = extra_headers.check_headers(fields.headers)
    if headers:
        hashed["headers"] = [list(pair) for pair in headers]
    tags = labels.check_tags(fields.tags)
    if tags:
        hashed["tags"] = list(tags)
    metadata = labels.check_metadata(fields.metadata)
    if metadata:
        hashed["metadata"] = metadata
    cc, bcc = recipients.check_copies(recipient, fields.cc, fields.bcc)
    if cc:
        hashed["cc"] = list(cc)
    if bcc:
        hashed["bcc"] = list(bcc)
    send_at = schedule.check_send_at(fields.send_at)
    if send_at is not None:
        hashed["send_at"] = send_at.isoformat()
    given = files.check_files(fields.attachments, max_bytes=attachment_bytes)
    if given:
        hashed["attachments"] = [f.described() for f in given]
    return _Checked(
        hashed=hashed,
        sender=sender,
        reply_to=reply_to,
        headers=orjson.dumps(hashed["headers"]).decode() if headers else None,
        tags=tags,
        metadata=orjson.dumps(metadata).decode() if metadata else None,
        cc=cc,
        bcc=bcc,
        send_at=send_at,
        files=given,
        attachments=orjson.dumps(hashed["attachments"]).decode() if given else None,
    )


@lru_cache(maxsize=8)
def _sender_domains(settings: Settings) -> frozenset[str]:
    try:
        return senders.normalize_domains(settings.sender_domain_list())
    except InvalidAddress as exc:
        raise ConfigError(f"OUTBOX_SENDER_DOMAINS: {exc}") from None
