"""Bounces and complaints: stored, linked to their row, acted on only when trusted."""

from __future__ import annotations

import dataclasses
import smtplib
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from outbox import enqueue
from outbox.bounce_receiving.ingest import ingest, process_pending
from outbox.bounce_receiving.smtp_server import BounceServer
from outbox.config import Settings
from outbox.db.store import bounce_reports, suppressions
from outbox.message.return_path import return_path
from outbox.testing.sink import SmtpSink
from tests.integration.helpers import LOGIN, NEWS, query, wait_until
from tests.keys import OTHER_SECRET, SECRET

BOUNCE_DOMAIN = "bounces.shop.example"


@pytest.fixture
def bsettings(settings: Settings) -> Settings:
    return dataclasses.replace(
        settings, bounce_domain=BOUNCE_DOMAIN, secret=SECRET, bounce_port=SmtpSink().port
    )


def sent_row(settings: Settings, key: str, to: str = "gone@example.net") -> tuple[int, str]:
    """An email as the pipeline leaves it: sent, with its Message-ID."""
    with psycopg.connect(settings.database_url) as conn:
        result = enqueue(
            conn, idempotency_key=key, to=to, template="newsletter", params=NEWS, settings=settings
        )
        conn.execute(
            "UPDATE email_outbox SET status = 'sent', sent_at = now() WHERE id = %s", (result.id,)
        )
        conn.commit()
    return result.id, result.message_id


def dsn(
    recipient: str,
    message_id: str,
    *,
    status: str = "5.1.1",
    action: str = "failed",
    diagnostic: str = "smtp; 550 5.1.1 <{r}>: Recipient address rejected: User unknown",
    to: str = "bounces@bounces.shop.example",
) -> bytes:
    """An RFC 3464 delivery status notification, shaped as Postfix writes one."""
    text = f"""From: MAILER-DAEMON@mx.example.net (Mail Delivery System)
To: {to}
Subject: Undelivered Mail Returned to Sender
Auto-Submitted: auto-replied
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="b1"

--b1
Content-Type: text/plain

This is the mail system at host mx.example.net.
I'm sorry to have to inform you that your message could not be delivered.

--b1
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.example.net

Final-Recipient: rfc822; {recipient}
Original-Recipient: rfc822;{recipient}
Action: {action}
Status: {status}
Remote-MTA: dns; mail.example.net
Diagnostic-Code: {diagnostic.format(r=recipient)}

--b1
Content-Type: text/rfc822-headers

From: shop@shop.example
To: {recipient}
Subject: News
Message-ID: {message_id}

--b1--
"""
    return text.replace("\n", "\r\n").encode()


def arf(recipient: str, message_id: str, return_path: str = "") -> bytes:
    """An RFC 5965 feedback report (a spam complaint), quoting the original's headers."""
    text = f"""From: feedback@fbl.example.net
To: fbl@bounces.shop.example
Subject: Complaint about a message
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report; boundary="b2"

--b2
Content-Type: text/plain

This is an email abuse report for an email message received.

--b2
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: FBL/1.0
Version: 1
Original-Rcpt-To: {recipient}

--b2
Content-Type: text/rfc822-headers

Return-Path: <{return_path}>
From: shop@shop.example
To: {recipient}
Subject: News
Message-ID: {message_id}

--b2--
"""
    return text.replace("\n", "\r\n").encode()


def suppressed(settings: Settings, address: str) -> Any:
    with psycopg.connect(settings.database_url) as conn:
        return suppressions.find_suppression(conn, address)


def run_ingest(settings: Settings, raw: bytes, envelope_to: str | None) -> Any:
    with psycopg.connect(settings.database_url) as conn:
        return ingest(conn, raw, settings, envelope_to=envelope_to)


