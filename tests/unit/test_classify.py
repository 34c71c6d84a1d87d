from __future__ import annotations

import pytest

from outbox.delivery.classify import (
    classify,
    enhanced_status,
    is_greylisting,
    queue_id,
    refuses_address,
)
from outbox.models import Reply, Stage, Verdict

SENT_REPLIES = [
    ("2.0.0 Ok: queued as 4Bx7yQ1zKzz9", "4Bx7yQ1zKzz9"),  # Postfix
    ("OK id=1rAbCd-000Xyz-9Q", "1rAbCd-000Xyz-9Q"),  # Exim
    ("2.0.0 OK  1700000000 a1b2c3d4e5si123.45 - gsmtp", "a1b2c3d4e5si123.45"),  # Gmail
    (
        "2.6.0 <abc@mail.example> [InternalId=123, Hostname=EX1] Queued mail for delivery",
        "abc@mail.example",
    ),  # Exchange
    ("Ok 0100018c2f9c6a7e-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-000000", None),
    ("2.0.0 xAB12cd3456789 Message accepted for delivery", "xAB12cd3456789"),  # sendmail
    ("OK", None),  # aiosmtpd
]


@pytest.mark.parametrize(("text", "expected_id"), SENT_REPLIES)
def test_2yz_is_sent_with_the_relays_queue_id(text: str, expected_id: str | None) -> None:
    outcome = classify(Reply(Stage.FINAL_REPLY, 250, text))
    assert outcome.verdict is Verdict.SENT
    if expected_id is not None:
        assert outcome.provider_message_id == expected_id


def test_ses_message_id_is_kept() -> None:
    text = "Ok 0100018c2f9c6a7e-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-000000"
    assert queue_id(text) == "0100018c2f9c6a7e-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-000000"


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (421, "4.3.2 Service not available, closing transmission channel"),
        (450, "4.2.1 Mailbox busy"),
        (451, "4.3.0 Local error in processing"),
        (452, "4.5.3 Too many recipients"),
        (454, "4.7.0 Temporary authentication failure"),
    ],
)
def test_4yz_retries(code: int, text: str) -> None:
    for stage in (Stage.MAIL, Stage.RCPT, Stage.DATA, Stage.FINAL_REPLY, Stage.GREETING):
        outcome = classify(Reply(stage, code, text))
        assert outcome.verdict is Verdict.RETRY
        assert not outcome.greylisted
        assert outcome.enhanced_status == text.split(maxsplit=1)[0]


@pytest.mark.parametrize(
    "text",
    [
        "4.7.1 <a@b.example>: Recipient address rejected: Greylisted, see http://postgrey",
        "4.2.0 Greylisted, please try again in 300 seconds",
        "Requested action aborted: try again later",
        "4.7.1 Please retry later",
        "Temporarily deferred, try again later",
        "4.7.1 graylisted",
    ],
)
def test_greylisting_is_recognised(text: str) -> None:
    outcome = classify(Reply(Stage.RCPT, 450, text))
    assert outcome.verdict is Verdict.RETRY
    assert outcome.greylisted
    assert is_greylisting(451, text)


def test_greylisting_needs_a_4yz() -> None:
    assert not is_greylisting(550, "greylisted")


@pytest.mark.parametrize(
    ("code", "text", "stage"),
    [
        (550, "5.1.1 <nobody@example.com>: Recipient address rejected: User unknown", Stage.RCPT),
        (552, "5.3.4 Message size exceeds fixed limit", Stage.FINAL_REPLY),
        (553, "5.1.8 Sender address rejected: Domain not found", Stage.MAIL),
        (554, "5.7.1 Message rejected as spam", Stage.FINAL_REPLY),
        (551, "User not local", Stage.RCPT),
        (503, "5.5.1 Error: need RCPT command", Stage.DATA),
    ],
)
def test_5yz_fails_at_once_with_the_reply_text(code: int, text: str, stage: Stage) -> None:
    outcome = classify(Reply(stage, code, text))
    assert outcome.verdict is Verdict.FAILED
    assert text in outcome.reason
    assert str(code) in outcome.reason


