"""RFC 3463 enhanced status codes and RFC 5321 reply codes.

An enhanced code is ``class.subject.detail``: class 2 (success), 4 (persistent
transient failure) or 5 (permanent failure); subject 0-7 (RFC 3463 section 3);
detail up to three digits (RFC 5248 registry entries such as 5.7.26 or 4.7.650).
"""

from __future__ import annotations

import re

from outbox.bounce_parsing.patterns import Rule, prepare, rules

# Bounded so that IP addresses, software versions and dates do not match.
_ENHANCED_RE = re.compile(r"(?<![\d.])([245])\.([0-7])\.(\d{1,3})(?![\d]|\.\d)")
_REPLY_RE = re.compile(r"(?:^|(?<=[\s:;'\"(<>=\[#]))([245][0-5]\d)(?=[\s\-:]|$)")
_LEADING_REPLY_RE = re.compile(r"^\W{0,3}([245][0-5]\d)(?=[\s\-:]|$)")

# Status derived from a reason when the bounce carries no enhanced code
# (subject.detail per RFC 3463 section 3; 1.10 and 7.26 from RFC 7505 / RFC 7372).
_REASON_CODES: dict[str, str] = {
    "user_unknown": "1.1",
    "host_unknown": "1.2",
    "bad_address": "1.3",
    "has_moved": "1.6",
    "no_mail_host": "1.10",
    "sender_rejected": "1.8",
    "suspended": "2.1",
    "mailbox_full": "2.2",
    "message_too_big": "3.4",
    "system": "3.0",
    "network": "4.0",
    "expired": "4.7",
    "rate_limited": "7.0",
    "content": "6.0",
    "spam": "7.1",
    "virus": "7.1",
    "blocked": "7.1",
    "policy": "7.1",
    "filtered": "7.1",
    "relay_denied": "7.1",
    "authentication": "7.26",
}


def normalize(value: str | None) -> str | None:
    """The enhanced code at the start of a ``Status:`` value, or ``None``.

    ``"5.1.1 (Remote SMTP server has rejected address)"`` gives ``"5.1.1"``.
    """
    if not value:
        return None
    match = _ENHANCED_RE.match(value.strip().lstrip("#"))
    return ".".join(match.groups()) if match else None


def find_all(text: str) -> list[str]:
    """Every enhanced status code in free text, in order."""
    return [".".join(m.groups()) for m in _ENHANCED_RE.finditer(text)]


# Reply codes servers actually send for failures (RFC 5321 section 4.2.3, RFC 7504,
# RFC 4954, provider extensions such as 542); other three-digit numbers in a notice
# are sizes, ports or ids.
_FAILURE_REPLIES = frozenset(
    {421, 450, 451, 452, 454, 455, 458, 500, 501, 502, 503, 504, 521, 523, 525, 530, 534, 535}
    | {538, 541, 542, 550, 551, 552, 553, 554, 555, 556, 557, 571}
    | {250, 251, 252}
)


def find_reply_code(text: str) -> int | None:
    """The SMTP reply code of a server answer, preferring one that starts the text."""
    stripped = text.strip()
    match = _LEADING_REPLY_RE.match(stripped)
    if match and int(match.group(1)) in _FAILURE_REPLIES:
        return int(match.group(1))
    for match in _REPLY_RE.finditer(stripped):
        if int(match.group(1)) in _FAILURE_REPLIES:
            return int(match.group(1))
    return None


_REPLY_START_RE = re.compile(r"(?:^|(?<=[\s:;'\"(<>=\[]))[245][0-5]\d(?:[ -]|$)")


def reply_text(text: str) -> str | None:
    """The server's answer inside a longer notice: text from the first reply code on."""
    for match in _REPLY_START_RE.finditer(text):
        if int(match.group(0)[:3]) in _FAILURE_REPLIES:
            return text[match.start() :].strip()
    return None


def is_unspecific(code: str) -> bool:
    """``x.0.0`` says only success/temporary/permanent."""
    return code.endswith(".0.0")


def choose(dsn_status: str | None, diagnostic: str) -> str | None:
    """Pick the most informative code for one recipient.

    The last specific code quoted in the diagnostic wins: it is the remote server's
    own answer, which the reporting MTA often wraps in its own label or summarises in
    ``Status:`` ("554 4.4.7 Message expired ... <421 4.4.2 Connection timed out>").
    Then a specific ``Status:`` field, then whatever unspecific ``x.0.0`` was given.
    """
    quoted = find_all(diagnostic)
    specific = [code for code in quoted if not is_unspecific(code)]
    if specific:
        return specific[-1]
    if dsn_status and not is_unspecific(dsn_status):
        return dsn_status
    return dsn_status or (quoted[0] if quoted else None)


def sole_code(text: str) -> str | None:
    """The one specific code a text quotes (repeated or not), ``None`` if it quotes
    none or several."""
    specific = {code for code in find_all(text) if not is_unspecific(code)}
    return specific.pop() if len(specific) == 1 else None


def derive(reason: str | None, reply_code: int | None, temporary: bool) -> str:
    """Synthesize a code from reason and reply class when the bounce has none."""
    if reply_code is not None and reply_code // 100 in (4, 5):
        first = str(reply_code // 100)
    else:
        first = "4" if temporary else "5"
    if reason == "delayed":
        return "4.0.0"
    return f"{first}.{_REASON_CODES.get(reason or '', '0.0')}"


def is_temporary(code: str | None) -> bool:
    return bool(code and code.startswith("4."))


# Which SMTP command the failing reply answered, from the wording of the major MTAs
# (Postfix "in reply to X command", Exim "after X", Sendmail ">>> X", qmail, DMA).
# Lower-case patterns, matched against :func:`patterns.prepare` text.
_STAGES: tuple[tuple[str, tuple[Rule, ...]], ...] = (
    (
        "mail",
        rules(
            r"in reply to (?:the )?mail from|after mail from|did not like our mail from",
            r">>> mail from|sender was rejected|rejected mail from|server rejected mail from",
        ),
    ),
    ("helo", rules(r"after ehlo\b|after helo\b|in reply to (?:the )?(?:ehlo|helo)")),
    ("connect", rules(r"after initial connection|refused to talk to me|while connecting")),
    (
        "rcpt",
        rules(
            r"in reply to (?:the )?rcpt|after rcpt\b|did not like our rcpt|>>> rcpt to",
            r"\b5\.1\.1 <?[^\s<>]+@[^\s<>]+?>?\.\.\. user unknown",
            r"does not like recipient|smtp:rcpt|after rcpt command|\[rcpt_to\]",
            # qmail-remote when every MX refused: "most progress was RCPT TO response"
            r"most progress was rcpt to|said \d{3} for rcpt to response",
        ),
    ),
    (
        "data",
        rules(
            r"in reply to (?:the )?(?:end of )?data|after (?:end of )?data\b|final data",
            r"for text command|failed after i sent the message|>>> data\b",
            r"smtp command\s+data\b",
        ),
    ),
)


def smtp_stage(text: str) -> str | None:
    """``mail``, ``helo``, ``connect``, ``rcpt`` or ``data`` if the text says so."""
    low = prepare(text)
    for stage, stage_rules in _STAGES:
        if any(rule.search(low) for rule in stage_rules):
            return stage
    return None
