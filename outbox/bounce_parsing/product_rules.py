"""Wording one receiving product documents for "this address does not exist".

Each rule names its product and where the format is described; some hold only
for reports from that product's own hosts. They back up weak or doubted
unknown-user wording in :mod:`outbox.bounce_parsing.verdict` (rules D1 and D4-D6
in outbox/bounce_parsing/README.md); the phrase tables by reason are
:mod:`outbox.bounce_parsing.reasons`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Wording that states a user is unknown without saying why; some carriers answer
# this way after DATA when their content filter refuses the sender.
UNKNOWN_USER_WORDING = re.compile(
    r"user unknown|unknown user|no such user|user not (?:exist|found)|unknown recipient", re.I
)


@dataclass(frozen=True)
class ProductRule:
    """Wording one product documents or emits for "this address does not exist".

    Such a rule is allowed only for a documented format of that product (``source``
    says where it is described).  ``hosts``, when set, limits the rule to reports
    from that product's own hosts or recipient domains.  Each one backs up weak or
    doubted unknown-user wording (rules D1 and D4-D6 in outbox/bounce_parsing/README.md).
    """

    product: str
    source: str
    pattern: re.Pattern[str]
    hosts: re.Pattern[str] | None = None

    def says_gone(self, texts: Sequence[str], hosts: Sequence[str]) -> bool:
        if self.hosts is not None and not any(self.hosts.search(h) for h in hosts):
            return False
        return any(self.pattern.search(t) for t in texts)


def _product(product: str, source: str, pattern: str, hosts: str | None = None) -> ProductRule:
    return ProductRule(
        product, source, re.compile(pattern, re.I), re.compile(hosts, re.I) if hosts else None
    )


# A receiving system's own verdict that the address does not exist, whatever SMTP
# stage (if any) it came from: a local delivery agent's report, a notice's headline,
# a provider's documented reply.  bench/bench_bounce_generalization.py leaves out the
# rules of a product when it scores that product's messages.
ADDRESS_VERDICTS: tuple[ProductRule, ...] = (
    _product("sendmail", "mail.local(8) diagnostics", r"\bmail\.local:\s*unknown user"),
    _product(
        "gmail",
        "Gmail bounce notice headline (support.google.com/mail/answer/6596)",
        r"\baddress (?:not found|couldn'?t be found|could not be found)",
    ),
    _product(
        "exchange",
        "Exchange 5.5-2003 NDR text (Microsoft KB 284204)",
        r"\brecipient name is not recognized",
    ),
    _product(
        "domino",
        "Lotus Domino delivery failure report",
        r"\bnot listed in (?:the )?(?:domino |public )?(?:address )?(?:directory|book)",
    ),
    _product(
        "interscan",
        "Trend Micro InterScan MSS undeliverable notice",
        r"\bcheck if (?:the )?address is correct",
    ),
    _product(
        "yahoo",
        "Yahoo SMTP error codes ('554 delivery error: dd This user doesn't have ... account')",
        r"\bdelivery error: dd\b",
    ),
    _product(
        "office365",
        "Exchange Online directory-based edge blocking (550 5.4.1 ... Access denied. AS(...))",
        r"\brecipient address rejected:\s*access denied\.?\s*as\(",
    ),
    _product(
        "postfix",
        "postconf(5) local_recipient_maps, virtual_mailbox_maps, relay_recipient_maps",
        r"\buser unknown in (?:local recipient|virtual mailbox|virtual alias|relay recipient)"
        r" table\b",
    ),
    _product(
        "gateway",
        "SMTP gateways' final-delivery error (RFC 1891-era wording)",
        r"\binvalid final delivery userid",
    ),
    # Outlook.com's consumer servers reply RFC 5321's generic "550 Requested action
    # not taken: mailbox unavailable" for addresses that do not exist; only from
    # their own hosts.
    _product(
        "outlook.com",
        "Outlook.com postmaster troubleshooting (SMTP error 550 mailbox unavailable)",
        r"requested action not taken: mailbox unavailable",
        r"(?:^|\.)(?:hotmail|outlook|live|msn)\.com\.?$",
    ),
    # au (KDDI) names the mailbox when it does not exist ("550 <a@ezweb.ne.jp>: User
    # unknown") and leaves it out when its filter refuses the sender.
    _product(
        "kddi",
        "au (KDDI) e-mail rejection replies",
        r"\b550:? <[^<>@\s]+@[^<>\s]+>: user unknown",
        r"(?:^|\.)(?:ezweb\.ne\.jp|au\.com)\.?$",
    ),
)


def receiver_says_gone(texts: Sequence[str], hosts: Sequence[str]) -> bool:
    """Does any product rule read the texts as the receiver's "no such address"?"""
    return any(rule.says_gone(texts, hosts) for rule in ADDRESS_VERDICTS)


# "550 : User unknown" with the mailbox left out is what the au/EZweb (KDDI) servers
# answer when the recipient's own sender filter refuses the message (product "kddi").
FILTER_UNKNOWN_USER = re.compile(r"(?:^|\s)\d{3}\s+:\s*user unknown", re.I)