def test_hard_bounce_through_verp_suppresses(bsettings: Settings) -> None:
    row_id, message_id = sent_row(bsettings, "k1")
    verp = return_path(row_id, domain=BOUNCE_DOMAIN, secret=SECRET)
    done = run_ingest(bsettings, dsn("gone@example.net", message_id, to=verp), verp)
    assert (done.link.via, done.link.outbox_id) == ("verp", row_id)
    assert done.suppressed == ["gone@example.net"]
    entry = suppressed(bsettings, "gone@example.net")
    assert (entry.reason, entry.scope, entry.source_bounce_id) == (
        "hard_bounce",
        "all",
        done.bounce_id,
    )
    row = query(bsettings, "SELECT status, bounce_class FROM email_outbox WHERE id = %s", row_id)[0]
    assert row == ("sent", "hard")
    reasons = [
        r[0]
        for r in query(bsettings, "SELECT reason FROM email_event WHERE outbox_id = %s", row_id)
    ]
    assert reasons[-1] == "hard bounce 5.1.1 (verp)"
    # Nothing is ever sent to the address again.
    with psycopg.connect(bsettings.database_url) as conn:
        again = enqueue(
            conn,
            idempotency_key="k2",
            to="gone@example.net",
            template="login_code",
            params=LOGIN,
            priority="high",
            settings=bsettings,
        )
        conn.commit()
    assert again.suppressed


def test_forged_verp_token_never_suppresses(bsettings: Settings) -> None:
    row_id, message_id = sent_row(bsettings, "k1", to="victim@example.net")
    forged = return_path(row_id, domain=BOUNCE_DOMAIN, secret=OTHER_SECRET)
    done = run_ingest(bsettings, dsn("victim@example.net", message_id, to=forged), forged)
    assert done.link.forged
    assert done.suppressed == []
    assert suppressed(bsettings, "victim@example.net") is None
    stored = query(
        bsettings,
        "SELECT forged, link, processed_at IS NOT NULL, length(raw) > 0 FROM email_bounce",
    )
    assert stored == [(True, "none", True, True)]


def test_regression_forged_dsn_quoting_a_message_id_suppresses_nobody(
    bsettings: Settings,
) -> None:
    """Finding 1: a DSN to postmaster@ naming the victim and quoting the Message-ID
    of a guessable key suppressed the victim from all mail."""
    row_id, message_id = sent_row(bsettings, "login-7-1", to="victim@example.net")
    forged = dsn("victim@example.net", message_id, to=f"postmaster@{BOUNCE_DOMAIN}")
    with ConnectionPool(bsettings.database_url, min_size=1, max_size=2) as pool:
        server = BounceServer(bsettings, pool)
        server.start()
        try:
            with smtplib.SMTP("127.0.0.1", bsettings.bounce_port, timeout=10) as client:
                client.sendmail("", [f"postmaster@{BOUNCE_DOMAIN}"], forged)
            wait_until(
                lambda: (
                    query(
                        bsettings,
                        "SELECT count(*) FROM email_bounce WHERE processed_at IS NOT NULL",
                    )[0][0]
                    == 1
                ),
                timeout=10,
            )
        finally:
            server.stop()
    # Recorded against its row, acted on never.
    assert query(bsettings, "SELECT outbox_id, link FROM email_bounce") == [(row_id, "message_id")]
    assert suppressed(bsettings, "victim@example.net") is None
    assert query(bsettings, "SELECT bounce_class FROM email_outbox")[0][0] is None
    with psycopg.connect(bsettings.database_url) as conn:
        code = enqueue(
            conn,
            idempotency_key="login-7-2",
            to="victim@example.net",
            template="login_code",
            params=LOGIN,
            priority="high",
            settings=bsettings,
        )
        conn.commit()
    assert not code.suppressed


def test_regression_forged_unsubscribe_mail_quoting_a_message_id_is_not_acted_on(
    bsettings: Settings,
) -> None:
    """Finding 1: a mailto "unsubscribe" with a forged From and the quoted
    Message-ID gave a bulk suppression."""
    _, message_id = sent_row(bsettings, "k1", to="victim@example.net")
    request = (
        "From: victim@example.net\r\nTo: unsubscribe@bounces.shop.example\r\n"
        f"Subject: unsubscribe\r\nIn-Reply-To: {message_id}\r\nReferences: {message_id}\r\n"
        f"\r\nunsubscribe\r\n\r\n> Message-ID: {message_id}\r\n"
    ).encode()
    done = run_ingest(bsettings, request, f"unsubscribe@{BOUNCE_DOMAIN}")
    assert [r.reason for r in done.results] == ["unsubscribe"]
    assert done.link.via == "message_id"
    assert done.suppressed == []
    assert suppressed(bsettings, "victim@example.net") is None


