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

A token proves only that its sender saw the message, so it may do no more than
every reader of that token may be trusted with
(:mod:`outbox.message.return_path`):

- a **bounce** token (the Return-Path) acts for the row's `to`; but when the
  row also went to cc or bcc, every copy carried the same Return-Path (one SMTP
  transaction, one envelope sender), so a report to it is recorded and acted
  on never: a colleague in cc could otherwise stop the customer's login codes;
- an **unsubscribe** token (a newsletter's List-Unsubscribe mailto, shown to
  readers) may unsubscribe, scope ``bulk``, and nothing more; a bounce sent to it
  is recorded only;
- a **previous** release's token served both places: it acts as a bounce token
  for a login code, as an unsubscribe token for a newsletter.

And a bounce that names another recipient than the row's `to` (or one of its
copies) is about somebody else: recorded, not acted on.

A third proof needs no report: the receiving server refusing the address at
RCPT TO, in our own session, as non-existent (X.1.1, X.1.2 …;
:func:`outbox.delivery.classify.refuses_address`). The worker suppresses it as
a hard bounce when it records the attempt.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from outbox.bounce_parsing import BounceResult
from outbox.message.return_path import Kind

Via = Literal["verp", "message_id", "provider_id", "none"]
# The links that authorise effects; "message_id" is recorded, not trusted.
TRUSTED: frozenset[Via] = frozenset({"verp", "provider_id"})
# What a trusted link may do: everything, unsubscribe from newsletters, or nothing.
Rights = Literal["all", "unsubscribe", "record"]


@dataclass(frozen=True, slots=True)
class Link:
    via: Via
    outbox_id: int | None = None
    recipient: str | None = None  # of the linked row
    forged: bool = False
    # The row's cc and bcc, lower case: a report about one of them proves
    # nothing about the row's recipient, and is recorded without effect.
    copies: frozenset[str] = frozenset()
    proof: Kind = "bounce"  # of a "verp" link: the kind of token that proved it
    bulk: bool = False  # the row is a newsletter (it carried List-Unsubscribe)


@dataclass(frozen=True, slots=True)
class Effect:
    """Record ``klass`` on the linked row; suppress ``address`` when ``suppress`` is set."""

    klass: Literal["hard", "soft", "complaint"]
    address: str
    suppress: Literal["hard_bounce", "complaint", "soft_streak", "unsubscribe"] | None
    reason: str  # for the row's history
    scope: Literal["all", "bulk"] = "all"


def rights(link: Link) -> Rights:
    """What the proof behind a link allows (see the module's notes)."""
    if link.forged or link.via not in TRUSTED or link.outbox_id is None or not link.recipient:
        return "record"
    if link.via != "verp":
        return "all"  # a provider's authenticated word about the message it sent
    if link.proof == "unsubscribe":
        return "unsubscribe"
    if link.copies:
        return "record"  # every copy's reader saw this Return-Path
    if link.proof == "previous" and link.bulk:
        return "unsubscribe"  # it was the newsletter's mailto as well
    return "all"


def effects(link: Link, results: Sequence[BounceResult]) -> list[Effect]:
    allowed = rights(link)
    if allowed == "record":
        return []
    assert link.recipient is not None  # rights() says "record" without one
    found: list[Effect] = []
    for result in results:
        if result.klass == "other" or result.reason == "delayed":
            continue  # auto-replies and delay notices are not verdicts
        if result.recipient and result.recipient.lower() in link.copies:
            continue  # about a cc or bcc of the row, not its recipient
        if result.klass != "complaint" and not _names(result.recipient, link.recipient):
            continue  # a bounce of somebody else: recorded, not acted on
        if allowed == "unsubscribe":
            if result.klass == "complaint":
                found.append(_unsubscribe(link.recipient))
            continue  # a bounce cannot come by the unsubscribe address
        status = f" {result.status}" if result.status else ""
        reason = f"{result.klass} bounce{status} ({link.via})"
        if result.klass == "complaint" and result.reason == "unsubscribe":
            # A reply asking to stop (the List-Unsubscribe mailto): newsletters only.
            found.append(_unsubscribe(link.recipient))
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


def _unsubscribe(recipient: str) -> Effect:
    """A request to stop (the List-Unsubscribe mailto): newsletters only."""
    return Effect("complaint", recipient, "unsubscribe", "unsubscribe by mail", "bulk")


def _names(named: str | None, recipient: str) -> bool:
    """Whether a bounce names the row's recipient: a bounce that names nobody
    (a plain-text notice) is taken to be about the row's one `to`."""
    return not named or _comparable(named) == _comparable(recipient)


def _comparable(address: str) -> str:
    local, _, domain = address.strip().lower().rpartition("@")
    with contextlib.suppress(UnicodeError):  # a domain IDNA cannot spell: as written
        domain = domain.encode("idna").decode("ascii")
    return f"{local}@{domain}"
