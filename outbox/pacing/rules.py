"""Pacing rules (pure): which receiver a recipient belongs to, the rate it
takes, and which replies say "slow down".

Receivers throttle per sending IP or account, not per domain name: gmail.com
and googlemail.com are one receiver, as are Outlook's and Yahoo's many
domains. A limit written for any domain of a group applies to the group.
The shared counters that enforce these rates live in :mod:`outbox.pacing.pacer`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from outbox.errors import ConfigError
from outbox.models import HttpReply, Reply, Stage

# The first domain of each group names it.
_BUILTIN_GROUPS: tuple[tuple[str, ...], ...] = (
    ("gmail.com", "googlemail.com"),
    (
        "outlook.com",
        "hotmail.com",
        "live.com",
        "msn.com",
        "hotmail.co.uk",
        "hotmail.fr",
        "hotmail.de",
        "hotmail.it",
        "live.co.uk",
        "live.fr",
        "live.de",
        "outlook.de",
        "outlook.fr",
    ),
    (
        "yahoo.com",
        "ymail.com",
        "rocketmail.com",
        "yahoo.co.uk",
        "yahoo.fr",
        "yahoo.de",
        "aol.com",
    ),
    ("icloud.com", "me.com", "mac.com"),
    ("yandex.ru", "yandex.com", "ya.ru", "yandex.by", "yandex.kz", "yandex.ua"),
    ("mail.ru", "inbox.ru", "list.ru", "bk.ru"),
    ("gmx.net", "gmx.de", "gmx.at", "gmx.ch", "gmx.com"),
)

GLOBAL = "*total*"  # the key of the global send rate
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(\d*)\s*([smh])\s*$")


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` sends per ``seconds``, evenly spaced (a burst of one)."""

    count: float
    seconds: float

    @property
    def interval(self) -> float:
        """Seconds between two sends at this rate."""
        return self.seconds / self.count

    def __str__(self) -> str:
        return f"{self.count:g}/{self.seconds:g}s"


def parse_rate(text: str, *, setting: str) -> Rate:
    """``"20/s"``, ``"600/m"``, ``"5/10s"``, ``"1000/h"``."""
    match = _RATE.match(text)
    if not match:
        raise ConfigError(f"{setting}: {text!r} is not a rate such as 20/s, 600/m or 1000/h")
    count, multiple, unit = float(match[1]), match[2], match[3]
    seconds = (float(multiple) if multiple else 1.0) * _UNITS[unit]
    if count <= 0 or seconds <= 0:
        raise ConfigError(f"{setting}: {text!r} must be above zero")
    return Rate(count, seconds)


@dataclass(frozen=True)
class Receivers:
    """Domain → the receiver (group) it belongs to."""

    groups: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, extra: str = "") -> Receivers:
        """The built-in groups plus ``OUTBOX_DOMAIN_GROUPS``.

        Format: ``gmail.com=acme.com acme.co.uk; outlook.com=contoso.com``,
        for domains whose mail a big receiver hosts (Google Workspace,
        Microsoft 365) and that share its limits.
        """
        groups = {domain: group[0] for group in _BUILTIN_GROUPS for domain in group}
        for entry in filter(None, (part.strip() for part in extra.split(";"))):
            head, sep, members = entry.partition("=")
            name = groups.get(head.strip().lower(), head.strip().lower())
            if not sep or not name or not members.split():
                raise ConfigError(f"OUTBOX_DOMAIN_GROUPS: {entry!r} is not GROUP=domain domain...")
            for domain in members.replace(",", " ").split():
                groups[domain.lower()] = name
        return cls(groups)

    def of(self, recipient: str) -> str:
        domain = domain_of(recipient)
        return self.groups.get(domain, domain)

    def knows(self, domain: str) -> bool:
        """The domain's receiver is known without asking DNS."""
        return domain in self.groups


def domain_of(recipient: str) -> str:
    return recipient.rpartition("@")[2].lower().rstrip(".")


# Mail exchangers of the big receivers, by host name suffix: a domain whose
# mail Google Workspace or Microsoft 365 takes shares Gmail's or Outlook's limits.
_MX_SUFFIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    ((".google.com", ".googlemail.com"), "gmail.com"),
    ((".protection.outlook.com", ".outlook.com", ".hotmail.com"), "outlook.com"),
    ((".yahoodns.net", ".yahoo.com"), "yahoo.com"),
    ((".icloud.com", ".me.com"), "icloud.com"),
    ((".yandex.ru", ".yandex.net"), "yandex.ru"),
    ((".mail.ru",), "mail.ru"),
    ((".gmx.net",), "gmx.net"),
)


