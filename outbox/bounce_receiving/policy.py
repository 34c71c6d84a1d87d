"""What a parsed bounce does to the outbox (pure).

Trust decides everything: an address is suppressed only on the word of a
report that proves it is about a message we sent to it, with something an
outsider can neither compute nor copy from a public place. Two things prove
it: a VERP token that verifies (an HMAC under OUTBOX_SECRET, in the return
path of one row only), and a provider's webhook call, authenticated before it
is stored, naming the row by the provider's own id. A Message-ID proves
nothing: it travels in every copy, every reply and every forward of the
message, and anyone can quote it in a made-up DSN or "unsubscribe" mail. A
report linked only by its Message-ID is recorded against its row (it shows in
``outbox show``) and acted on never. A token that fails to verify is a
forgery: stored and counted, never acted on.

A third proof needs no report: the receiving server refusing the address at
RCPT TO, in our own session, as non-existent (X.1.1, X.1.2 …;
:func:`outbox.delivery.classify.refuses_address`). The worker suppresses it as
a hard bounce when it records the attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from outbox.bounce_parsing import BounceResult

Via = Literal["verp", "message_id", "provider_id", "none"]
# The links that authorise effects; "message_id" is recorded, not trusted.
TRUSTED: frozenset[Via] = frozenset({"verp", "provider_id"})


@dataclass(frozen=True, slots=True)
class Link:
    via: Via
    outbox_id: int | None = None
    recipient: str | None = None  # of the linked row
    forged: bool = False
    # The row's cc and bcc, lower case: a report about one of them proves
    # nothing about the row's recipient, and is recorded without effect.
    copies: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Effect:
    """Record ``klass`` on the linked row; suppress ``address`` when ``suppress`` is set."""

    klass: Literal["hard", "soft", "complaint"]
    address: str
    suppress: Literal["hard_bounce", "complaint", "soft_streak", "unsubscribe"] | None
    reason: str  # for the row's history
    scope: Literal["all", "bulk"] = "all"


def effects(link: Link, results: Sequence[BounceResult]) -> list[Effect]:
    if link.forged or link.via not in TRUSTED or link.outbox_id is None or not link.recipient:
        return []
    found: list[Effect] = []
    for result in results:
        if result.klass == "other" or result.reason == "delayed":
            continue  # auto-replies and delay notices are not verdicts
        if result.recipient and result.recipient.lower() in link.copies:
            continue  # about a cc or bcc of the row, not its recipient
        status = f" {result.status}" if result.status else ""
        reason = f"{result.klass} bounce{status} ({link.via})"
        if result.klass == "complaint" and result.reason == "unsubscribe":
            # A reply asking to stop (the List-Unsubscribe mailto): newsletters only.
            found.append(
                Effect("complaint", link.recipient, "unsubscribe", "unsubscribe by mail", "bulk")
            )
        elif result.klass == "complaint":
            found.append(
                Effect("complaint", link.recipient, "complaint", f"complaint ({link.via})")
            )
        elif result.klass == "hard":
            found.append(Effect("hard", link.recipient, "hard_bounce", reason))
        else:
            # Suppressed only if the streak check says so (it needs the row history).
            found.append(Effect("soft", link.recipient, "soft_streak", reason))
    return found


def soft_streak_reached(recent: Sequence[str | None], limit: int) -> bool:
    """``recent``: bounce verdicts of the latest rows sent to an address, newest first.

    True when the last ``limit`` sends all soft-bounced: consecutive soft
    bounces with no delivery between (a send that did not bounce breaks it).
    """
    return len(recent) >= limit and all(verdict == "soft" for verdict in recent[:limit])