@pytest.mark.parametrize("stage", [Stage.GREETING, Stage.EHLO, Stage.STARTTLS, Stage.AUTH])
def test_5yz_to_the_session_is_not_the_messages_fault(stage: Stage) -> None:
    outcome = classify(Reply(stage, 535, "5.7.8 Authentication credentials invalid"))
    assert outcome.verdict is Verdict.RETRY
    assert "session refused" in outcome.reason
    assert outcome.enhanced_status == "5.7.8"


def test_552_too_many_recipients_at_rcpt_is_transient() -> None:
    outcome = classify(Reply(Stage.RCPT, 552, "Too many recipients"))
    assert outcome.verdict is Verdict.RETRY
    assert classify(Reply(Stage.FINAL_REPLY, 552, "Too many recipients")).verdict is Verdict.FAILED


@pytest.mark.parametrize("code", [101, 334, 354, 600, 999])
def test_non_final_codes_retry(code: int) -> None:
    outcome = classify(Reply(Stage.FINAL_REPLY, code, "odd"))
    assert outcome.verdict is Verdict.RETRY
    assert "unexpected reply" in outcome.reason


@pytest.mark.parametrize(
    "stage",
    [s for s in Stage if s is not Stage.FINAL_REPLY],
)
@pytest.mark.parametrize("error", ["timeout", "connection refused", "connection reset", "tls: x"])
def test_broken_exchange_before_the_dot_retries(stage: Stage, error: str) -> None:
    outcome = classify(Reply(stage, error=error))
    assert outcome.verdict is Verdict.RETRY
    assert error in outcome.reason
    assert stage.value in outcome.reason


@pytest.mark.parametrize("error", ["timeout", "connection closed", None])
def test_broken_exchange_after_the_dot_is_uncertain(error: str | None) -> None:
    outcome = classify(Reply(Stage.FINAL_REPLY, error=error))
    assert outcome.verdict is Verdict.UNCERTAIN
    assert "no final reply" in outcome.reason


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("5.1.1 user unknown", "5.1.1"),
        ("  4.7.1 greylisted", "4.7.1"),
        ("2.0.0 Ok", "2.0.0"),
        ("5.7.26 DMARC", "5.7.26"),
        ("550 user unknown", None),
        ("Ok 5.1.1", None),
        ("3.1.1 nope", None),
        ("", None),
    ],
)
def test_enhanced_status(text: str, status: str | None) -> None:
    assert enhanced_status(text) == status


def test_session_stages() -> None:
    assert {s for s in Stage if s.is_session} == {
        Stage.CONNECT,
        Stage.GREETING,
        Stage.EHLO,
        Stage.STARTTLS,
        Stage.AUTH,
    }


@pytest.mark.parametrize(
    ("reply", "refused"),
    [
        (Reply(Stage.RCPT, 550, "5.1.1 <a@example.com>: Recipient address rejected: User unknown"),
         True),
        (Reply(Stage.RCPT, 550, "5.1.2 Host unknown"), True),
        (Reply(Stage.RCPT, 553, "5.1.3 Bad recipient address syntax"), True),
        (Reply(Stage.RCPT, 551, "5.1.6 Mailbox moved"), True),
        (Reply(Stage.RCPT, 556, "5.1.10 Recipient address has null MX"), True),
        (Reply(Stage.RCPT, 550, "5.7.1 Refused by policy"), False),
        (Reply(Stage.RCPT, 552, "5.2.2 Mailbox full"), False),
        (Reply(Stage.RCPT, 550, "5.2.1 Mailbox disabled"), False),
        (Reply(Stage.RCPT, 550, "User unknown"), False),  # no enhanced status: no proof
        (Reply(Stage.RCPT, 450, "4.1.1 Try later"), False),
        (Reply(Stage.RCPT, 550, "4.1.1 mixed signals"), False),
        (Reply(Stage.FINAL_REPLY, 550, "5.1.1 User unknown"), False),  # after DATA: a bounce
        (Reply(Stage.MAIL, 550, "5.1.1 sender unknown"), False),
        (Reply(Stage.RCPT, error="timeout"), False),
    ],
)  # fmt: skip
def test_a_refusal_at_rcpt_of_an_unknown_address_is_told_apart(reply: Reply, refused: bool) -> None:
    assert refuses_address(reply) is refused
