"""Intake: writing emails into the outbox inside the caller's transaction."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
import psycopg

from outbox.config import Settings, default_settings
from outbox.db import store
from outbox.errors import ConfigError, IdempotencyConflict, InvalidAddress, InvalidMessage
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
    QUIET,
    current_traceparent,
    email_attributes,
    failures_by_type,
    label_attributes,
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
    key: str
    recipient: str
    template: str
    params: str
    content_hash: str
    message_id: str
    priority: str
    template_version: str | None  # the same files on every attempt (None: inline content)
    trace_context: str | None = None  # the enqueue span's traceparent: the send joins it
    sender: str | None = None  # From: sender=, else OUTBOX_FROM, so workers need not agree
    reply_to: tuple[str, ...] = ()  # Reply-To mailboxes (outbox.fields.senders)
    subject: str | None = None  # inline content (template '(inline)', outbox.fields.inline)
    body_text: str | None = None
    body_html: str | None = None
    headers: str | None = None  # JSON [[name, value], ...] (outbox.fields.extra_headers)
    tags: tuple[str, ...] = ()  # outbox.fields.labels
    metadata: str | None = None  # JSON object (outbox.fields.labels)
    cc: tuple[str, ...] = ()  # outbox.fields.recipients
    bcc: tuple[str, ...] = ()
    send_at: dt.datetime | None = None  # outbox.fields.schedule; None: at once
    locale: str | None = None  # the template variant used (outbox.fields.locales)
    attachments: str | None = None  # JSON: the files given by content (outbox.fields.files)
    files: tuple[files.File, ...] = ()  # their bytes, stored apart once the row exists


def enqueue(
    conn: psycopg.Connection[Any],
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

    It runs one statement (one more each for cc/bcc and for files given by
    content) and never commits: the email exists exactly when the
    caller's business transaction commits. A recipient on the suppression list
    (for a ``bulk`` email, or for all mail) gets an audit row in status
    ``suppressed`` that is never sent: ``result.suppressed`` says so; the
    check is an indexed lookup inside the same statement. A key that exists already returns
    ``created=False`` and the stored Message-ID; a key reused for different
    content (recipient, template, params, priority or a per-message field) raises
    :class:`~outbox.errors.IdempotencyConflict`, because one business event
    is one email. Bad input raises an :class:`~outbox.errors.InvalidMessage`
    and writes nothing.

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
    settings = settings or default_settings()
    with (
        tracer.start_as_current_span("outbox enqueue", **QUIET) as span,
        failures_by_type(span),
    ):
        row = _validated(
            conn,
            settings,
            key=idempotency_key,
            to=to,
            template_name=template,
            params=params,
            priority=priority,
            fields=_Fields(
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
            ),
        )
        row = dataclasses.replace(row, trace_context=current_traceparent())
        result = store.insert_message(conn, **_insert_args(row))
        if result.created and (row.cc or row.bcc):
            store.drop_suppressed_copies(conn, [result.id])
        if result.created and row.files:
            store.store_attachments(conn, [(result.id, f.sha256, f.content) for f in row.files])
        if span.is_recording():
            span.set_attributes(
                email_attributes(
                    outbox_id=result.id,
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
            span.set_attribute("outbox.created", result.created)
            span.set_attribute("outbox.status", result.status)
    if result.content_hash != row.content_hash:
        raise IdempotencyConflict(
            f"idempotency key {row.key!r} was used before for an email with different content"
        )
    return Enqueued(result.id, result.message_id, result.created, row.key, result.status)


def enqueue_many(
    conn: psycopg.Connection[Any],
    emails: Iterable[Mapping[str, Any]],
    *,
    settings: Settings | None = None,
) -> list[Enqueued]:
    """Add many emails (a newsletter) at once, all or none.

    Each mapping takes the keyword arguments of :func:`enqueue`
    (``idempotency_key``, ``to``, ``template``, ``params``, ``priority``,
    ``sender``, ``reply_to``, ``subject``, ``text``, ``html``, ``headers``,
    ``tags``, ``metadata``, ``cc``, ``bcc``, ``send_at``, ``locale``, ``attachments``).
    Rows are validated as they stream into Postgres by COPY, so checking and
    inserting run side by side; the first invalid row aborts the COPY and
    nothing is written.
    """
    settings = settings or default_settings()
    rows = _validated_rows(conn, settings, emails)
    first = next(rows, None)
    if first is None:
        return []
    with (
        tracer.start_as_current_span("outbox enqueue_many", **QUIET) as span,
        failures_by_type(span),
    ):
        # Every row links to this one span: a newsletter is not one giant trace.
        trace_context = current_traceparent()
        with_copies: set[str] = set()  # keys of rows with cc or bcc, to check after the insert
        scheduled: set[str] = set()  # keys of rows with a send_at, which COPY cannot apply
        given: dict[str, tuple[files.File, ...]] = {}  # files by content, stored after the insert

        def columns() -> Iterator[store.NewRow]:
            for row in itertools.chain([first], rows):
                if row.cc or row.bcc:
                    with_copies.add(row.key)
                if row.send_at is not None:
                    scheduled.add(row.key)
                if row.files:
                    given[row.key] = row.files
                yield _columns(row, trace_context)

        results = store.insert_many(conn, columns())
        span.set_attribute("outbox.count", len(results.rows))
    if results.conflicts:
        raise IdempotencyConflict(
            "keys used before for emails with different content: " + ", ".join(results.conflicts)
        )
    created = [i for k, i, _, c, _ in results.rows if c and k in with_copies]
    if created:
        store.drop_suppressed_copies(conn, created)
    later = [i for k, i, _, c, _ in results.rows if c and k in scheduled]
    if later:
        store.schedule_new(conn, later)
    uses = [
        (i, f.sha256, f.content) for k, i, _, c, _ in results.rows if c for f in given.get(k, ())
    ]
    store.store_attachments(conn, uses)
    return [Enqueued(i, m, c, k, s) for k, i, m, c, s in results.rows]


def _validated_rows(
    conn: psycopg.Connection[Any], settings: Settings, emails: Iterable[Mapping[str, Any]]
) -> Iterator[_Row]:
    seen: set[str] = set()
    # Looked up and stored once per batch and language, not per row.
    ready: dict[tuple[str, str | None], Template] = {}
    for index, email in enumerate(emails):
        try:
            row = _validated(
                conn,
                settings,
                key=email.get("idempotency_key"),
                to=email.get("to"),
                template_name=email.get("template"),
                params=email.get("params"),
                priority=email.get("priority"),
                fields=_Fields(
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
            )
        except InvalidMessage as exc:
            raise type(exc)(f"email #{index}: {exc}") from None
        if row.key in seen:
            raise IdempotencyConflict(f"email #{index}: key {row.key!r} appears twice in the batch")
        seen.add(row.key)
        yield row


def _insert_args(row: _Row) -> dict[str, Any]:
    """The row's columns for store.insert_message; the files' bytes are stored apart."""
    return {f.name: getattr(row, f.name) for f in dataclasses.fields(row) if f.name != "files"}


def _columns(row: _Row, trace_context: str | None) -> store.NewRow:
    return (
        row.key,
        row.recipient,
        row.template,
        row.params,
        row.content_hash,
        row.message_id,
        row.priority,
        row.template_version,
        trace_context,
        row.sender,
        list(row.reply_to) or None,
        row.subject,
        row.body_text,
        row.body_html,
        row.headers,
        list(row.tags) or None,
        row.metadata,
        list(row.cc) or None,
        list(row.bcc) or None,
        row.send_at,
        row.locale,
        row.attachments,
    )


def _validated(
    conn: psycopg.Connection[Any],
    settings: Settings,
    *,
    key: object,
    to: object,
    template_name: object,
    params: object,
    priority: object,
    fields: _Fields,
    ready: dict[tuple[str, str | None], Template] | None = None,
) -> _Row:
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
        )
    if not isinstance(template_name, str):
        raise InvalidMessage("template must be a string (or None, with subject and text or html)")
    if (fields.subject, fields.text, fields.html) != (None, None, None):
        raise InvalidMessage("subject, text and html are for an email without a template")
    locale = locales.check_locale(fields.locale)
    cache_key = (template_name, locale)
    template = ready.get(cache_key) if ready is not None else None
    if template is None:
        templates = template_set(settings.templates)
        variant = templates.pick(template_name, locales.fallbacks(locale)) if locale else None
        template = templates.get(template_name, variant)
        template_versions.ensure_stored(conn, template)  # committed before any row names it
        if ready is not None:
            ready[cache_key] = template
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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
