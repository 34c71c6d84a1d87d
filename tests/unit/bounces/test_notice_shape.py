"""A message with no delivery report is read by what it says, not by one header.

Notices that travelled through list software carry List-Id and List-Unsubscribe and
are still notices; out-of-office replies and people's answers that quote failure
wording, or a whole notice, are not.  Every message here is written for the test.
"""

from __future__ import annotations

import pytest

from outbox.bounce_parsing import BounceResult, parse_bounce
from outbox.bounce_parsing.mime import load
from outbox.bounce_parsing.notice_shape import (
    own_lines,
    quotes_failure_code,
    sent_by_mail_system,
    written_as_reply,
)
from outbox.testing.list_delivery import LIST_ADDRESS, via_list

from .conftest import fixture_bytes, load_expected


def message(headers: str, body: str) -> bytes:
    return (headers.strip() + "\n\n" + body).encode("utf-8")


def verdicts(raw: bytes) -> list[tuple[str, str | None, str]]:
    return [(r.klass, r.recipient, r.status) for r in parse_bounce(raw)]


POSTFIX_TEXT = """This is the mail system at host mx.example.net.

I'm sorry to have to inform you that your message could not
be delivered to one or more recipients.

<gone@example.net>: host mail.example.net[192.0.2.7] said: 550 5.1.1
    <gone@example.net>: Recipient address rejected: User unknown (in reply to
    RCPT TO command)
"""

LIST_HEADERS = """List-Id: Team <team.lists.example.com>
List-Unsubscribe: <mailto:team-leave@lists.example.com>
Precedence: list
Sender: team-bounces@lists.example.com"""


# -- notices that travelled through list software ---------------------------------


def test_notice_with_list_headers_is_read() -> None:
    raw = message(
        "From: Mail Delivery System <MAILER-DAEMON@mx.example.net>\n"
        "To: team@lists.example.com\n"
        "Subject: [team] Undelivered Mail Returned to Sender\n" + LIST_HEADERS,
        POSTFIX_TEXT,
    )
    assert verdicts(raw) == [("hard", "gone@example.net", "5.1.1")]


def test_notice_from_a_munged_sender_is_read_by_its_status_lines() -> None:
    # List software that rewrites From (DMARC mitigation) hides who sent it;
    # the server's code on the notice's own lines still says what it is.
    raw = message(
        "From: Mail Delivery System via team <team@lists.example.com>\n"
        "To: team@lists.example.com\n"
        "Subject: [team] Mail delivery failed\n" + LIST_HEADERS,
        POSTFIX_TEXT,
    )
    assert verdicts(raw) == [("hard", "gone@example.net", "5.1.1")]


def test_list_footer_address_does_not_hide_the_failed_recipient() -> None:
    raw = message(
        "From: postmaster@mx.example.net\nSubject: [team] Delivery failure\n" + LIST_HEADERS,
        "Your message to gone@example.net could not be delivered.\n"
        "The server answered: 550 5.1.1 user unknown\n\n"
        "_______________________________________________\n"
        f"team mailing list\n{LIST_ADDRESS}\n",
    )
    assert verdicts(raw) == [("hard", "gone@example.net", "5.1.1")]


def test_delay_warning_through_a_list_is_not_hard() -> None:
    raw = message(
        "From: Mail Delivery Subsystem <MAILER-DAEMON@mx.example.net>\n"
        "Subject: [team] Warning: could not send message for past 4 hours\n" + LIST_HEADERS,
        "    **********************************************\n"
        "    **      THIS IS A WARNING MESSAGE ONLY      **\n"
        "    **  YOU DO NOT NEED TO RESEND YOUR MESSAGE  **\n"
        "    **********************************************\n\n"
        "The original message was received at Mon, 3 Mar 2025 10:00:00 GMT\n\n"
        "   ----- Transcript of session follows -----\n"
        "<slow@example.net>... Deferred: Connection timed out with mail.example.net.\n"
        "Warning: message still undelivered after 4 hours\n",
    )
    results = parse_bounce(raw)
    assert [(r.klass, r.recipient, r.reason) for r in results] == [
        ("soft", "slow@example.net", "delayed")
    ]


