"""An outbox row to the bytes sent: template version, headers, files, signature.

Shared by the send path (:meth:`outbox.delivery.deliver.Delivery.build`) and
``outbox templates preview``, so a preview is the message a worker would send.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import cache

from outbox.config import Settings
from outbox.db.store import connections, sending
from outbox.errors import TemplateError
from outbox.fields.inline import INLINE
from outbox.message import attachments
from outbox.message import list_unsubscribe as unsubscribe
from outbox.message import versions as template_versions
from outbox.message.build import Attachment, Envelope, build_message, encode_header_value
from outbox.message.dkim import Signers
from outbox.message.render import Rendered, template_set
from outbox.message.return_path import unsubscribe_mailto
from outbox.models import Priority

log = logging.getLogger(__name__)


class Composer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.templates = template_set(settings.templates)
        self.signers = Signers.from_settings(settings)
        if settings.unsubscribe_url:
            unsubscribe.check_base_url(settings.unsubscribe_url, settings.secret)
        self._warned = False

    def render(
        self,
        row: sending.OutboxRow,
        connect: Callable[[], AbstractContextManager[connections.Conn]],
    ) -> Rendered:
        """The row's template at the version it was enqueued with, or its inline content."""
        if row.template == INLINE:
            if row.subject is None or row.body_text is None:
                raise TemplateError(f"row {row.id} has no template and no stored content")
            return Rendered(row.subject, row.body_text, row.body_html)
        template = template_versions.resolve(
            self.templates, row.template, row.template_version, connect, row.locale
        )
        settings = self.settings
        if row.priority == Priority.BULK and settings.unsubscribe_url:
            link = unsubscribe.link(settings.unsubscribe_url, row.id, secret=settings.secret)
            return template.render(row.params, {"unsubscribe_url": link})
        return template.render(row.params)

    def headers(self, row: sending.OutboxRow) -> tuple[tuple[str, str], ...]:
        if row.priority == Priority.HIGH:
            # RFC 3834: machine-made mail, so auto-responders stay quiet.
            return (("Auto-Submitted", "auto-generated"),)
        settings = self.settings
        if not settings.unsubscribe_url:
            if not self._warned:
                self._warned = True
                log.warning(
                    "OUTBOX_UNSUBSCRIBE_URL is not set: bulk mail leaves without one-click "
                    "unsubscribe, which large mailbox providers require of bulk senders"
                )
            return ()
        # The mailto reaches the bounce mailbox, whose parser reads "unsubscribe"
        # requests; its token is not the Return-Path's and can only unsubscribe.
        mailto = (
            unsubscribe_mailto(row.id, domain=settings.bounce_domain, secret=settings.secret)
            if settings.bounce_domain
            else None
        )
        return unsubscribe.headers(
            row.id, base_url=settings.unsubscribe_url, secret=settings.secret, mailto=mailto
        )

    def message(
        self,
        row: sending.OutboxRow,
        *,
        to: str,
        connect: Callable[[], AbstractContextManager[connections.Conn]],
    ) -> bytes:
        rendered = self.render(row, connect)
        sender = row.sender or self.settings.sender
        envelope = Envelope(
            sender=sender,
            to=to,
            subject=rendered.subject,
            message_id=row.message_id,
            date=row.created_at,
            extra_headers=self.headers(row) + _own_headers(row),
            reply_to=tuple(row.reply_to),
            cc=tuple(row.cc),
        )
        files = (
            attachments.load(
                row.params,
                directory=self.settings.attachments_dir,
                max_bytes=self.settings.max_attachment_bytes,
            )
            if attachments.PARAM in row.params
            else []
        )
        if row.attachments:
            files += _stored_files(row, connect)
        data = build_message(envelope, rendered.text, rendered.html, files)
        if not self.signers:
            return data
        # Signed by the From's own domain, so DMARC aligns for every sender= allowed.
        # A stored From ends with its address, so its last "@" starts the domain.
        signer = self.signers.for_domain(sender.rpartition("@")[2].rstrip(">").strip())
        return signer.sign(data) if signer else data


def _stored_files(
    row: sending.OutboxRow, connect: Callable[[], AbstractContextManager[connections.Conn]]
) -> list[Attachment]:
    """The files given by content at enqueue, from Postgres, in the order given."""
    with connect() as conn:
        found = sending.load_attachments(conn, [a["sha256"] for a in row.attachments])
    missing = [a["filename"] for a in row.attachments if a["sha256"] not in found]
    if missing:
        # Stored with the row in one transaction: gone means deleted by hand.
        raise TemplateError(f"row {row.id}: attached files {missing} are no longer stored")
    return [
        Attachment(a["filename"], a["content_type"], found[a["sha256"]]) for a in row.attachments
    ]


def _own_headers(row: sending.OutboxRow) -> tuple[tuple[str, str], ...]:
    """The caller's headers (checked at enqueue), non-ASCII values RFC 2047 encoded."""
    return tuple((name, encode_header_value(name, value)) for name, value in row.headers)


@cache
def composer(settings: Settings) -> Composer:
    """One Composer per settings and process: the DKIM keys are parsed once."""
    return Composer(settings)
