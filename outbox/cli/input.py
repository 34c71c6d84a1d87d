"""What an operator names on the command line, read into query parameters (pure).

Durations (``30d``), points in time (``--since 2h`` or an ISO date), one email
(key, Message-ID with or without its brackets, row id, provider id), a set of
emails to requeue, and a suppression's reason. Each reader raises
:class:`~outbox.errors.ConfigError` with what was expected: bad input writes
nothing.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from outbox.errors import ConfigError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_BIGINT_MAX = 2**63 - 1

# The statuses an operator may send again: parked, never to move by themselves.
REQUEUEABLE = ("failed", "dead", "held")
# Codes written by bounces, complaints and unsubscribes; an operator's own text
# may be any one line.
KNOWN_REASONS = ("hard_bounce", "soft_bounces", "complaint", "unsubscribe", "manual")
MAX_REASON_LENGTH = 200


def parse_duration(text: str) -> dt.timedelta:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"1w"``, ``"45s"``, or a sum: ``"1d12h"``."""
    compact = text.strip().lower().replace(" ", "")
    if not compact:
        raise ConfigError("a duration is needed, e.g. 30d, 12h or 90m")
    seconds = 0.0
    position = 0
    for match in _DURATION.finditer(compact):
        if match.start() != position:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(compact):
        raise ConfigError(
            f"{text!r} is not a duration: a number and a unit (s, m, h, d, w), e.g. 30d"
        )
    if seconds <= 0:
        raise ConfigError(f"{text!r} is not a positive duration")
    return dt.timedelta(seconds=seconds)


def parse_since(text: str, now: dt.datetime) -> dt.datetime:
    """A duration back from ``now`` (``2h``), or an ISO date or time (UTC unless it says)."""
    try:
        return now - parse_duration(text)
    except ConfigError:
        pass
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(
            f"--since {text!r} is neither a duration (2h, 7d) nor an ISO date (2026-11-30)"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def email_ref(ref: str) -> dict[str, Any]:
    """Parameters that find one email by whatever names it.

    ``ref`` is compared with the key, the Message-ID (brackets added when left
    out), the provider's id and, when it is a number, the row id.
    """
    text = ref.strip()
    if not text:
        raise ConfigError("an email is named by its key, Message-ID, row id or provider id")
    bracketed = text if text.startswith("<") else f"<{text}>"
    row_id = int(text) if text.isdigit() and int(text) <= _BIGINT_MAX else None
    return {"ref": text, "bracketed": bracketed, "row_id": row_id}


@dataclass(frozen=True, slots=True)
class RequeueFilter:
    """Which parked emails to send again; every part narrows the set."""

    statuses: tuple[str, ...]
    template: str | None = None
    since: dt.datetime | None = None
    to_domain: str | None = None

    def params(self) -> dict[str, Any]:
        """The parameters of the requeue queries (``requeue_batch``, ``requeue_count``)."""
        return {
            "statuses": list(self.statuses),
            "template": self.template,
            "since": self.since,
            "to_domain": self.to_domain,
        }


def requeue_filter(
    *,
    failed: bool = False,
    dead: bool = False,
    held: bool = False,
    template: str | None = None,
    since: str | None = None,
    to_domain: str | None = None,
    now: dt.datetime,
) -> RequeueFilter:
    """The filter the options of ``outbox requeue`` describe."""
    statuses = tuple(
        s for s, chosen in zip(REQUEUEABLE, (failed, dead, held), strict=True) if chosen
    )
    if not statuses:
        raise ConfigError("say which emails: --failed, --dead and/or --held (or one KEY)")
    domain = None
    if to_domain is not None:
        domain = to_domain.strip().lower().lstrip("@").rstrip(".")
        if not domain or "@" in domain or any(c.isspace() for c in domain):
            raise ConfigError(f"--to-domain {to_domain!r} is not a domain (example.com)")
        domain = domain.encode("idna").decode("ascii") if not domain.isascii() else domain
    name = template.strip() if template is not None else None
    if name == "":
        raise ConfigError("--template needs a template name")
    return RequeueFilter(
        statuses=statuses,
        template=name,
        since=parse_since(since, now) if since is not None else None,
        to_domain=domain,
    )


def suppression_reason(text: str) -> str:
    """An operator's reason for a suppression: a known code or one line of their own."""
    reason = " ".join(text.split())
    if not reason:
        raise ConfigError("--reason needs some text")
    if len(reason) > MAX_REASON_LENGTH:
        raise ConfigError(f"--reason is longer than {MAX_REASON_LENGTH} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in reason):
        raise ConfigError("--reason contains control characters")
    return reason


def erasure_pattern(address: str) -> str:
    """A Postgres regular expression that matches ``address`` literally (any case)."""
    text = address.strip()
    if "@" not in text or any(c.isspace() for c in text):
        raise ConfigError("outbox forget needs an email address")
    # In Postgres's regular expressions a backslash makes any non-alphanumeric literal.
    return "".join(c if c.isalnum() else "\\" + c for c in text)