_EXPECTED = load_expected()
# Unsubscribe requests and feedback reports are not notices a list redistributes.
_NOTICES = sorted(
    name
    for name, records in _EXPECTED.items()
    if all(record["class"] != "complaint" for record in records)
)


@pytest.mark.parametrize("name", _NOTICES)
def test_list_software_changes_no_verdict(name: str) -> None:
    raw = fixture_bytes(name)
    assert verdicts(via_list(raw)) == verdicts(raw)


def test_bulk_mail_dressed_as_a_notice_is_not_read_with_or_without_list_headers() -> None:
    body = (
        "Some of your messages could not be delivered and are waiting for you.\n\n"
        "Release them today, or write to us:\n\nsales@promo.example.net\n"
    )
    headers = (
        "From: Mail Delivery System <offers@promo.example.net>\n"
        "Subject: Mail delivery failed: your messages are on hold"
    )
    assert parse_bounce(message(headers, body)) == []
    assert parse_bounce(via_list(message(headers, body))) == []


# -- auto-replies and people's answers -----------------------------------------------


def test_out_of_office_reply_quoting_a_failure_subject_is_left_alone() -> None:
    raw = message(
        "From: Dana Lee <dana@example.org>\nTo: receipts@example.com\n"
        "Subject: Automatic reply: Delivery failed - please reschedule\n"
        "Auto-Submitted: auto-replied",
        "I am out of the office until 12 March.\n"
        "Your message to dana@example.org will be read when I return.\n"
        "For anything urgent write to sam@example.org.\n",
    )
    assert parse_bounce(raw) == []


def test_out_of_office_reply_with_failure_words_in_its_body_is_left_alone() -> None:
    raw = message(
        "From: Dana Lee <dana@example.org>\nSubject: Out of Office: Your receipt",
        "I am away. Mail to dana@example.org is not delivered to anyone while I am\n"
        "away and could not be delivered to my deputy: permanent error, sorry.\n"
        "Please write to sam@example.org.\n",
    )
    assert parse_bounce(raw) == []


def test_auto_reply_through_a_list_is_left_alone() -> None:
    raw = message(
        "From: Dana Lee <dana@example.org>\nSubject: Out of Office: hello\n" + LIST_HEADERS,
        "I am away until Monday; mail to dana@example.org could not be delivered to me.\n",
    )
    assert parse_bounce(via_list(raw)) == []


def test_human_reply_quoting_a_notice_is_left_alone() -> None:
    quoted = "".join(f"> {line}\n" for line in POSTFIX_TEXT.splitlines())
    raw = message(
        "From: Dana Lee <dana@example.org>\nTo: help@example.com\n"
        "Subject: Re: Undelivered Mail Returned to Sender\n"
        "In-Reply-To: <n1@mx.example.net>",
        "I keep getting this when I write to a colleague. Can you help?\n\nDana\n\n"
        "On Mon, 3 Mar 2025 at 10:00, Mail Delivery System "
        "<MAILER-DAEMON@mx.example.net> wrote:\n" + quoted,
    )
    assert parse_bounce(raw) == []


def test_human_reply_without_a_reply_subject_is_known_by_its_quote() -> None:
    quoted = "".join(f"> {line}\n" for line in POSTFIX_TEXT.splitlines())
    raw = message(
        "From: Dana Lee <dana@example.org>\nSubject: Undelivered Mail Returned to Sender",
        "What does this mean?\n\nOn 3 Mar 2025, postmaster wrote:\n" + quoted,
    )
    assert parse_bounce(raw) == []


def test_person_forwarding_a_notice_is_left_alone() -> None:
    raw = message(
        "From: Dana Lee <dana@example.org>\nSubject: Fwd: Mail delivery failed",
        "See below, the address must be wrong.\n\n"
        "---------- Forwarded message ---------\n"
        "From: Mail Delivery System <MAILER-DAEMON@mx.example.net>\n\n" + POSTFIX_TEXT,
    )
    assert parse_bounce(raw) == []


