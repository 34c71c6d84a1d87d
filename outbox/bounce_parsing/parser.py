"""Entry point: raw message bytes -> one :class:`BounceResult` per failed recipient.

Order of evidence: feedback reports (RFC 5965) and SES notifications first, then the
standard RFC 3464 fields, then the format knowledge in :mod:`outbox.bounce_parsing.plain_notices`
for MTAs whose reports are plain text.  Auto-replies and ordinary mail give ``[]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from outbox.bounce_parsing import (
    arf,
    dsn,
    mime,
    notice_shape,
    plain_notices,
    returned,
    ses_email,
    status_codes,
    unsubscribe,
    verp,
)
from outbox.bounce_parsing.addresses import find_addresses, is_plausible, same_address
from outbox.bounce_parsing.bounce_result import BounceResult, Failure
from outbox.bounce_parsing.verdict import judge

_MAX_DIAGNOSTIC = 1000


@dataclass
class _Context:
    msg: mime.Part
    texts: list[str]
    section: str
    returned: mime.Part | None
    original_id: str | None
    verp_token: str | None


def parse_bounce(raw: bytes) -> list[BounceResult]:
    """Classify a bounce, complaint or auto-reply.

    Returns one result per failed recipient; ``[]`` means "not a bounce" (ordinary
    mail, auto-replies, delivery confirmations, unreadable input).  Never raises.
    """
    data: object = raw
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return []
    try:
        return _parse(bytes(data))
    except Exception:  # garbage in, "not a bounce" out: callers must never crash
        return []


def _parse(raw: bytes) -> list[BounceResult]:
    msg = mime.load(raw)
    if msg is None:
        return []
    ctx = _context(msg)
    notice = _report_or_notice(ctx)
    if notice is not None:
        return notice
    reports = _dsn_reports(msg, ctx.texts)
    records = [r for report in reports for r in report.recipients]
    if not records and not notice_shape.is_failure_notice(
        msg, ctx.texts, ctx.section, ctx.returned is not None
    ):
        return []
    failures = _from_dsn(ctx, reports) if records else []
    if not failures:
        failures = _from_text(ctx)
    return _results(ctx, failures)


def _context(msg: mime.Part) -> _Context:
    texts = mime.notification_texts(msg)
    section = "\n".join(plain_notices.notification_section(t) for t in texts)
    original = mime.returned_headers(msg)
    if original is None:
        for text in texts:
            original = returned.inline_headers(text)
            if original is not None:
                break
    return _Context(
        msg=msg,
        texts=texts,
        section=section,
        returned=original,
        original_id=returned.original_message_id(original, texts),
        verp_token=verp.token_of(msg, original),
    )


def _report_or_notice(ctx: _Context) -> list[BounceResult] | None:
    """Results of a feedback report, an SES notification or an unsubscribe request;
    ``None`` when the message is none of them."""
    if arf.is_feedback_report(ctx.msg, ctx.returned):
        return _complaints(ctx)
    for text in ctx.texts[:2]:
        notices = ses_email.parse(text)
        if notices:
            return _from_ses(ctx, notices)
    requester = unsubscribe.requester(ctx.msg)
    if requester:
        return [
            BounceResult(
                klass="complaint",
                recipient=requester,
                reason="unsubscribe",
                diagnostic=mime.header(ctx.msg, "Subject") or None,
                original_message_id=ctx.original_id,
                verp_token=ctx.verp_token,
            )
        ]
    return None


def _dsn_reports(msg: mime.Part, texts: list[str]) -> list[dsn.Report]:
    reports = [
        dsn.parse_fields(mime.dsn_part_text(part))
        for part in mime.walk(msg)
        if mime.content_type(part) in mime.DSN_TYPES
    ]
    if any(r.recipients for r in reports):
        return reports
    embedded = [dsn.parse_fields(t) for t in texts if dsn.has_recipient_fields(t)]
    return [r for r in embedded if r.recipients] or reports


def _failed_header(msg: mime.Part) -> list[str]:
    found: list[str] = []
    for value in mime.header_all(msg, "X-Failed-Recipients"):
        found.extend(a for a in find_addresses(value) if is_plausible(a))
    return found


def _exclusions(ctx: _Context) -> list[str]:
    values: list[str] = []
    for name in ("To", "Delivered-To", "X-Original-To"):
        values.extend(mime.header_all(ctx.msg, name))
    if ctx.returned is not None:
        for name in ("From", "Return-Path", "Sender", "Reply-To"):
            values.extend(mime.header_all(ctx.returned, name))
    return [a for v in values for a in find_addresses(v)]


def _returned_recipient(ctx: _Context) -> str | None:
    if ctx.returned is None:
        return None
    found = [a for a in find_addresses(mime.header(ctx.returned, "To")) if is_plausible(a)]
    return found[0] if len(found) == 1 else None


def _from_dsn(ctx: _Context, reports: list[dsn.Report]) -> list[Failure]:
    failed_header = _failed_header(ctx.msg)
    records = [(report, record) for report in reports for record in report.recipients]
    failures: list[Failure] = []
    for index, (report, record) in enumerate(records):
        final, original = dsn.recipient_of(record)
        recipient = _sent_to(final, original)
        if recipient is None:
            recipient = _fallback_recipient(ctx, failed_header, index, len(records))
        diagnostic = dsn.diagnostic(record)
        context = _context_for(ctx, recipient, len(records))
        status_value = record.get("status", "")
        comment = status_value.partition("(")[2].rstrip(")")
        failures.append(
            Failure(
                recipient=recipient,
                status=status_value or None,
                diagnostic=diagnostic,
                context=f"{context} {comment}".strip(),
                action=record.get("action"),
                remote_mta=dsn.remote_mta(record),
                reporting_mta=dsn.reporting_mta(report),
                sole=len(records) == 1,
            )
        )
    return failures


def _sent_to(final: str | None, original: str | None) -> str | None:
    """The address we sent to: RFC 3464 section 2.3.1 Original-Recipient when it is a
    different mailbox (Final-Recipient may be a forwarding target we never mailed),
    else Final-Recipient in its exact, possibly quoted, spelling."""
    same = bool(final and original and dsn.unquoted(final) == dsn.unquoted(original))
    if original is not None and is_plausible(original) and not (same and is_plausible(final)):
        return original
    if is_plausible(final):
        return final
    return original if is_plausible(original) else None


def _fallback_recipient(
    ctx: _Context, failed_header: list[str], index: int, total: int
) -> str | None:
    """Recipient for a DSN record whose address fields are paths, pipes or routes."""
    if failed_header:
        return failed_header[index] if len(failed_header) == total else failed_header[0]
    blocks = plain_notices.recipient_blocks(ctx.section, [], _exclusions(ctx))
    if len(blocks) == 1:
        return blocks[0][0]
    return _returned_recipient(ctx)


def _context_for(ctx: _Context, recipient: str | None, total: int) -> str:
    if total == 1 or recipient is None:
        return ctx.section
    blocks = plain_notices.recipient_blocks(ctx.section, [recipient], [])
    return blocks[0][1] if blocks else ""


def _from_text(ctx: _Context) -> list[Failure]:
    known = _failed_header(ctx.msg)
    blocks = plain_notices.recipient_blocks(ctx.section, known, _exclusions(ctx))
    if not blocks:
        fallback = _returned_recipient(ctx)
        if fallback is None:
            return []
        blocks = [(fallback, "")]
    delayed = plain_notices.is_delay_notice(mime.header(ctx.msg, "Subject"), ctx.section)
    # A notice about one recipient that quotes one status code, somewhere other than
    # the lines taken as its diagnostic, still gives that recipient's code.
    sole = status_codes.sole_code(ctx.section) if len(blocks) == 1 else None
    return [
        Failure(
            recipient=address,
            status=sole if sole and not status_codes.find_all(diagnostic) else None,
            diagnostic=diagnostic,
            context=ctx.section,
            action="delayed" if delayed else "failed",
        )
        for address, diagnostic in blocks
    ]


def _short(text: str | None) -> str | None:
    if not text:
        return None
    collapsed = " ".join(text.split())
    return collapsed[:_MAX_DIAGNOSTIC] or None


def _display_diagnostic(failure: Failure) -> str | None:
    """Show the server's own answer when the notice quotes one."""
    if plain_notices.informative(failure.diagnostic):
        return _short(status_codes.reply_text(failure.diagnostic) or failure.diagnostic)
    return _short(plain_notices.summary(failure.context)) or _short(failure.diagnostic)


