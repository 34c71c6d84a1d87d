"""What may appear in logs, traces and command output (pure).

Recipient addresses appear only as a tag: a keyed hash of the address and its
domain (``[3f2a9c1e0b7d]@example.com``). Keyed with OUTBOX_SECRET, so a tag
cannot be matched against a list of known addresses; stable, so support can
search logs for one person (``outbox show --to ADDRESS`` prints the tag).
Secrets (OUTBOX_SECRET, passwords in URLs, API tokens, webhook credentials,
DKIM key material) never appear at all: :class:`Redactor` replaces them, and
:func:`install` puts it in front of every log handler.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from email.utils import parseaddr
from typing import TYPE_CHECKING

from outbox import address_spans, url_credentials
from outbox.broker_urls import split_nodes
from outbox.token_signatures import keyed_digest

if TYPE_CHECKING:
    from outbox.config import Settings

PURPOSE = "recipient-tag"
HIDDEN = "[redacted]"
_MIN_SECRET = 6  # shorter values would blank out ordinary words
# Our own addresses, by shape: a Message-ID of ours, a VERP return path.
_MESSAGE_ID = re.compile(r"[0-9a-f]{32}")
_RETURN_PATH = re.compile(r"bounces\+(?:[bu]\.)?[0-9a-z]{1,13}-[0-9a-f]{16}")


def recipient_hash(address: str, *, secret: str) -> str:
    """Twelve hex digits that stand for ``address`` (case folded)."""
    folded = address.lower()
    if secret:
        return keyed_digest(secret, PURPOSE, folded)[:12]
    return hashlib.sha256(folded.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def recipient_tag(address: str, *, secret: str) -> str:
    """A stable, non-reversible tag that keeps the domain: ``[3f2a9c1e0b7d]@example.com``.

    The domain tells an operator which receiver is involved; the hash lets
    them match log lines for one recipient without ever seeing the address.
    The brackets make it text no address is (email-validator refuses it),
    so no address can pass for a tag. Without a secret the hash is unkeyed,
    and anyone holding a list of addresses can match tags against it: set
    OUTBOX_SECRET in production.
    """
    local, _, domain = address.rpartition("@")
    digest = recipient_hash(address, secret=secret)
    return f"[{digest}]@{domain.lower()}" if local else f"[{digest}]"


@dataclass(frozen=True)
class OwnAddresses:
    """Addresses that are ours, not a person's, and stay readable: the sender
    itself, our Message-IDs and VERP return paths. Only these exact shapes:
    anyone else at our domains is a person, tagged like any recipient."""

    sender: str = ""
    message_id_domain: str = ""
    return_path_domains: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> OwnAddresses:
        sender = parseaddr(settings.sender)[1].lower()
        sender_domain = sender.rpartition("@")[2]
        return cls(
            sender=sender,
            message_id_domain=settings.message_id_domain.lower(),
            return_path_domains=tuple(
                d.lower() for d in (settings.bounce_domain, sender_domain) if d
            ),
        )

    def __contains__(self, address: str) -> bool:
        folded = address.lower()
        local, _, domain = folded.rpartition("@")
        if self.sender and folded == self.sender:
            return True
        if domain == self.message_id_domain and _MESSAGE_ID.fullmatch(local):
            return True
        return domain in self.return_path_domains and bool(_RETURN_PATH.fullmatch(local))


def addresses(text: str, *, secret: str, ours: OwnAddresses = OwnAddresses()) -> str:
    """``text`` with every email address in it replaced by its tag (but ``ours``).

    Tags pass unchanged: a tag is no address (:func:`recipient_tag`).
    """
    if "@" not in text:
        return text
    pieces: list[str] = []
    done = 0
    for start, end in address_spans.spans(text):
        address = text[start:end]
        pieces += [
            text[done:start],
            address if address in ours else recipient_tag(address, secret=secret),
        ]
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def known_addresses(
    text: str, known: Iterable[str], *, secret: str, ours: OwnAddresses = OwnAddresses()
) -> str:
    """``text`` with each of the ``known`` addresses in it tagged, the rest kept.

    For text that holds an email's own addresses among other words: an
    idempotency key ``pw-dead1@example.com`` of the email to ``dead1@example.com``
    reads ``pw-[3f2a9c1e0b7d]@example.com``, so support still recognises the
    key. A known address counts only where it is not part of a longer word
    (a letter, digit or dot before it, a domain label after it); any address
    left is then tagged whole, as :func:`addresses` does.
    """
    if "@" not in text:
        return text
    for address in sorted({a.lower() for a in known if "@" in a}, key=len, reverse=True):
        pattern = re.compile(r"(?<![\w.])" + re.escape(address) + r"(?![\w-]|\.\w)", re.IGNORECASE)
        text = pattern.sub(lambda m: recipient_tag(m.group(), secret=secret), text)
    return addresses(text, secret=secret, ours=ours)


class Redactor:
    """Removes known secrets, and tags addresses, in free text."""

    def __init__(
        self, secrets: Iterable[str], *, tag_secret: str = "", ours: OwnAddresses = OwnAddresses()
    ) -> None:
        found = {s for s in secrets if len(s) >= _MIN_SECRET}
        self.secrets = sorted(found, key=len, reverse=True)  # a longer one first
        self.tag_secret = tag_secret
        self.ours = ours

    @classmethod
    def from_settings(cls, settings: Settings) -> Redactor:
        return cls(
            secret_values(settings),
            tag_secret=settings.secret,
            ours=OwnAddresses.from_settings(settings),
        )

    def secrets_only(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, HIDDEN)
        return text

    def text(self, text: str) -> str:
        """No secret and no address in clear: what logs, spans and CLI output get."""
        cleaned = self.secrets_only(text)
        return addresses(cleaned, secret=self.tag_secret, ours=self.ours)

    def known(self, text: str, known: Iterable[str]) -> str:
        """:meth:`text`, the ``known`` addresses tagged apart (:func:`known_addresses`)."""
        cleaned = self.secrets_only(text)
        return known_addresses(cleaned, known, secret=self.tag_secret, ours=self.ours)


def secret_values(settings: Settings) -> list[str]:
    """Every secret the settings hold, as it could appear in a message."""
    values = [
        settings.secret,
        *settings.previous_secret_list,
        settings.postmark_server_token,
        settings.resend_api_key,
        settings.postmark_webhook_auth,
        settings.postmark_webhook_auth.partition(":")[2],
        settings.resend_webhook_secret,
        settings.resend_webhook_secret.removeprefix("whsec_"),
    ]
    for url in (
        settings.smtp_url,
        settings.failover_smtp_url,
        settings.database_url,
        settings.listen_database_url,
        settings.redis_url,
        settings.broker_url,
    ):
        # Each node of a RabbitMQ cluster's list is a URL of its own.
        for node in split_nodes(url):
            values.extend(url_credentials.secrets(node))
    values.extend(_key_material(settings.dkim_private_key))
    return [v for v in values if v]


def _key_material(value: str) -> list[str]:
    """The key as given, and each line of its body: a log may quote any part."""
    if not value:
        return []
    body = value.replace("\\n", "\n")
    lines = [line.strip().strip("'\"") for line in body.splitlines()]
    joined = "".join(line for line in lines if line and not line.startswith("-----"))
    found = [value, value.strip(), joined]
    found += [line for line in lines if len(line) >= 16 and not line.startswith("-----")]
    # Key bodies travel re-wrapped too: any 24 characters of it are key material.
    found += [joined[i : i + 24] for i in range(0, max(len(joined) - 24, 0), 12)]
    return found


class _LogFilter(logging.Filter):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self.redactor.text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.text(record.stack_info)
        return True


def install(settings: Settings, logger: logging.Logger | None = None) -> None:
    """Redact every record that reaches a handler of ``logger`` (the root logger)."""
    target = logger or logging.getLogger()
    log_filter = _LogFilter(Redactor.from_settings(settings))
    for handler in target.handlers:
        for old in [f for f in handler.filters if isinstance(f, _LogFilter)]:
            handler.removeFilter(old)
        handler.addFilter(log_filter)
