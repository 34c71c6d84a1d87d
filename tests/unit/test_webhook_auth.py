"""Webhook authentication: Postmark's basic auth, Resend's Svix signatures."""

from __future__ import annotations

import base64

import pytest

from outbox.bounce_receiving.webhook_auth import (
    basic_auth_matches,
    scrape_authorized,
    svix_signature_valid,
)

# The worked example of Svix's "Verifying webhooks manually" documentation.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = "1614265330"
BODY = b'{"test": 2432232314}'
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def valid(**changes: object) -> bool:
    args: dict[str, object] = {
        "msg_id": MSG_ID,
        "timestamp": TIMESTAMP,
        "signatures": SIGNATURE,
        "body": BODY,
        "now": float(TIMESTAMP) + 10,
    }
    args.update(changes)
    secret = str(args.pop("secret", SECRET))
    return svix_signature_valid(secret, **args)  # type: ignore[arg-type]


def test_the_documented_svix_example_verifies() -> None:
    assert valid()


def test_any_change_breaks_the_signature() -> None:
    assert not valid(body=BODY + b" ")
    assert not valid(msg_id="msg_other")
    assert not valid(secret="whsec_" + base64.b64encode(b"another key").decode())
    assert not valid(signatures="v1,AAAA" + SIGNATURE[7:])


def test_one_of_several_signatures_is_enough_and_only_v1_counts() -> None:
    assert valid(signatures=f"v1,bm90IGl0 {SIGNATURE}")
    assert not valid(signatures="v2" + SIGNATURE[2:])


def test_stale_or_future_timestamps_are_refused() -> None:
    assert not valid(now=float(TIMESTAMP) + 301)
    assert not valid(now=float(TIMESTAMP) - 301)
    assert valid(now=float(TIMESTAMP) - 299)


def test_missing_or_malformed_parts_are_refused() -> None:
    assert not valid(signatures=None)
    assert not valid(msg_id="")
    assert not valid(timestamp="soon")
    assert not valid(secret="whsec_not base64!")
    assert not valid(secret="")


def basic(user_password: str) -> str:
    return "Basic " + base64.b64encode(user_password.encode()).decode()


def test_basic_auth() -> None:
    assert basic_auth_matches(basic("hook:s3cret"), "hook:s3cret")
    assert basic_auth_matches("basic " + basic("hook:s3cret")[6:], "hook:s3cret")
    assert not basic_auth_matches(basic("hook:wrong"), "hook:s3cret")
    assert not basic_auth_matches(basic("hook:s3cret"), "")
    assert not basic_auth_matches(None, "hook:s3cret")
    assert not basic_auth_matches("Bearer hook:s3cret", "hook:s3cret")
    assert not basic_auth_matches("Basic !!!", "hook:s3cret")


def _basic_header(credentials: str) -> str:
    return "Basic " + base64.b64encode(credentials.encode()).decode()


@pytest.mark.parametrize(
    ("header", "expected", "ok"),
    [
        (_basic_header("prom:long-password-1234"), "prom:long-password-1234", True),
        (_basic_header("prom:wrong"), "prom:long-password-1234", False),
        ("Bearer prom:long-password-1234", "prom:long-password-1234", False),
        ("Bearer " + "t" * 40, "t" * 40, True),
        ("bearer  " + "t" * 40, "t" * 40, True),
        ("Bearer " + "u" * 40, "t" * 40, False),
        (_basic_header("x:" + "t" * 40), "t" * 40, False),
        (None, "t" * 40, False),
        ("Bearer ", "", False),  # nothing configured: nothing is authorized
    ],
)
def test_a_scrape_is_authorized_by_the_configured_credentials(
    header: str | None, expected: str, ok: bool
) -> None:
    assert scrape_authorized(header, expected) is ok
