"""RFC 3463 / RFC 5321 helpers."""

from __future__ import annotations

import pytest

from outbox.bounce_parsing import status_codes


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5.1.1", "5.1.1"),
        ("5.1.1 (Remote SMTP server has rejected address)", "5.1.1"),
        ("  4.4.7", "4.4.7"),
        ("#5.1.0", "5.1.0"),
        ("5.7.509", "5.7.509"),
        ("4.7.650 (rate limited)", "4.7.650"),
        ("", None),
        (None, None),
        ("delivered", None),
        ("6.1.1", None),
        ("5.8.1", None),
    ],
)
def test_normalize(value: str | None, expected: str | None) -> None:
    assert status_codes.normalize(value) == expected


def test_find_all_skips_addresses_versions_and_dates() -> None:
    text = (
        "host 192.0.2.25 (Sendmail 8.14.4/8.14.4) said: 550 5.1.1 <a@example.net>... "
        "4.16.55.1 deferred; see 2025.03.04 and (#5.2.2)"
    )
    assert status_codes.find_all(text) == ["5.1.1", "5.2.2"]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("550 5.1.1 User unknown", 550),
        ("550-5.7.26 Unauthenticated email", 550),
        ("host mx.example.net[192.0.2.1] said: 452 4.2.2 Over quota", 452),
        ("Remote host said: 554 delivery error", 554),
        ("Size (in bytes): 512 Number of lines: 12", None),
        ("Connection timed out", None),
        ("2025550100@vtext.example.net", None),
    ],
)
def test_find_reply_code(text: str, code: int | None) -> None:
    assert status_codes.find_reply_code(text) == code


def test_choose_prefers_the_remote_servers_specific_code() -> None:
    assert (
        status_codes.choose("5.0.0", "smtp; 550 5.1.1 <a@example.net>... User unknown") == "5.1.1"
    )
    assert status_codes.choose(
        "4.4.7", "554 4.4.7 Message expired <421 4.4.2 Connection timed out>"
    ) == ("4.4.2")
    assert status_codes.choose("5.1.1", "550 5.7.1 IP address blacklisted") == "5.7.1"
    assert status_codes.choose("5.2.2", "552 Mailbox full") == "5.2.2"
    assert status_codes.choose("5.0.0", "550 Rejected") == "5.0.0"
    assert status_codes.choose(None, "550 5.0.0 rejected") == "5.0.0"
    assert status_codes.choose(None, "no code at all") is None


@pytest.mark.parametrize(
    ("reason", "reply", "temporary", "expected"),
    [
        ("user_unknown", 550, False, "5.1.1"),
        ("host_unknown", None, False, "5.1.2"),
        ("mailbox_full", 452, False, "4.2.2"),
        ("mailbox_full", 552, False, "5.2.2"),
        ("mailbox_full", None, True, "4.2.2"),
        ("no_mail_host", 556, False, "5.1.10"),
        ("expired", None, False, "5.4.7"),
        ("delayed", None, True, "4.0.0"),
        ("unknown", 554, False, "5.0.0"),
        (None, None, False, "5.0.0"),
    ],
)
def test_derive(reason: str | None, reply: int | None, temporary: bool, expected: str) -> None:
    assert status_codes.derive(reason, reply, temporary) == expected


@pytest.mark.parametrize(
    ("text", "stage"),
    [
        ("550 5.1.1 <a@example.net>: User unknown (in reply to RCPT TO command)", "rcpt"),
        ("554 5.7.1 spam (in reply to end of DATA command)", "data"),
        ("SMTP error from remote mail server after MAIL FROM:<b@example.com> SIZE=100:", "mail"),
        ("SMTP error from remote mail server after initial connection:", "connect"),
        ("SMTP error from remote mail server after EHLO mail.example.com:", "helo"),
        (">>> RCPT To:<a@example.net>\n<<< 550 User unknown", "rcpt"),
        (">>> DATA\n<<< 550 Unknown user a@example.net", "data"),
        ("Connected to 192.0.2.1 but sender was rejected.", "mail"),
        ("192.0.2.1 does not like recipient.", "rcpt"),
        ("Sorry, no mailbox here by that name.", None),
    ],
)
def test_smtp_stage(text: str, stage: str | None) -> None:
    assert status_codes.smtp_stage(text) == stage


def test_reply_text_starts_at_the_servers_answer() -> None:
    text = (
        "host mx.example.net [192.0.2.1] SMTP error after RCPT TO:<a@example.net>: 550 5.1.1 Nope"
    )
    assert status_codes.reply_text(text) == "550 5.1.1 Nope"
    assert status_codes.reply_text("retry timeout exceeded") is None
