"""Result types of the bounce parser."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Klass = Literal["hard", "soft", "complaint", "other"]


class Reason(StrEnum):
    """Why a recipient failed (or complained): the field's usual bounce taxonomy.

    Each member compares equal to its string value, so consumers that stored or
    matched the strings keep working.  :attr:`klass` is the class a *final* failure
    with this reason gets; a temporary (4.x.x) or delayed failure is always ``soft``
    (see the decision table in ``outbox/bounce_parsing/README.md``).  :attr:`suppresses`
    says whether one such event stops mail to the address on its own; soft reasons
    count towards the soft-bounce streak instead.
    """

    # hard: the address itself is dead
    USER_UNKNOWN = "user_unknown"
    HOST_UNKNOWN = "host_unknown"
    BAD_ADDRESS = "bad_address"
    HAS_MOVED = "has_moved"
    NO_MAIL_HOST = "no_mail_host"
    # soft: the mailbox exists (or may), this message or this sender was refused
    MAILBOX_FULL = "mailbox_full"
    MESSAGE_TOO_BIG = "message_too_big"
    SUSPENDED = "suspended"
    SPAM = "spam"
    VIRUS = "virus"
    CONTENT = "content"
    BLOCKED = "blocked"
    POLICY = "policy"
    AUTHENTICATION = "authentication"
    RELAY_DENIED = "relay_denied"
    SENDER_REJECTED = "sender_rejected"
    RATE_LIMITED = "rate_limited"
    FILTERED = "filtered"
    UNCONFIRMED_USER = "unconfirmed_user"
    # soft: transport and system conditions
    EXPIRED = "expired"
    DELAYED = "delayed"
    NETWORK = "network"
    SYSTEM = "system"
    PROTOCOL = "protocol"
    UNKNOWN = "unknown"
    # complaint: the recipient asked us to stop
    COMPLAINT = "complaint"
    UNSUBSCRIBE = "unsubscribe"
    # other: never emitted by parse_bounce (it returns [] for these), named for callers
    AUTO_REPLY = "auto_reply"
    NOT_A_BOUNCE = "not_a_bounce"

    @property
    def klass(self) -> Klass:
        return _CLASS.get(self, "soft")

    @property
    def suppresses(self) -> bool:
        return self.klass in ("hard", "complaint")


_CLASS: dict[Reason, Klass] = {
    Reason.USER_UNKNOWN: "hard",
    Reason.HOST_UNKNOWN: "hard",
    Reason.BAD_ADDRESS: "hard",
    Reason.HAS_MOVED: "hard",
    Reason.NO_MAIL_HOST: "hard",
    Reason.COMPLAINT: "complaint",
    Reason.UNSUBSCRIBE: "complaint",
    Reason.AUTO_REPLY: "other",
    Reason.NOT_A_BOUNCE: "other",
}

HARD_REASONS = frozenset(r for r in Reason if r.klass == "hard")


@dataclass(frozen=True)
class BounceResult:
    """One failed (or complaining) recipient found in a bounce, complaint or notice.

    ``klass`` is ``hard`` only when the address itself is known to be dead; every
    temporary failure and every policy refusal is ``soft``; feedback reports are
    ``complaint``.  ``status`` is an RFC 3463 enhanced status code such as ``5.1.1``.
    """

    klass: Klass
    recipient: str | None
    status: str | None = None
    diagnostic: str | None = None
    original_message_id: str | None = None
    reporting_mta: str | None = None
    reason: str | None = None
    verp_token: str | None = None

    def to_json(self) -> dict[str, str | None]:
        """Plain dict for JSON output; ``klass`` is exposed as ``class``."""
        return {
            "class": self.klass,
            "recipient": self.recipient,
            "status": self.status,
            "diagnostic": self.diagnostic,
            "original_message_id": self.original_message_id,
            "reporting_mta": self.reporting_mta,
            "reason": self.reason,
            "verp_token": self.verp_token,
        }


@dataclass
class Failure:
    """Raw per-recipient facts collected by a format reader, before judgement.

    ``diagnostic`` is the remote server's answer (or the MTA's own reason) for this
    recipient; ``context`` is surrounding human-readable text used when the diagnostic
    alone says nothing recognisable.
    """

    recipient: str | None
    status: str | None = None
    diagnostic: str = ""
    context: str = ""
    action: str | None = None
    remote_mta: str | None = None
    reporting_mta: str | None = None
    command: str | None = None
    sole: bool = False  # the report concerns this recipient alone
