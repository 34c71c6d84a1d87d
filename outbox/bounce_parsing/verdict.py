"""Turn one recipient's raw failure facts into class, reason and status.

The decision procedure is the table in ``outbox/bounce_parsing/README.md``; the rule ids
there (E1..E9, D1..D9) name the steps below.  In short:

* The *reason* comes from the first source that names one, in this order: report
  fields (Action, Status class), a decisive enhanced status code, the reply code,
  the server's diagnostic text, the notice's own text, then any other code (E1-E9).
  Only one kind of text outranks a decisive code: wording that says *why* a message
  was refused (spam, block list, quota, size, ...; E2), because servers reuse
  5.1.1 and friends loosely for refusals that leave the address alive.
* The *class* is the reason's class (:class:`~outbox.bounce_parsing.bounce_result.Reason`), then
  the demotion rules D1-D9 apply: ``hard`` only when the address itself is known
  dead, never for a temporary failure or a refusal that is about us.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from outbox.bounce_parsing import product_rules, reasons, status_codes
from outbox.bounce_parsing.bounce_result import HARD_REASONS, Failure, Klass, Reason

__all__ = ["HARD_REASONS", "NOT_A_FAILURE", "BounceVerdict", "judge"]

NOT_A_FAILURE = frozenset({"delivered", "relayed", "expanded", "deliverable"})
_SENDER_STAGES = frozenset({"mail", "helo", "connect"})

# RFC 3463 section 3 subject.detail -> reason.  "Decisive" codes name one condition
# and decide the reason before any wording but the E2 kind (step E3); the others
# (X.0.0, X.1.0, X.1.7/8, X.1.10, X.2.0/1, X.3.x, X.4.x, X.5.x, X.6.x, X.7.0/1 ...) only say
# roughly where the failure lies and are used when no text names a reason (E8).
_BY_STATUS: tuple[tuple[re.Pattern[str], Reason, bool], ...] = (
    (re.compile(r"^\d\.1\.1$"), Reason.USER_UNKNOWN, True),
    (re.compile(r"^\d\.1\.2$"), Reason.HOST_UNKNOWN, True),
    (re.compile(r"^\d\.1\.3$"), Reason.BAD_ADDRESS, True),
    (re.compile(r"^\d\.1\.6$"), Reason.HAS_MOVED, True),
    # X.1.10 is RFC 7505's null MX, but Exchange Online also puts it on
    # "RESOLVER.ADR.RecipientNotFound": hard either way, the text picks the reason.
    (re.compile(r"^\d\.1\.10$"), Reason.NO_MAIL_HOST, False),
    (re.compile(r"^\d\.1\.[78]$"), Reason.SENDER_REJECTED, False),
    (re.compile(r"^\d\.2\.1$"), Reason.SUSPENDED, False),
    (re.compile(r"^\d\.2\.2$"), Reason.MAILBOX_FULL, True),
    (re.compile(r"^\d\.2\.3$"), Reason.MESSAGE_TOO_BIG, True),
    (re.compile(r"^\d\.3\.4$"), Reason.MESSAGE_TOO_BIG, True),
    (re.compile(r"^\d\.3\.\d+$"), Reason.SYSTEM, False),
    # X.4.4 "unable to route": no MX or A record for the domain; decisive only as a
    # permanent (5.x) code, a 4.4.4 is a DNS failure that may clear.
    (re.compile(r"^5\.4\.4$"), Reason.HOST_UNKNOWN, True),
    (re.compile(r"^\d\.4\.7$"), Reason.EXPIRED, True),
    (re.compile(r"^\d\.4\.\d+$"), Reason.NETWORK, False),
    (re.compile(r"^\d\.5\.\d+$"), Reason.PROTOCOL, False),
    (re.compile(r"^\d\.6\.\d+$"), Reason.CONTENT, False),
    # RFC 7372 X.7.20-X.7.26 (DKIM, SPF, reverse DNS, DMARC) and X.7.8/X.7.9.  Not
    # X.7.27 (RFC 7505 "sender address has null MX"): Sendmail also puts it on a
    # recipient domain's null MX, so the text decides.
    (re.compile(r"^\d\.7\.(?:2[0-6]|8|9)$"), Reason.AUTHENTICATION, True),
    (re.compile(r"^\d\.7\.\d+$"), Reason.POLICY, False),
)

# RFC 3463 subjects that place a failure elsewhere than the address: X.2 mailbox status
# (the mailbox exists), X.3 the destination mail system, X.6 the message content.
_NOT_THE_ADDRESS = re.compile(r"^\d\.[236]\.\d+$")
_MAILBOX_STATE = frozenset({Reason.MAILBOX_FULL, Reason.SUSPENDED})
# Final reports of these temporary codes mean the receiver kept saying "no such
# mailbox / domain / route" until the sending MTA gave up.
_GONE_FOR_GOOD = re.compile(r"^4\.(?:1\.(?:1|2|10)|4\.4)$")
_ADDRESSING = re.compile(r"^\d\.1\.\d+$")
# The address a server's answer opens with: reply code, optional enhanced code, address.
_ANSWER_ADDRESS = re.compile(r"\s*\d{3}[ -](?:#?[245]\.\d{1,3}\.\d{1,3}\s+)?<?([^\s<>]+@[^\s<>]+)")
# The generic policy codes many large providers put on any RCPT refusal.
_GENERIC_POLICY = re.compile(r"^5\.7\.[01]$")

# RFC 5321 section 4.2.2 / RFC 7504 reply codes that name a reason on their own.
_HARD_REPLIES: dict[int, Reason] = {
    521: Reason.NO_MAIL_HOST,
    556: Reason.NO_MAIL_HOST,
    551: Reason.HAS_MOVED,
}
_SOFT_REPLIES: dict[int, Reason] = {552: Reason.MAILBOX_FULL, 452: Reason.MAILBOX_FULL}


@dataclass(frozen=True)
class BounceVerdict:
    klass: Klass
    reason: Reason
    status: str
    rule: str = ""  # id of the decision-table row that settled the class


@dataclass(frozen=True)
class _Facts:
    action: str
    diagnostic: str
    context: str
    texts: list[str]
    code: str | None
    reply: int | None
    stage: str | None
    delayed: bool
    temporary: bool
    hosts: list[str]
    sole: bool
    recipient: str


def _as_reason(value: str | None) -> Reason | None:
    return Reason(value) if value else None


def _says_why(text: str) -> Reason | None:
    """Wording that names the refusal's cause (E2): always outranks a code."""
    return _as_reason(
        reasons.first_match(reasons.OVERRIDE_HARD, text)
        or reasons.first_match(reasons.SPECIFIC_SOFT, text)
    )