def receiver_of_mx(host: str) -> str:
    """The receiver behind a mail exchanger: a big provider's name, else the
    exchanger's parent domain, so the domains one hoster serves pace as one."""
    host = host.lower().rstrip(".")
    for suffixes, receiver in _MX_SUFFIXES:
        if host.endswith(suffixes):
            return receiver
    labels = host.split(".")
    return ".".join(labels[1:]) if len(labels) > 2 else host


@dataclass(frozen=True)
class RateLimits:
    """``OUTBOX_RATE_LIMITS`` and ``OUTBOX_SEND_RATE`` read together."""

    receivers: Receivers
    per_receiver: Mapping[str, Rate]
    default: Rate | None = None  # the ``*`` entry: every other receiver
    total: Rate | None = None  # all sends of all workers

    @classmethod
    def parse(cls, limits: str = "", total: str = "", groups: str = "") -> RateLimits:
        """``gmail.com=20/s, outlook.com=10/s, *=50/s``."""
        receivers = Receivers.parse(groups)
        per_receiver: dict[str, Rate] = {}
        default = None
        for entry in filter(None, (part.strip() for part in limits.split(","))):
            name, sep, rate_text = entry.partition("=")
            name = name.strip().lower()
            if not sep or not name:
                raise ConfigError(f"OUTBOX_RATE_LIMITS: {entry!r} is not DOMAIN=RATE")
            rate = parse_rate(rate_text, setting="OUTBOX_RATE_LIMITS")
            if name == "*":
                default = rate
                continue
            group = receivers.of(f"@{name}")
            if group in per_receiver:
                raise ConfigError(f"OUTBOX_RATE_LIMITS: {group} is limited twice (via {name})")
            per_receiver[group] = rate
        total_rate = parse_rate(total, setting="OUTBOX_SEND_RATE") if total.strip() else None
        return cls(receivers, per_receiver, default, total_rate)

    @property
    def enabled(self) -> bool:
        return bool(self.per_receiver) or self.default is not None or self.total is not None

    def for_receiver(self, group: str) -> tuple[tuple[str, Rate], ...]:
        """The (key, rate) pairs one send to ``group`` must fit, its own last."""
        rate = self.per_receiver.get(group, self.default)
        keys: list[tuple[str, Rate]] = []
        if self.total is not None:
            keys.append((GLOBAL, self.total))
        if rate is not None:
            keys.append((group, rate))
        return tuple(keys)


# Rate-limit replies. Gmail: 421 4.7.0 / 4.7.28 "unusual rate"; Microsoft:
# 451 4.7.650 "temporarily rate limited"; Yahoo: 421 4.7.0 [TSS04] "temporarily
# deferred due to unexpected volume"; many relays: "too many connections".
_THROTTLE_TEXT = re.compile(
    r"rate.?limit|too many (?:connections|concurrent|messages|sessions)|unusual rate|"
    r"unexpected volume|sending rate|exceeded .*(?:rate|limit|quota)|throttl|slow down|"
    r"\bTSS0\d\b|\bTS0\d\b",
    re.IGNORECASE,
)
_THROTTLE_STATUS = ("4.7.28", "4.7.650")
_RECIPIENT_STAGES = frozenset({Stage.RCPT, Stage.DATA, Stage.BODY, Stage.FINAL_REPLY})


def throttled_scope(reply: Reply) -> str | None:
    """``"receiver"`` when the reply says the recipient's receiver is taking
    mail too fast, ``"sender"`` when our peer (the relay or the provider's
    API) is throttling all of our sends, None when it is no throttle at all.

    A refusal at connect/greeting/EHLO/MAIL comes from the peer we talk to,
    whoever the recipient; at RCPT and after, it is about this recipient.
    """
    if isinstance(reply, HttpReply):
        return "sender" if reply.code == 429 else None
    code, text = reply.code, reply.text
    if code is None or not 400 <= code < 500:
        return None
    if not (_THROTTLE_TEXT.search(text) or text.lstrip().startswith(_THROTTLE_STATUS)):
        # A bare 421 closes the session for an unstated reason (overload, a
        # restart): easing off the peer for a while is the safe reading.
        return "sender" if code == 421 else None
    return "receiver" if reply.stage in _RECIPIENT_STAGES else "sender"
