"""Turn one recipient's raw failure facts into class, reason and status.

The rule that matters most: ``hard`` only when the address itself is known dead.
A policy refusal (block list, spam, authentication, content, rate, quota, size,
relaying, sender problems) is ``soft`` whatever its status code says, and so is every
temporary (4.x.x) failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from outbox.bounces import reasons, status
from outbox.bounces.model import Failure, Klass

HARD_REASONS = frozenset(
    {"user_unknown", "host_unknown", "bad_address", "has_moved", "no_mail_host"}
)
NOT_A_FAILURE = frozenset({"delivered", "relayed", "expanded", "deliverable"})
_SENDER_STAGES = frozenset({"mail", "helo", "connect"})

# RFC 3463 section 3 subject/detail -> (reason, address-is-dead).
_BY_STATUS: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    (re.compile(r"^\d\.1\.1$"), "user_unknown", True),
    (re.compile(r"^\d\.1\.2$"), "host_unknown", True),
    (re.compile(r"^\d\.1\.3$"), "bad_address", True),
    (re.compile(r"^\d\.1\.6$"), "has_moved", True),
    (re.compile(r"^\d\.1\.10$"), "no_mail_host", True),
    (re.compile(r"^\d\.1\.[78]$"), "sender_rejected", False),
    (re.compile(r"^\d\.2\.1$"), "suspended", False),
    (re.compile(r"^\d\.2\.2$"), "mailbox_full", False),
    (re.compile(r"^\d\.2\.3$"), "message_too_big", False),
    (re.compile(r"^\d\.3\.4$"), "message_too_big", False),
    (re.compile(r"^\d\.3\.\d+$"), "system", False),
    (re.compile(r"^\d\.4\.7$"), "expired", False),
    (re.compile(r"^\d\.4\.\d+$"), "network", False),
    (re.compile(r"^\d\.5\.\d+$"), "protocol", False),
    (re.compile(r"^\d\.6\.\d+$"), "content", False),
    (re.compile(r"^\d\.7\.(?:2[0-6]|8|9)$"), "authentication", False),
    (re.compile(r"^\d\.7\.\d+$"), "policy", False),
)

# RFC 3463 subjects that place a failure elsewhere than the address: X.2 mailbox status
# (the mailbox exists), X.3 the destination mail system, X.6 the message content.
_NOT_THE_ADDRESS = re.compile(r"^\d\.[236]\.\d+$")
_MAILBOX_STATE = frozenset({"mailbox_full", "suspended"})
_GONE_FOR_GOOD = re.compile(r"^4\.1\.(?:1|2|10)$")
_ADDRESSING = re.compile(r"^\d\.1\.\d+$")

# RFC 5321 section 4.2.2 / RFC 7504 reply codes that name a reason on their own.
_BY_REPLY: dict[int, tuple[str, bool]] = {
    521: ("no_mail_host", True),
    556: ("no_mail_host", True),
    551: ("has_moved", True),
    552: ("mailbox_full", False),
    452: ("mailbox_full", False),
}


@dataclass(frozen=True)
class BounceVerdict:
    klass: Klass
    reason: str
    status: str


def _specific(text: str) -> tuple[str, bool] | None:
    found = reasons.first_match(reasons.OVERRIDE_HARD, text)
    if found:
        return found, True
    found = reasons.first_match(reasons.SPECIFIC_SOFT, text)
    if found:
        return found, False
    found = reasons.first_match(reasons.HARD, text)
    if found:
        return found, True
    return None


def _generic(text: str) -> tuple[str, bool] | None:
    found = reasons.first_match(reasons.GENERIC_SOFT, text)
    return (found, False) if found else None


def _reason(diagnostic: str, context: str, reply: int | None) -> tuple[str, bool] | None:
    """The server's own answer first, then the surrounding notice text."""
    found = _specific(diagnostic) if diagnostic else None
    if found is None and reply in _BY_REPLY and _BY_REPLY[reply][1]:
        found = _BY_REPLY[reply]
    if found is None and diagnostic:
        found = _generic(diagnostic)
    if found is None and context:
        found = _specific(context) or _generic(context)
    return found


def _from_status(code: str | None) -> tuple[str, bool] | None:
    if not code:
        return None
    for pattern, reason, hard in _BY_STATUS:
        if pattern.match(code):
            return reason, hard
    return None


def _doubted_unknown_user(
    code: str | None, stage: str | None, texts: list[str], diagnostic: str, hosts: list[str]
) -> str | None:
    """The reason to give instead when other evidence contradicts "unknown user" wording."""
    if (
        stage == "data"
        and not (code or "").startswith("5.1.")
        and any(reasons.UNKNOWN_USER_WORDING.search(t) for t in texts)
    ):
        # A bare "unknown user" after DATA comes from a content/sender filter, not a
        # directory lookup (the recipient was already accepted at RCPT).
        return "filtered"
    if reasons.FILTER_UNKNOWN_USER.search(diagnostic):
        return "filtered"
    if stage != "rcpt" and code and _NOT_THE_ADDRESS.match(code):
        # The code says the mailbox exists, or blames the system or the content.  Only a
        # refusal of RCPT TO makes the words the directory's answer; otherwise the code
        # wins, since a wrong "soft" costs a retry and a wrong "hard" a live recipient.
        found = _from_status(code)
        return found[0] if found else None
    if not _confirmed(code, stage, texts, hosts):
        return "unconfirmed_user"
    return None


