"""RFC 3464 delivery status notifications.

A ``message/delivery-status`` body is one block of per-message fields (section 2.2:
Reporting-MTA, Arrival-Date, ...) followed by one block per recipient (section 2.3:
Final-Recipient, Original-Recipient, Action, Status, Remote-MTA, Diagnostic-Code).

Real reports bend the syntax: blocks run together without blank lines, field names
change case or lose letters, the part is mislabelled text/plain, or the whole report
is quoted inside a forwarded text.  So the fields are read from plain text with a
small tolerant scanner instead of trusting the MIME parser's split.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from outbox.bounce_parsing.addresses import clean_address

_FIELD_RE = re.compile(r"^([A-Za-z][A-Za-z0-9-]{1,40})\s*:\s?(.*)$")
_RECIPIENT_FIELDS = frozenset(
    {
        "final-recipient",
        "original-recipient",
        "x-actual-recipient",
        "action",
        "status",
        "diagnostic-code",
        "remote-mta",
        "last-attempt-date",
        "will-retry-until",
        "final-log-id",
    }
)
_MESSAGE_FIELDS = frozenset(
    {
        "reporting-mta",
        "dsn-gateway",
        "received-from-mta",
        "arrival-date",
        "original-envelope-id",
        "x-postfix-sender",
        "x-original-message-id",
    }
)
_QUOTE_RE = re.compile(r"^(?:\s*>)+ ?")
# Keep only the value after the RFC 3464 type token ("smtp; 550 ..." -> "550 ...").
_TYPED_RE = re.compile(r"^\s*[A-Za-z0-9-]+\s*;\s*")


@dataclass
class Report:
    """Fields of one delivery-status report."""

    message: dict[str, str] = field(default_factory=dict)
    recipients: list[dict[str, str]] = field(default_factory=list)


def untype(value: str | None) -> str:
    """Strip the ``type;`` prefix of a typed DSN field."""
    if not value:
        return ""
    return _TYPED_RE.sub("", value, count=1).strip()


def _logical_lines(text: str) -> list[str]:
    """Unfold continuation lines and drop e-mail quoting; blank lines are kept as ''."""
    lines: list[str] = []
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = _QUOTE_RE.sub("", raw) if raw.lstrip().startswith(">") else raw
        if not line.strip():
            lines.append("")
        elif line[0] in " \t" and lines and lines[-1]:
            lines[-1] = f"{lines[-1]} {line.strip()}"
        else:
            lines.append(line.rstrip())
    return lines


def _canonical(name: str) -> str:
    name = name.lower()
    if name in _RECIPIENT_FIELDS or name in _MESSAGE_FIELDS:
        return name
    # Some MTAs mangle names ("ction", "Diagnostic-code", "Final-recipient").
    for known in _RECIPIENT_FIELDS:
        if len(name) >= 4 and known.endswith(name) and len(known) - len(name) <= 2:
            return known
    return name


def parse_fields(text: str) -> Report:
    """Scan ``text`` for DSN fields and group them into recipient records.

    A new record starts at a blank line or when a per-recipient field repeats inside
    the current record, which copes with both separated and run-together blocks.
    """
    report = Report()
    current: dict[str, str] = {}

    def flush() -> None:
        nonlocal current
        if "final-recipient" in current or "original-recipient" in current:
            report.recipients.append(current)
        elif current:
            for key, value in current.items():
                report.message.setdefault(key, value)
        current = {}

    for line in _logical_lines(text):
        if not line:
            flush()
            continue
        match = _FIELD_RE.match(line.strip())
        if not match:
            continue
        name = _canonical(match.group(1))
        value = " ".join(match.group(2).split())
        if name in _MESSAGE_FIELDS:
            report.message.setdefault(name, value)
        elif name in _RECIPIENT_FIELDS:
            if name in current:
                flush()
            current[name] = value
    flush()
    return report


def has_recipient_fields(text: str) -> bool:
    """Quick test before the full scan: does the text look like it embeds a DSN?"""
    low = text.lower()
    return ("final-recipient" in low or "original-recipient" in low) and (
        "action" in low or "status" in low
    )


def recipient_of(record: dict[str, str]) -> tuple[str | None, str | None]:
    """(final, original) recipient addresses of a record, cleaned.

    Sendmail's ``X-Actual-Recipient`` is where local aliasing led (later than the
    final recipient, often a program or file), so it stands in for the final
    recipient only when that field is missing.
    """
    final = clean_address(record.get("final-recipient") or record.get("x-actual-recipient"))
    return final, clean_address(record.get("original-recipient"))


def unquoted(address: str) -> str:
    """``"a..b"@example.org`` -> ``a..b@example.org``, for comparing two spellings."""
    local, _, domain = address.rpartition("@")
    return f"{local.strip(chr(34))}@{domain}".lower()


def reporting_mta(report: Report) -> str | None:
    value = untype(report.message.get("reporting-mta"))
    return value.split()[0] if value else None


def remote_mta(record: dict[str, str]) -> str | None:
    value = untype(record.get("remote-mta"))
    return value.split()[0] if value else None


def diagnostic(record: dict[str, str]) -> str:
    return untype(record.get("diagnostic-code"))