def _says_dead(text: str) -> Reason | None:
    return _as_reason(reasons.first_match(reasons.HARD, text))


def _generic(text: str) -> Reason | None:
    return _as_reason(reasons.first_match(reasons.GENERIC_SOFT, text))


def _from_status(code: str | None) -> tuple[Reason, bool] | None:
    if not code:
        return None
    for pattern, reason, decisive in _BY_STATUS:
        if pattern.match(code):
            return reason, decisive
    return None


def _facts(failure: Failure) -> _Facts | None:
    action = (failure.action or "").strip().lower()
    if action in NOT_A_FAILURE:
        return None
    diagnostic = failure.diagnostic or ""
    texts = [t for t in (diagnostic, failure.context) if t and t.strip()]
    code = _code(failure, diagnostic)
    if code is not None and code.startswith("2."):
        return None
    reply = next((r for r in map(status_codes.find_reply_code, texts) if r is not None), None)
    stage = failure.command or next((s for s in map(status_codes.smtp_stage, texts) if s), None)
    delayed = action == "delayed"
    return _Facts(
        action=action,
        diagnostic=diagnostic,
        context=failure.context or "",
        texts=texts,
        code=code,
        reply=reply,
        stage=stage,
        delayed=delayed,
        temporary=_temporary(delayed, code, reply),
        hosts=_hosts(failure),
        sole=failure.sole,
        recipient=failure.recipient or "",
    )


