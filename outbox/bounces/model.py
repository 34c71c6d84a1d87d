"""Result types of the bounce parser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Klass = Literal["hard", "soft", "complaint", "other"]


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
