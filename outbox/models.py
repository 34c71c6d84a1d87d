"""Plain values shared by the pure core and the I/O edges."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    """The life of an outbox row; the same words are stored in SQL."""

    PENDING = "pending"  # waiting for next_attempt_at, owned by Postgres
    QUEUED = "queued"  # claimed by a relay and published to the broker
    SENDING = "sending"  # taken by a worker, SMTP conversation under way
    SENT = "sent"  # the relay or provider accepted it (2yz)
    FAILED = "failed"  # permanently refused (5yz)
    DEAD = "dead"  # retries or age exhausted
    HELD = "held"  # parked for an operator after an uncertain delivery
    SUPPRESSED = "suppressed"  # the recipient was on the suppression list: never sent
    CANCELLED = "cancelled"  # called off before any attempt (outbox.cancel): never sent


class Priority(StrEnum):
    HIGH = "high"
    BULK = "bulk"


class Verdict(StrEnum):
    """What one attempt means for its row."""

    SENT = "sent"
    RETRY = "retry"
    FAILED = "failed"
    UNCERTAIN = "uncertain"  # the relay may have accepted it: the final reply never came


class Stage(StrEnum):
    """How far an SMTP conversation got; decides what a failure means."""

    CONNECT = "connect"
    GREETING = "greeting"
    EHLO = "ehlo"
    STARTTLS = "starttls"
    AUTH = "auth"
    MAIL = "mail"
    RCPT = "rcpt"
    DATA = "data"  # the DATA command, before any message byte
    BODY = "body"  # sending the message bytes; the end-of-data dot not yet sent
    FINAL_REPLY = "final_reply"  # after the end-of-data dot: the relay may have accepted
    # HTTP providers (outbox.transports.http) break off at CONNECT or at one of these.
    REQUEST = "request"  # writing the request: the provider cannot have accepted it
    RESPONSE = "response"  # the whole request was sent: the provider may have accepted

    @property
    def is_session(self) -> bool:
        """A refusal here is about the connection or credentials, not this message."""
        return self in _SESSION_STAGES


_SESSION_STAGES = frozenset({Stage.CONNECT, Stage.GREETING, Stage.EHLO, Stage.STARTTLS, Stage.AUTH})


@dataclass(frozen=True, slots=True)
class RecipientReply:
    """What the peer said to one recipient's RCPT TO, in a message with cc or bcc."""

    address: str
    kind: str  # to | cc | bcc
    code: int | None
    text: str


@dataclass(frozen=True, slots=True)
class Reply:
    """What a transport observed for one attempt.

    Either the peer answered (``code`` set) or the exchange broke off
    (``code`` is None and ``error`` names what happened) at ``stage``.
    """

    stage: Stage
    code: int | None = None
    text: str = ""
    error: str | None = None  # e.g. "timeout", "connection refused", "tls"
    via: str | None = None  # set by a failover transport: which of its two answered
    # With cc or bcc over SMTP: each recipient's RCPT reply. Those accepted got
    # the message with the final reply; a refused cc or bcc is left out of it.
    recipients: tuple[RecipientReply, ...] = ()


@dataclass(frozen=True, slots=True)
class HttpReply(Reply):
    """What an HTTP provider answered: ``code`` is the HTTP status.

    The provider-specific reading of the response body (its message id, its
    error codes) is done by the transport; :func:`outbox.delivery.classify.classify_http`
    applies the rules every provider shares.
    """

    provider_message_id: str | None = None
    retry_after: float | None = None  # seconds, from the Retry-After header
    # The request carried an idempotency key the provider de-duplicates on, so
    # sending it again after a lost response cannot deliver twice.
    idempotent: bool = False
    # A 4xx the provider documents as being about our account, credentials or a
    # concurrent request rather than this message: retried, like SMTP's
    # refusals of the session.
    transient: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    """The classification of a reply."""

    verdict: Verdict
    reason: str
    enhanced_status: str | None = None
    provider_message_id: str | None = None
    greylisted: bool = False
    retry_after: float | None = None  # seconds the peer asked us to wait (HTTP Retry-After)
