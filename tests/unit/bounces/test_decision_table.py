"""One case per row of the decision table in outbox/bounce_parsing/README.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from outbox.bounce_parsing import parse_bounce
from outbox.bounce_parsing.bounce_result import HARD_REASONS, Failure, Reason
from outbox.bounce_parsing.verdict import judge

from .conftest import fixture_bytes

README = Path(__file__).resolve().parents[3] / "outbox" / "bounce_parsing" / "README.md"


def _judge(diagnostic: str = "", **kwargs: str | bool | None) -> tuple[str, str, str, str]:
    kwargs.setdefault("recipient", "a@example.net")
    result = judge(Failure(diagnostic=diagnostic, **kwargs))  # type: ignore[arg-type]
    assert result is not None
    return result.klass, result.reason, result.status, result.rule


# (row id, diagnostic, Failure fields, class, reason)
ROWS: list[tuple[str, str, dict[str, str | bool | None], str, str]] = [
    ("E2", "550 5.1.1 mailbox over quota", {"status": "5.1.1"}, "soft", "mailbox_full"),
    ("E3", "550 5.1.1 Address rejected <a@example.net>", {}, "hard", "user_unknown"),
    ("E3", "550 5.4.4 Unable to route", {"action": "failed"}, "hard", "host_unknown"),
    ("E4", "551 User not here", {}, "hard", "has_moved"),
    ("E5", "550 Recipient does not exist", {}, "hard", "user_unknown"),
    ("E5", "550 this user is not a known user", {}, "hard", "user_unknown"),
    (
        "E6",
        "",
        {"status": "5.0.0", "context": "The mailbox was not found."},
        "hard",
        "user_unknown",
    ),
    ("E7", "550 go away", {"status": "5.7.1"}, "soft", "policy"),
    ("E8", "552 too much", {}, "soft", "mailbox_full"),
    ("E9", "", {"status": "5.0.0"}, "soft", "unknown"),
    (
        "D1",
        "550 Requested action not taken: mailbox unavailable (in reply to RCPT TO command)",
        {},
        "hard",
        "user_unknown",
    ),
    ("D1", "550 Requested action not taken: mailbox unavailable", {}, "soft", "unconfirmed_user"),
    # The answer opens with the recipient's own address: the reply to its RCPT TO.
    ("D1", "553 a@example.net: mailbox unavailable", {}, "hard", "user_unknown"),
    ("D1", "550 <a@example.net>: recipient rejected", {}, "hard", "user_unknown"),
    ("D1", "550 5.1.0 Address rejected", {}, "hard", "user_unknown"),
    ("D1", "550 Address rejected", {}, "soft", "unconfirmed_user"),
    (
        "D2",
        "SMTP error after MAIL FROM:<b@example.com>: 550 domain does not exist",
        {},
        "soft",
        "sender_rejected",
    ),
    ("D3", "550 5.7.1 User unknown", {}, "soft", "policy"),
    ("D3", "550 5.7.1 No such user! (in reply to RCPT TO command)", {}, "hard", "user_unknown"),
    ("D4", "550 : User unknown", {}, "soft", "filtered"),
    (
        "D5",
        "550 Unknown user a@example.net",
        {"status": "5.0.0", "context": ">>> DATA\n<<< 550 Unknown user a@example.net"},
        "soft",
        "filtered",
    ),
    (
        "D5",
        "550 <a@example.net>: User unknown in local recipient table",
        {"status": "5.0.0", "context": ">>> DATA"},
        "hard",
        "user_unknown",
    ),
    ("D6", "550 5.2.1 <a@example.net>... User Unknown", {"status": "5.2.1"}, "soft", "suspended"),
    (
        "D7",
        "550 5.1.1 <a@example.net>... User Unknown",
        {"context": "Your message was rejected: Not enough disk space", "sole": True},
        "soft",
        "mailbox_full",
    ),
    ("D8", "450 4.1.1 User unknown", {"status": "4.1.1"}, "soft", "user_unknown"),
    (
        "D8",
        "450 4.1.1 User unknown",
        {"status": "4.1.1", "action": "failed"},
        "hard",
        "user_unknown",
    ),
    ("D9", "Connection timed out", {"status": "4.4.1", "action": "delayed"}, "soft", "delayed"),
]


@pytest.mark.parametrize(
    ("row", "diagnostic", "fields", "klass", "reason"),
    ROWS,
    ids=[f"{r[0]}-{i}" for i, r in enumerate(ROWS)],
)
def test_decision_row(
    row: str, diagnostic: str, fields: dict[str, str | bool | None], klass: str, reason: str
) -> None:
    got = _judge(diagnostic, **fields)
    assert got[:2] == (klass, reason), got
    if row.startswith("D") and klass != "hard" and reason not in ("unconfirmed_user",):
        assert got[3] == row


@pytest.mark.parametrize("action", ["delivered", "relayed", "expanded"])
def test_e1_success_is_not_a_failure(action: str) -> None:
    assert judge(Failure(recipient="a@example.net", action=action)) is None
    assert judge(Failure(recipient="a@example.net", status="2.0.0", action="failed")) is None


def test_every_row_of_the_readme_is_tested() -> None:
    text = README.read_text()
    documented = {
        line.split("|")[1].strip()
        for line in text.splitlines()
        if line.startswith("| ")
        and line.split("|")[1].strip()[:1] in "EDR"
        and line.split("|")[1].strip()[1:].isdigit()
    }
    tested = {r[0] for r in ROWS} | {"E1", "R1", "R2", "R3", "R4"}
    assert documented == tested


@pytest.mark.parametrize(
    ("name", "recipients"),
    [
        ("dsn-original-recipient-forwarded.eml", ["pia@example.org"]),  # R1
        ("spam-bounce-lookalike.eml", []),  # R2
        ("postfix-via-mailing-list.eml", ["nell@example.org"]),  # R2: list headers decide nothing
        ("autoreply-failure-subject.eml", []),  # R2: a responder wrote it
        ("reply-quoting-notice.eml", []),  # R2: a person wrote it, quoting a notice
        ("notice-heading-list.eml", ["lou@example.org", "max@example.net"]),  # R3
        ("notice-prose-could-not-be-delivered.eml", ["kim@example.net"]),  # R3, R4
    ],
)
def test_recipient_rows(name: str, recipients: list[str]) -> None:
    assert [r.recipient for r in parse_bounce(fixture_bytes(name))] == recipients


NOT_NAMED_AS_FAILURE = b"""\
From: MAILER-DAEMON@mx.example.net
To: bounces+ord-1@example.com
Subject: Undelivered Mail
Content-Type: text/plain

Hello.  Questions?  Write to us:

help@example.org

--- Original message follows.

To: kim@example.net
"""


def test_r3_an_address_merely_mentioned_is_not_a_failed_recipient() -> None:
    results = parse_bounce(NOT_NAMED_AS_FAILURE)
    assert "help@example.org" not in [r.recipient for r in results]


def test_r4_the_bounces_own_addressee_needs_a_server_code() -> None:
    phishing = (
        b"From: Mail Delivery <postmaster@mx.example.net>\n"
        b"To: kim@example.net\nSubject: Delivery failed\nContent-Type: text/plain\n\n"
        b"Message delivery failed for your mailbox kim@example.net. Log in to release it.\n"
    )
    assert parse_bounce(phishing) == []


@pytest.mark.parametrize("reason", list(Reason))
def test_reason_table(reason: Reason) -> None:
    assert reason == reason.value  # a StrEnum compares equal to its string
    assert f"| `{reason.value}` | {reason.klass} |" in README.read_text()
    assert reason.suppresses == (reason.klass in ("hard", "complaint"))
    assert (reason in HARD_REASONS) == (reason.klass == "hard")