def _results(ctx: _Context, failures: list[Failure]) -> list[BounceResult]:
    results: list[BounceResult] = []
    for failure in failures:
        if failure.recipient and any(same_address(failure.recipient, r.recipient) for r in results):
            continue
        verdict = judge(failure)
        if verdict is None:
            continue
        results.append(
            BounceResult(
                klass=verdict.klass,
                recipient=failure.recipient,
                status=verdict.status,
                diagnostic=_display_diagnostic(failure),
                original_message_id=ctx.original_id,
                reporting_mta=failure.reporting_mta,
                reason=verdict.reason,
                verp_token=ctx.verp_token,
            )
        )
    return results


def _complaints(ctx: _Context) -> list[BounceResult]:
    report = arf.parse(ctx.msg, ctx.returned)
    token = ctx.verp_token or verp.find_token([report.original_mail_from or ""])
    recipients: list[str | None] = list(report.recipients) or [None]
    return [
        BounceResult(
            klass="complaint",
            recipient=recipient,
            diagnostic=report.feedback_type,
            original_message_id=ctx.original_id,
            reporting_mta=report.reporting_mta,
            reason="complaint",
            verp_token=token,
        )
        for recipient in recipients
    ]


def _from_ses(ctx: _Context, notices: list[ses_email.Notice]) -> list[BounceResult]:
    results: list[BounceResult] = []
    for notice in notices:
        message_id = returned.normalize_message_id(notice.message_id) or ctx.original_id
        token = ctx.verp_token or verp.find_token([notice.source or ""])
        if notice.kind == "complaint":
            results.append(
                BounceResult(
                    klass="complaint",
                    recipient=notice.recipient,
                    diagnostic=notice.diagnostic,
                    original_message_id=message_id,
                    reason="complaint",
                    verp_token=token,
                )
            )
            continue
        verdict = judge(
            Failure(
                recipient=notice.recipient,
                status=notice.status,
                diagnostic=notice.diagnostic,
                action="failed",
            )
        )
        if verdict is None:
            continue
        results.append(
            BounceResult(
                # SES "Transient" means it gave up on a temporary condition.
                klass=verdict.klass if notice.permanent else "soft",
                recipient=notice.recipient,
                status=verdict.status,
                diagnostic=_short(notice.diagnostic),
                original_message_id=message_id,
                reporting_mta=notice.reporting_mta,
                reason=verdict.reason,
                verp_token=token,
            )
        )
    return results
