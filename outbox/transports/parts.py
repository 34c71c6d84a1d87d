"""A built message taken apart for the JSON APIs that want fields, not MIME (pure).

Postmark's and Resend's send endpoints take From, Subject, the bodies,
attachments and "other headers" as separate fields and assemble the MIME
themselves, so the message that :mod:`outbox.message.build` built is read back here.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.policy import default

# Kept in every HTTP provider's copy: SES documents that it replaces Message-ID,
# and Resend does not say whether it keeps one, so the recipient's copy names
# its outbox row through this header whatever the provider does.
ORIGINAL_MESSAGE_ID = "X-Outbox-Message-ID"

# Headers the APIs have fields for, that describe the MIME structure they
# rebuild, or that the provider sets itself (Date at acceptance, its own
# DKIM-Signature: a signature of ours would not survive the re-assembly).
_NOT_PASSED = frozenset(
    name.lower()
    for name in (
        "From",
        "To",
        "Cc",
        "Bcc",
        "Subject",
        "Reply-To",
        "Date",
        "MIME-Version",
        "Content-Type",
        "Content-Transfer-Encoding",
        "Content-Disposition",
        "DKIM-Signature",
        "Return-Path",
        "Received",
    )
)


@dataclass(frozen=True, slots=True)
class FilePart:
    filename: str
    content_type: str
    data: bytes
    content_id: str | None = None  # set for inline parts, without the angle brackets


@dataclass(frozen=True, slots=True)
class Parts:
    sender: str  # the From header, decoded: 'Shop <no-reply@shop.example>'
    sender_name: str
    sender_address: str
    reply_to: str | None
    subject: str
    text: str | None
    html: str | None
    headers: tuple[tuple[str, str], ...]  # the others, decoded, in order
    files: tuple[FilePart, ...]


def split(data: bytes, message_id: str) -> Parts:
    """The fields of ``data``, with :data:`ORIGINAL_MESSAGE_ID` added."""
    message = BytesParser(policy=default).parsebytes(data)
    assert isinstance(message, EmailMessage)  # the default policy's factory
    text = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    bodies = {id(part) for part in (text, html) if part is not None}
    files = tuple(
        _file(part) for part in message.walk() if not part.is_multipart() and id(part) not in bodies
    )
    headers = [
        (name, str(value)) for name, value in message.items() if name.lower() not in _NOT_PASSED
    ]
    headers.append((ORIGINAL_MESSAGE_ID, message_id))
    sender = message["From"]
    sender_name, sender_address = "", str(sender or "")
    if sender is not None and sender.addresses:
        sender_name = sender.addresses[0].display_name
        sender_address = sender.addresses[0].addr_spec
    reply_to = message["Reply-To"]
    return Parts(
        sender=str(sender or ""),
        sender_name=sender_name,
        sender_address=sender_address,
        reply_to=str(reply_to) if reply_to is not None else None,
        subject=str(message["Subject"] or ""),
        text=_text(text),
        html=_text(html),
        headers=tuple(headers),
        files=files,
    )


def _text(part: Message | None) -> str | None:
    if part is None:
        return None
    assert isinstance(part, EmailMessage)
    content = part.get_content()
    # Our parts use CRLF on the wire; the JSON APIs want plain text.
    return str(content).replace("\r\n", "\n")


def _file(part: Message) -> FilePart:
    assert isinstance(part, EmailMessage)
    content_id = part["Content-ID"]
    payload = part.get_payload(decode=True)
    return FilePart(
        filename=part.get_filename() or "attachment",
        content_type=part.get_content_type(),
        data=payload if isinstance(payload, bytes) else b"",
        content_id=str(content_id).strip().strip("<>") if content_id is not None else None,
    )
