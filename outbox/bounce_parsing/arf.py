"""RFC 5965 Abuse Reporting Format (feedback loops, DMARC failure reports).

A report is ``multipart/report; report-type=feedback-report`` with a
``message/feedback-report`` part (section 3: Feedback-Type, User-Agent, Version,
Original-Mail-From, Original-Rcpt-To, Reporting-MTA, ...) and the complained-about
message (or its headers) as the third part.  Every recipient named is a complaint.

Microsoft's Junk Mail Reporting Program (Outlook.com, Hotmail) sends no ARF part:
the complained-about message comes back as ``message/rfc822`` with the complaining
mailbox in its ``X-HmXmrOriginalRecipient`` header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from outbox.bounce_parsing import mime
from outbox.bounce_parsing.addresses import clean_address, find_addresses, is_plausible

_FIELD_RE = re.compile(r"^([A-Za-z][A-Za-z0-9-]*)\s*:\s*(.*)$")


@dataclass
class FeedbackReport:
    recipients: list[str] = field(default_factory=list)
    feedback_type: str | None = None
    reporting_mta: str | None = None
    original_mail_from: str | None = None


JMRP_RECIPIENT = "X-HmXmrOriginalRecipient"


def is_feedback_report(msg: mime.Part, returned: mime.Part | None = None) -> bool:
    if mime.content_type(msg) == "multipart/report" and "feedback-report" in mime.param(
        msg, "report-type"
    ):
        return True
    if returned is not None and mime.header(returned, JMRP_RECIPIENT):
        return True
    return any(mime.content_type(p) == "message/feedback-report" for p in mime.walk(msg))


def _fields(msg: mime.Part) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for part in mime.walk(msg):
        if mime.content_type(part) != "message/feedback-report":
            continue
        for line in mime.dsn_part_text(part).split("\n"):
            match = _FIELD_RE.match(line.strip())
            if match:
                pairs.append((match.group(1).lower(), " ".join(match.group(2).split())))
    return pairs


def parse(msg: mime.Part, returned: mime.Part | None) -> FeedbackReport:
    report = FeedbackReport()
    for name, value in _fields(msg):
        _take(report, name, value)
    if not report.recipients and returned is not None:
        _recipient_from_returned(report, returned)
    return report


def _take(report: FeedbackReport, name: str, value: str) -> None:
    """One feedback-report field: every recipient, the first of each other field."""
    if name in ("original-rcpt-to", "removal-recipient"):
        address = clean_address(value)
        if is_plausible(address) and address not in report.recipients:
            report.recipients.append(address or "")
    elif name == "feedback-type" and report.feedback_type is None:
        report.feedback_type = value.lower() or None
    elif name == "reporting-mta" and report.reporting_mta is None:
        report.reporting_mta = value.split(";", 1)[-1].strip() or None
    elif name == "original-mail-from" and report.original_mail_from is None:
        report.original_mail_from = clean_address(value)


def _recipient_from_returned(report: FeedbackReport, returned: mime.Part) -> None:
    """A report naming no recipient: JMRP's header, else the returned message's one To."""
    jmrp = clean_address(mime.header(returned, JMRP_RECIPIENT))
    if jmrp and is_plausible(jmrp):
        report.recipients.append(jmrp)
        report.feedback_type = report.feedback_type or "abuse"
        return
    found = [a for a in find_addresses(mime.header(returned, "To")) if is_plausible(a)]
    if len(found) == 1:
        report.recipients.append(found[0])