def test_message_id_link_is_recorded_not_acted_on(bsettings: Settings) -> None:
    row_id, message_id = sent_row(bsettings, "k1", to="real@example.net")
    own = run_ingest(bsettings, dsn("real@example.net", message_id), None)
    assert (own.link.via, own.link.outbox_id) == ("message_id", row_id)
    assert own.suppressed == []
    assert suppressed(bsettings, "real@example.net") is None


def test_unlinked_bounce_is_stored_only(bsettings: Settings) -> None:
    done = run_ingest(bsettings, dsn("x@example.net", "<unknown@elsewhere.example>"), None)
    assert done.link.via == "none"
    assert done.suppressed == []
    assert (
        query(bsettings, "SELECT count(*) FROM email_bounce WHERE processed_at IS NOT NULL")[0][0]
        == 1
    )


def test_complaint_suppresses(bsettings: Settings) -> None:
    row_id, message_id = sent_row(bsettings, "k1", to="annoyed@example.net")
    verp = return_path(row_id, domain=BOUNCE_DOMAIN, secret=SECRET)
    report = arf("annoyed@example.net", message_id, return_path=verp)
    done = run_ingest(bsettings, report, "fbl@" + BOUNCE_DOMAIN)
    assert done.link.via == "verp"  # the returned headers' Return-Path
    assert [r.klass for r in done.results] == ["complaint"]
    assert suppressed(bsettings, "annoyed@example.net").reason == "complaint"


def test_delay_notice_is_not_a_verdict(bsettings: Settings) -> None:
    row_id, message_id = sent_row(bsettings, "k1")
    verp = return_path(row_id, domain=BOUNCE_DOMAIN, secret=SECRET)
    notice = dsn(
        "gone@example.net",
        message_id,
        status="4.4.7",
        action="delayed",
        diagnostic="smtp; 451 4.4.7 try later",
        to=verp,
    )
    done = run_ingest(bsettings, notice, verp)
    assert done.suppressed == []
    assert query(bsettings, "SELECT bounce_class FROM email_outbox")[0][0] is None


def test_soft_bounces_suppress_after_a_streak(bsettings: Settings) -> None:
    limit = bsettings.soft_bounce_limit
    rows = [sent_row(bsettings, f"k{i}", to="full@example.net") for i in range(limit + 1)]

    def soft(row: tuple[int, str]) -> Any:
        verp = return_path(row[0], domain=BOUNCE_DOMAIN, secret=SECRET)
        return run_ingest(
            bsettings,
            dsn(
                "full@example.net",
                row[1],
                status="4.2.2",
                to=verp,
                diagnostic="smtp; 452 4.2.2 Mailbox full",
            ),
            verp,
        )

    # The oldest send did not bounce: the streak counts only what follows it.
    for row in rows[1:-1]:
        assert soft(row).suppressed == []
    assert suppressed(bsettings, "full@example.net") is None
    assert soft(rows[-1]).suppressed == ["full@example.net"]
    assert suppressed(bsettings, "full@example.net").reason == "soft_bounces"


def test_a_delivery_between_breaks_the_streak(bsettings: Settings) -> None:
    limit = bsettings.soft_bounce_limit
    rows = [sent_row(bsettings, f"k{i}", to="flaky@example.net") for i in range(limit + 1)]
    for index, row in enumerate(rows):
        if index == 2:
            continue  # this one got through
        verp = return_path(row[0], domain=BOUNCE_DOMAIN, secret=SECRET)
        full = dsn(
            "flaky@example.net",
            row[1],
            status="4.2.2",
            to=verp,
            diagnostic="smtp; 452 4.2.2 Mailbox full",
        )
        run_ingest(bsettings, full, verp)
    assert suppressed(bsettings, "flaky@example.net") is None


def test_stored_but_unprocessed_bounces_are_picked_up(bsettings: Settings) -> None:
    row_id, message_id = sent_row(bsettings, "k1")
    verp = return_path(row_id, domain=BOUNCE_DOMAIN, secret=SECRET)
    with psycopg.connect(bsettings.database_url) as conn:
        bounce_reports.store_bounce(conn, dsn("gone@example.net", message_id, to=verp), verp)
        conn.commit()  # then the process died
        assert process_pending(conn, bsettings) == 1
        assert process_pending(conn, bsettings) == 0
    assert suppressed(bsettings, "gone@example.net") is not None