def test_human_reply_to_a_parcel_notice_is_left_alone() -> None:
    raw = message(
        "From: Dana Lee <dana@example.org>\nTo: parcels@example.com\n"
        "Subject: RE: Your parcel could not be delivered",
        "Please leave it with my neighbour, or mail me at dana.lee@example.net.\n"
        "My old address dana@example.org: permanent error on your side?\n\n"
        "-----Original Message-----\nFrom: parcels@example.com\n",
    )
    assert parse_bounce(raw) == []


def test_notice_from_the_mail_system_is_read_even_with_a_reply_subject() -> None:
    # Some gateways answer with "Re: <original subject>" from their postmaster.
    raw = message(
        "From: post_master@sms.example.net\nSubject: Re: Your code",
        "Message could not be delivered to gone@sms.example.net: 550 5.1.1 No such user\n",
    )
    assert verdicts(raw) == [("hard", "gone@sms.example.net", "5.1.1")]


def test_short_notice_without_code_is_read_when_it_names_a_failure_and_reason() -> None:
    raw = fixture_bytes("kddi-mailbox-full.eml")
    assert [r.reason for r in parse_bounce(raw)] == ["mailbox_full"]


# -- the evidence, one piece at a time -------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "system"),
    [
        ("From: MAILER-DAEMON@mx.example.net", True),
        ("From: Mail Delivery System <postmaster@mx.example.net>", True),
        ("From: MAILER-DAEMON", True),
        ("From: <>", True),
        ("From: Dana <dana@example.org>\nX-Failed-Recipients: gone@example.net", True),
        ("From: Mail Delivery System <offers@promo.example.net>", False),
        ("From: Dana <dana@example.org>", False),
    ],
)
def test_sent_by_mail_system(headers: str, system: bool) -> None:
    msg = load(message(headers + "\nSubject: x", ""))
    assert msg is not None
    assert sent_by_mail_system(msg) is system


@pytest.mark.parametrize(
    ("subject", "body", "reply"),
    [
        ("Re: hello", "", True),
        ("RE: hello", "", True),
        ("AW: hallo", "", True),
        ("Fwd: Mail delivery failed", "", True),
        ("[team] Re: hello", "", True),
        ("Automatic reply: hello", "", True),
        ("hello", "On Mon, 3 Mar 2025, Dana wrote:\n> quoted\n", True),
        ("hallo", "Am 3. März 2025 schrieb Dana:\n> zitiert\n", True),
        ("Undelivered Mail Returned to Sender", "", False),
        ("Returned mail: see transcript for details", "", False),
        ("Mail delivery failed: returning message to sender", "", False),
        ("hello", "On Monday the server wrote:\nnothing quoted\n", False),
    ],
)
def test_written_as_reply(subject: str, body: str, reply: bool) -> None:
    msg = load(message(f"From: a@example.org\nSubject: {subject}", body))
    assert msg is not None
    assert written_as_reply(msg, body) is reply


@pytest.mark.parametrize(
    ("text", "quotes"),
    [
        ("    550 5.1.1 <gone@example.net>: User unknown", True),
        ("Remote host said: 554 refused", True),
        ("Status: 4.2.2 (mailbox full)", True),
        ("550-Mailbox unavailable", True),
        ("Only 450 left in stock at 2.5.0 prices", False),
        ("Version 5.1.1 is out", True),  # a code is a code: the other evidence decides
        ("delivered: 250 OK", False),
        ("", False),
    ],
)
def test_quotes_failure_code(text: str, quotes: bool) -> None:
    assert quotes_failure_code(text) is quotes


def test_own_lines_drop_quoted_text() -> None:
    assert own_lines("mine\n> theirs\n  > theirs too\nmine again") == "mine\nmine again"


def test_results_are_bounce_results() -> None:
    raw = message("From: MAILER-DAEMON@mx.example.net\nSubject: failure", POSTFIX_TEXT)
    assert all(isinstance(r, BounceResult) for r in parse_bounce(raw))
