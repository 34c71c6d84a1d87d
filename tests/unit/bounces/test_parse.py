"""Every hand-written fixture gives exactly the verdicts recorded in expected.json."""

from __future__ import annotations

import pytest

from outbox.bounce_parsing import BounceResult, parse_bounce
from outbox.bounce_parsing.bounce_result import HARD_REASONS

from .conftest import FIXTURES, fixture_bytes, load_expected

EXPECTED = load_expected()
BOUNCE_FILES = sorted(name for name, records in EXPECTED.items() if records)
SILENT_FILES = sorted(name for name, records in EXPECTED.items() if not records)


def test_fixture_table_matches_directory() -> None:
    on_disk = {p.name for p in FIXTURES.glob("*.eml")}
    assert on_disk == set(EXPECTED)
    assert len(on_disk) >= 60


@pytest.mark.parametrize("name", BOUNCE_FILES)
def test_fixture_verdicts(name: str) -> None:
    results = parse_bounce(fixture_bytes(name))
    got = [r.to_json() for r in results]
    wanted = EXPECTED[name]
    assert len(got) == len(wanted), got
    for want, have in zip(wanted, got, strict=True):
        for key, value in want.items():
            assert have[key] == value, (key, have)


@pytest.mark.parametrize("name", SILENT_FILES)
def test_non_bounces_give_nothing(name: str) -> None:
    assert parse_bounce(fixture_bytes(name)) == []


@pytest.mark.parametrize("name", BOUNCE_FILES)
def test_results_are_well_formed(name: str) -> None:
    for result in parse_bounce(fixture_bytes(name)):
        assert isinstance(result, BounceResult)
        assert result.klass in ("hard", "soft", "complaint")
        if result.klass != "complaint":
            assert result.status is not None
            assert result.status[0] in "45"
            assert result.reason
        if result.diagnostic is not None:
            assert 0 < len(result.diagnostic) <= 1000


def test_hard_needs_a_dead_address_reason() -> None:
    seen = set()
    for name in BOUNCE_FILES:
        for result in parse_bounce(fixture_bytes(name)):
            if result.klass == "hard":
                assert result.reason in HARD_REASONS, (name, result.reason)
                seen.add(result.reason)
    assert seen == HARD_REASONS


def test_policy_refusals_are_never_hard() -> None:
    policy_files = [
        "postfix-blocked-rbl.eml",
        "postfix-dmarc-reject.eml",
        "postfix-relay-denied.eml",
        "office365-banned-ip.eml",
        "sendmail-blacklisted.eml",
        "barracuda-spam-firewall.eml",
        "mimecast-security-policy.eml",
        "aol-policy-reasons.eml",
        "exim-spam-rejected.eml",
        "gmail-account-disabled.eml",
    ]
    for name in policy_files:
        classes = {r.klass for r in parse_bounce(fixture_bytes(name))}
        assert classes == {"soft"}, name


def test_to_json_exposes_class_key() -> None:
    (result,) = parse_bounce(fixture_bytes("postfix-user-unknown.eml"))
    data = result.to_json()
    assert data["class"] == "hard"
    assert "klass" not in data
    assert set(data) == {
        "class",
        "recipient",
        "status",
        "diagnostic",
        "original_message_id",
        "reporting_mta",
        "reason",
        "verp_token",
    }
    assert data["diagnostic"] == (
        "550 5.1.1 <alice@example.net>: Recipient address rejected: "
        "User unknown in virtual mailbox table"
    )


def test_result_is_frozen() -> None:
    (result,) = parse_bounce(fixture_bytes("postfix-user-unknown.eml"))
    with pytest.raises(AttributeError):
        result.klass = "soft"  # type: ignore[misc]


def test_accepts_bytearray_and_rejects_text() -> None:
    raw = fixture_bytes("qmail-local-no-mailbox.eml")
    assert parse_bounce(bytearray(raw))[0].recipient == "hugo@example.com"
    assert parse_bounce(raw.decode("ascii")) == []  # type: ignore[arg-type]


def test_crlf_line_endings_give_the_same_verdicts() -> None:
    for name in ("exim-two-recipients.eml", "postfix-two-recipients.eml", "qmail-over-quota.eml"):
        raw = fixture_bytes(name)
        crlf = raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        assert parse_bounce(crlf) == parse_bounce(raw), name


NOTICE_WITH_CODE_APART = b"""\
From: postmaster@gw.example.net
To: bounces+ord-1@example.com
Subject: Undeliverable Mail
Content-Type: text/plain

Your message could not be delivered because of

550 5.1.1 User unknown

The following recipients were affected:
    %s


Additional Information
======================
Sender-MTA:         <192.0.2.250>
"""


def test_a_one_recipient_notice_lends_its_only_code_to_the_recipient() -> None:
    (result,) = parse_bounce(NOTICE_WITH_CODE_APART % b"kim@example.org")
    assert (result.recipient, result.klass, result.status) == ("kim@example.org", "hard", "5.1.1")


def test_a_notice_about_several_recipients_lends_no_code() -> None:
    results = parse_bounce(NOTICE_WITH_CODE_APART % b"kim@example.org\n    lee@example.org")
    lee = results[-1]
    # lee's own lines quote no code, so none is lent; the notice's reason, stated
    # for every recipient it lists, still applies and the code is derived from it.
    assert (lee.recipient, lee.klass, lee.reason) == ("lee@example.org", "hard", "user_unknown")