def _code(failure: Failure, diagnostic: str) -> str | None:
    """The enhanced status code: the report's, or one the server's answer gives."""
    code = status_codes.choose(status_codes.normalize(failure.status), diagnostic)
    if (
        not diagnostic.strip()
        and failure.context
        and (code is None or status_codes.is_unspecific(code))
    ):
        # No answer of the server's own: a specific code in the notice's text about
        # this recipient beats a report's bare X.0.0.
        code = status_codes.choose(code, failure.context)
    return code


def _temporary(delayed: bool, code: str | None, reply: int | None) -> bool:
    """Still being retried, a 4.x.x code, or (with no code) a 4xx reply."""
    if delayed or status_codes.is_temporary(code):
        return True
    return code is None and reply is not None and reply // 100 == 4


def _hosts(failure: Failure) -> list[str]:
    """The hosts and the recipient domain the product rules may be limited to."""
    domain = (failure.recipient or "").rpartition("@")[2]
    return [h for h in (failure.reporting_mta, failure.remote_mta, domain) if h]


def _select(f: _Facts) -> tuple[Reason, str]:
    """The reason, from the first source that names one (rows E2-E9)."""
    found = _says_why(f.diagnostic) if f.diagnostic else None
    if found:
        return found, "E2"
    by_code = _from_status(f.code)
    if by_code and by_code[1]:
        return by_code[0], "E3"
    if f.reply in _HARD_REPLIES:
        return _HARD_REPLIES[f.reply], "E4"
    if f.diagnostic:
        found = _says_dead(f.diagnostic) or _generic(f.diagnostic)
        if found:
            return found, "E5"
    if f.context:
        found = _says_why(f.context) or _says_dead(f.context) or _generic(f.context)
        if found:
            return found, "E6"
    if by_code:
        return by_code[0], "E7"
    if f.reply in _SOFT_REPLIES:
        return _SOFT_REPLIES[f.reply], "E8"
    return Reason.UNKNOWN, "E9"


def _receiver_says_gone(f: _Facts) -> bool:
    """The receiving system's own verdict that the address does not exist (a local
    delivery agent, a notice's headline, a provider's documented reply), whatever the
    SMTP stage: stronger than any reading of stage or code."""
    return product_rules.receiver_says_gone(f.texts, f.hosts)


def _confirmed(f: _Facts) -> bool:
    """Do an X.1 code, the RCPT stage or the receiver's own verdict back the words?"""
    return (
        bool(f.code and _ADDRESSING.match(f.code))
        or f.stage == "rcpt"
        or (f.stage is None and _answers_recipient(f))
        or _receiver_says_gone(f)
    )


def _answers_recipient(f: _Facts) -> bool:
    """Does the server's answer open with this recipient's own address?

    Servers echo the forward-path when they answer RCPT TO ("550 5.1.1 <a@b>...",
    "550 <a@b>: Recipient address rejected"); an answer to MAIL FROM names the
    sender, one to DATA the message.  So the echo places the refusal at the RCPT
    stage when the notice does not say which command was refused.
    """
    if "@" not in f.recipient:
        return False
    match = _ANSWER_ADDRESS.match(f.diagnostic)
    return match is not None and match.group(1).rstrip(".,:;>").lower() == f.recipient.lower()


def _strong_unknown_user(f: _Facts) -> bool:
    return any(product_rules.UNKNOWN_USER_WORDING.search(t) for t in f.texts) or any(
        _says_dead(t) == Reason.USER_UNKNOWN for t in f.texts
    )