def _gave_up_on_address(action: str, code: str | None) -> bool:
    """A final report ("Action: failed") whose code says the mailbox or domain does not
    exist: the receiver asked for retries (4.1.1), and answered the same until the
    sending MTA gave up, days later."""
    return action == "failed" and bool(code and _GONE_FOR_GOOD.match(code))


def _confirmed(code: str | None, stage: str | None, texts: list[str], hosts: list[str]) -> bool:
    """Is "no such user" backed by more than its words?

    Content filters and gateways use the same words for a refusal after DATA, so the
    words count only with an X.1 (addressing) status code, a refusal of RCPT TO, or a
    receiving system's own address verdict.  Unconfirmed, the failure is soft: a dead
    address still ends up suppressed by the soft-bounce streak.
    """
    if code and _ADDRESSING.match(code):
        return True
    return stage == "rcpt" or _receiver_says_gone(texts, hosts)


def _receiver_says_gone(texts: list[str], hosts: list[str]) -> bool:
    """The receiving system's own verdict that the address does not exist (a local
    delivery agent, a notice's headline, a provider's documented reply), whatever the
    SMTP stage: stronger than any reading of stage or code."""
    if any(reasons.ADDRESS_VERDICT.search(t) for t in texts):
        return True
    return any(
        host_rule.search(host) and text_rule.search(text)
        for host_rule, text_rule in reasons.PROVIDER_ADDRESS_VERDICTS
        for host in hosts
        for text in texts
    )


def judge(failure: Failure) -> BounceVerdict | None:
    """Class, reason and status for one recipient; ``None`` if it did not fail."""
    action = (failure.action or "").strip().lower()
    if action in NOT_A_FAILURE:
        return None
    diagnostic = failure.diagnostic or ""
    texts = [t for t in (diagnostic, failure.context) if t and t.strip()]
    code = status.choose(status.normalize(failure.status), diagnostic)
    if not diagnostic.strip() and failure.context and (code is None or status.is_unspecific(code)):
        # No answer of the server's own: a specific code in the notice's text about
        # this recipient beats a report's bare X.0.0.
        code = status.choose(code, failure.context)
    if code is not None and code.startswith("2."):
        return None
    reply = next((r for r in map(status.find_reply_code, texts) if r is not None), None)
    stage = failure.command or next((s for s in map(status.smtp_stage, texts) if s), None)
    delayed = action == "delayed"
    temporary = delayed or status.is_temporary(code)
    if code is None and reply is not None and reply // 100 == 4:
        temporary = True

    found = _reason(diagnostic, failure.context, reply)
    if found is None:
        found = _from_status(code)
    if found is None and reply in _BY_REPLY:
        found = _BY_REPLY[reply]
    reason, hard = found if found else ("unknown", False)

    if hard and stage in _SENDER_STAGES:
        # A refusal of MAIL FROM / HELO / the connection is about us, not the address.
        reason, hard = ("sender_rejected" if stage == "mail" else "blocked"), False
    if hard and code and re.match(r"^5\.1\.[78]$", code):
        reason, hard = "sender_rejected", False
    if hard and code and code.startswith("5.7.") and reason != "no_mail_host":
        reason, hard = "policy", False
    if hard and reason == "user_unknown":
        recipient_domain = (failure.recipient or "").rpartition("@")[2]
        hosts = [h for h in (failure.reporting_mta, failure.remote_mta, recipient_domain) if h]
        doubted = _doubted_unknown_user(code, stage, texts, diagnostic, hosts)
        if doubted:
            reason, hard = doubted, False
    if hard and failure.sole and diagnostic and failure.context:
        # The notice's own words about its one recipient contradict the server's
        # answer ("Not enough disk space" above "550 5.1.1 User unknown"); with the
        # evidence split, a soft verdict costs a retry, a hard one a live recipient.
        contrary = _specific(failure.context)
        if contrary and contrary[0] in _MAILBOX_STATE:
            reason, hard = contrary[0], False
    null_mx = reason == "no_mail_host" and any(reasons.NULL_MX.search(t) for t in texts)
    if temporary and not (null_mx and not delayed) and not _gave_up_on_address(action, code):
        hard = False
    if delayed:
        reason = "delayed"

    final_code = code or status.derive(reason, reply, temporary)
    klass: Klass = "hard" if hard else "soft"
    return BounceVerdict(klass=klass, reason=reason, status=final_code)