def test_bounce_server_over_smtp(bsettings: Settings) -> None:
    row_id, message_id = sent_row(bsettings, "k1")
    verp = return_path(row_id, domain=BOUNCE_DOMAIN, secret=SECRET)
    with ConnectionPool(bsettings.database_url, min_size=1, max_size=2) as pool:
        server = BounceServer(bsettings, pool)
        server.start()
        try:
            with smtplib.SMTP("127.0.0.1", bsettings.bounce_port, timeout=10) as client:
                with pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
                    client.sendmail("", ["victim@example.net"], b"Subject: relay me\r\n\r\nx\r\n")
                assert refused.value.recipients["victim@example.net"][0] == 550
                client.sendmail("", [verp], dsn("gone@example.net", message_id, to=verp))
            wait_until(lambda: suppressed(bsettings, "gone@example.net") is not None, timeout=10)
        finally:
            server.stop()
    stored = query(bsettings, "SELECT envelope_to, link, outbox_id FROM email_bounce")
    assert stored == [(verp, "verp", row_id)]


def test_regression_nul_byte_bounce_neither_stops_the_server_nor_reprocessing(
    bsettings: Settings,
) -> None:
    row_id, message_id = sent_row(bsettings, "k1", to="poison@example.net")
    verp = return_path(row_id, domain=BOUNCE_DOMAIN, secret=SECRET)
    poison = dsn(
        "poison@example.net", message_id, to=verp, diagnostic="smtp; 550 5.1.1 user\x00unknown"
    ).replace(b"unknown", b"unknown \xff\xfe")
    good_id, good_message_id = sent_row(bsettings, "k2", to="gone@example.net")
    good_verp = return_path(good_id, domain=BOUNCE_DOMAIN, secret=SECRET)
    with psycopg.connect(bsettings.database_url) as conn:
        # Left unprocessed by a crash, before the good one: a start processes both.
        bounce_reports.store_bounce(conn, poison, verp)
        bounce_reports.store_bounce(
            conn, dsn("gone@example.net", good_message_id, to=good_verp), good_verp
        )
        conn.commit()
    with ConnectionPool(bsettings.database_url, min_size=1, max_size=2) as pool:
        server = BounceServer(bsettings, pool)
        server.start()  # exited at start before ("\u0000 cannot be converted to text")
        try:
            with smtplib.SMTP("127.0.0.1", bsettings.bounce_port, timeout=10) as client:
                client.sendmail("", [verp], poison)  # and once more, live
                client.sendmail("", [good_verp], dsn("gone@example.net", good_message_id))
            wait_until(
                lambda: (
                    query(
                        bsettings, "SELECT count(*) FROM email_bounce WHERE processed_at IS NULL"
                    )[0][0]
                    == 0
                ),
                timeout=10,
            )
        finally:
            server.stop()
    assert suppressed(bsettings, "gone@example.net") is not None
    assert suppressed(bsettings, "poison@example.net") is not None  # the text was made safe
    diagnostics = query(
        bsettings,
        "SELECT results->0->>'diagnostic' FROM email_bounce WHERE envelope_to = %s",
        verp,
    )
    assert len(diagnostics) == 2
    assert all("\x00" not in d and "\ufffd" in d for (d,) in diagnostics)
    with psycopg.connect(bsettings.database_url) as conn:
        assert process_pending(conn, bsettings) == 0


def test_a_report_that_cannot_be_processed_is_marked_and_skipped(bsettings: Settings) -> None:
    with psycopg.connect(bsettings.database_url) as conn:
        bad = bounce_reports.store_report(conn, b"{not json", source="postmark", event_id="e1")
        good_id, message_id = sent_row(bsettings, "k1")
        verp = return_path(good_id, domain=BOUNCE_DOMAIN, secret=SECRET)
        bounce_reports.store_bounce(conn, dsn("gone@example.net", message_id, to=verp), verp)
        conn.commit()
        assert process_pending(conn, bsettings) == 2
        assert process_pending(conn, bsettings) == 0
    [(processed, link, error)] = query(
        bsettings,
        "SELECT processed_at IS NOT NULL, link, error FROM email_bounce WHERE id = %s",
        bad,
    )
    assert (processed, link) == (True, "none")
    assert error.startswith("unprocessable: ")
    assert suppressed(bsettings, "gone@example.net") is not None