def _demote(reason: Reason, f: _Facts) -> tuple[Reason, str]:
    """Rows D1-D6: evidence that the failure is not about the address being dead."""
    if reason == Reason.UNCONFIRMED_USER and _confirmed(f):
        # D1: weak "mailbox unavailable" / "address rejected" wording is a directory
        # answer when an X.1 code, the RCPT stage or the receiver's verdict backs it.
        reason = Reason.USER_UNKNOWN
    if reason.klass != "hard":
        return reason, ""
    if f.stage in _SENDER_STAGES:
        # D2: a refusal of MAIL FROM / HELO / the connection is about us.
        return (Reason.SENDER_REJECTED if f.stage == "mail" else Reason.BLOCKED), "D2"
    if _policy_refusal(reason, f):
        return Reason.POLICY, "D3"
    if reason != Reason.USER_UNKNOWN or _receiver_says_gone(f):
        return reason, ""  # the receiver's verdict outweighs D4-D6
    return _unknown_user_doubted(f) or (reason, "")


def _policy_refusal(reason: Reason, f: _Facts) -> bool:
    """D3: a security/policy code; only an RCPT-stage "no such user" under the
    generic 5.7.0/5.7.1 stays hard."""
    if not (f.code and f.code.startswith("5.7.")) or reason == Reason.NO_MAIL_HOST:
        return False
    stays_hard = (
        reason == Reason.USER_UNKNOWN
        and f.stage == "rcpt"
        and bool(_GENERIC_POLICY.match(f.code))
        and _strong_unknown_user(f)
    )
    return not stays_hard


def _unknown_user_doubted(f: _Facts) -> tuple[Reason, str] | None:
    """Rows D4-D6: "user unknown" that a filter or the code contradicts."""
    if product_rules.FILTER_UNKNOWN_USER.search(f.diagnostic):
        return Reason.FILTERED, "D4"  # "550 : User unknown", the mailbox left out
    if (
        f.stage == "data"
        and not (f.code or "").startswith("5.1.")
        and any(product_rules.UNKNOWN_USER_WORDING.search(t) for t in f.texts)
    ):
        # D5: after DATA the recipient was already accepted at RCPT: a content or
        # sender filter speaking, not a directory lookup.
        return Reason.FILTERED, "D5"
    if f.stage != "rcpt" and f.code and _NOT_THE_ADDRESS.match(f.code):
        # D6: the code says the mailbox exists, or blames the system or the content.
        found = _from_status(f.code)
        return (found[0] if found else Reason.UNKNOWN), "D6"
    return None


def judge(failure: Failure) -> BounceVerdict | None:
    """Class, reason and status for one recipient; ``None`` if it did not fail (E1)."""
    f = _facts(failure)
    if f is None:
        return None
    reason, rule = _select(f)
    reason, demoted = _demote(reason, f)
    rule = demoted or rule
    hard = reason.klass == "hard"
    if hard and f.sole and f.diagnostic and f.context:
        # D7: the notice's own words about its one recipient contradict the server's
        # answer ("Not enough disk space" above "550 5.1.1 User unknown").
        contrary = _says_why(f.context)
        if contrary in _MAILBOX_STATE:
            reason, hard, rule = contrary, False, "D7"
    null_mx = reason == Reason.NO_MAIL_HOST and any(reasons.NULL_MX.search(t) for t in f.texts)
    gave_up = f.action == "failed" and bool(f.code and _GONE_FOR_GOOD.match(f.code))
    if hard and f.temporary and not (null_mx and not f.delayed) and not gave_up:
        hard, rule = False, "D8"  # temporary or still being retried
    if f.delayed:
        reason, rule = Reason.DELAYED, "D9"

    final_code = f.code or status_codes.derive(reason, f.reply, f.temporary)
    klass: Klass = "hard" if hard else "soft"
    return BounceVerdict(klass=klass, reason=reason, status=final_code, rule=rule)
