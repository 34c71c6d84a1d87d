"""The one validation path: an email as its caller gave it, checked into a row.

A checked row (:class:`outbox.db.row.Row`) or an
:class:`~outbox.errors.InvalidMessage`, and no I/O but reading the files it
attaches: what :func:`outbox.enqueue` and :func:`outbox.enqueue_many` write.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import operator
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from outbox.config import Settings
from outbox.db.row import Row
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
from outbox.message.message_id import message_id as derive_message_id
from outbox.message.render import Template, template_set
from outbox.validate import (
    check_key,
    check_params_for,
    check_params_shape,
    check_priority,
    content_hash,
    dump_params,
    normalize_address,
)

# The templates a call or batch looked up, by name and language.
Ready = dict[tuple[str, str | None], Template]


def validated_rows(
    settings: Settings,
    emails: Iterable[Mapping[str, Any]],
    ready: Ready,
    trace_context: str | None,
) -> Iterator[Row]:
    """A batch checked one email at a time as it is read (it may be streaming into
    a COPY): an error names the email's place; a key twice is a conflict."""
    seen: set[str] = set()
    for index, email in enumerate(emails):
        try:
            row = validated(
                settings,
                key=email.get("idempotency_key"),
                to=email.get("to"),
                template_name=email.get("template"),
                params=email.get("params"),
                priority=email.get("priority"),
                fields=NO_FIELDS
                if email.keys() <= _PLAIN_KEYS
                else Fields(
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


def validated(
    settings: Settings,
    *,
    key: object,
    to: object,
    template_name: object,
    params: object,
    priority: object,
    fields: Fields,
    ready: Ready,
    trace_context: str | None = None,
) -> Row:
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
    return Row(
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
    fields: Fields,
    trace_context: str | None,
) -> Row:
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
    return Row(
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
class Fields:
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
NO_FIELDS = Fields()
# The keys of an email (enqueue_many) with none of the per-message fields.
_PLAIN_KEYS = frozenset({"idempotency_key", "to", "template", "params", "priority"})
_FIELD_VALUES = operator.attrgetter(*(f.name for f in dataclasses.fields(Fields)))


def plain(given: Fields) -> Fields:
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
    settings: Settings, fields: Fields, recipient: str, *, attachment_bytes: int
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
