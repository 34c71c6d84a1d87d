"""HTTP provider transports against local fakes of Postmark, Resend and SES on loopback.

Each fake follows its provider's documented request and response shapes
(tests/integration/providers/); nothing leaves the machine.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.parser import BytesHeaderParser
from typing import Any

import pytest

from outbox.config import Settings
from outbox.delivery.classify import classify_reply
from outbox.errors import ConfigError
from outbox.models import Stage, Verdict
from outbox.testing.sink import SmtpSink
from outbox.transports.base import OutgoingMessage, Transport
from outbox.transports.failover import Failover
from outbox.transports.http import HttpConfig
from outbox.transports.limit import Limited
from outbox.transports.parts import ORIGINAL_MESSAGE_ID
from outbox.transports.postmark import PostmarkConfig, PostmarkTransport
from outbox.transports.resend import ResendConfig, ResendTransport
from outbox.transports.select import build_transport
from outbox.transports.ses import SesConfig, SesTransport
from tests.integration.helpers import (
    Harness,
    add_login,
    add_newsletter,
    pool,
    query,
    statuses,
)
from tests.integration.providers import postmark as fake_postmark
from tests.integration.providers import resend as fake_resend
from tests.integration.providers import ses as fake_ses
from tests.integration.providers.postmark import FakePostmark
from tests.integration.providers.resend import FakeResend
from tests.integration.providers.server import Answer, FakeProvider, Slow
from tests.integration.providers.ses import FakeSes

TIMEOUT = 0.5  # the clients' read timeout; Slow steps wait longer

MESSAGE = OutgoingMessage(
    envelope_from="no-reply@shop.example",
    recipient="alice@example.com",
    data=b"From: Shop <no-reply@shop.example>\r\nTo: alice@example.com\r\nSubject: hi\r\n"
    b"Message-ID: <m1@shop.example>\r\nMIME-Version: 1.0\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n\r\nhello\r\n",
    message_id="<m1@shop.example>",
    idempotency_key="order-1-confirmation",
)


@pytest.fixture(autouse=True)
def _only_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy, no AWS profile, no instance metadata: every request stays on this machine."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", fake_ses.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", fake_ses.SECRET_KEY)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")


def http_config(fake: FakeProvider) -> HttpConfig:
    return HttpConfig(fake.url, connect_timeout=TIMEOUT, read_timeout=TIMEOUT)


@contextmanager
def postmark_transport(fake: FakePostmark) -> Iterator[PostmarkTransport]:
    transport = PostmarkTransport(PostmarkConfig(fake_postmark.TOKEN, http=http_config(fake)))
    try:
        yield transport
    finally:
        transport.close()


@contextmanager
def resend_transport(fake: FakeResend) -> Iterator[ResendTransport]:
    transport = ResendTransport(ResendConfig(fake_resend.API_KEY, http=http_config(fake)))
    try:
        yield transport
    finally:
        transport.close()


@contextmanager
def ses_transport(fake: FakeSes) -> Iterator[SesTransport]:
    config = SesConfig(
        region="eu-west-1", endpoint_url=fake.url, connect_timeout=TIMEOUT, read_timeout=TIMEOUT
    )
    transport = SesTransport(config)
    try:
        yield transport
    finally:
        transport.close()


def wait_for(check: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


# Postmark


def test_postmark_sends_the_fields_and_keeps_our_message_id() -> None:
    with FakePostmark() as fake, postmark_transport(fake) as transport:
        outcome = classify_reply(transport.send(MESSAGE))
    assert outcome.verdict is Verdict.SENT
    [accepted] = fake.accepted
    assert outcome.provider_message_id == accepted.message_id
    request = fake.requests[0]
    assert request.headers["x-postmark-server-token"] == fake_postmark.TOKEN
    assert request.headers["accept"] == "application/json"
    assert accepted.email["From"] == "Shop <no-reply@shop.example>"
    assert accepted.email["To"] == "alice@example.com"
    assert accepted.email["TextBody"] == "hello\n"
    assert accepted.email["MessageStream"] == "outbound"
    assert accepted.header("Message-ID") == "<m1@shop.example>"
    assert accepted.header(ORIGINAL_MESSAGE_ID) == "<m1@shop.example>"


def test_postmark_inactive_recipient_fails_with_its_text() -> None:
    with (
        FakePostmark(inactive=frozenset({"alice@example.com"})) as fake,
        postmark_transport(fake) as transport,
    ):
        reply = transport.send(MESSAGE)
    outcome = classify_reply(reply)
    assert (reply.code, outcome.verdict) == (422, Verdict.FAILED)
    assert outcome.reason.startswith("422 ErrorCode 406: You tried to send to recipient(s)")
    assert fake.accepted == []


def test_postmark_validation_error_fails() -> None:
    invalid = dataclasses.replace(MESSAGE, recipient="not-an-address")
    with FakePostmark() as fake, postmark_transport(fake) as transport:
        outcome = classify_reply(transport.send(invalid))
    assert outcome.verdict is Verdict.FAILED
    assert "ErrorCode 300: Invalid 'To' address" in outcome.reason


def test_postmark_wrong_token_is_retried_not_failed() -> None:
    with FakePostmark() as fake:
        transport = PostmarkTransport(PostmarkConfig("wrong", http=http_config(fake)))
        try:
            outcome = classify_reply(transport.send(MESSAGE))
        finally:
            transport.close()
    assert outcome.verdict is Verdict.RETRY
    assert "ErrorCode 10" in outcome.reason


def test_postmark_429_and_500_retry() -> None:
    with FakePostmark() as fake, postmark_transport(fake) as transport:
        fake.then(
            Answer(429, {"ErrorCode": 429, "Message": "Rate limit exceeded"}, {"Retry-After": "3"}),
            Answer(500, {"ErrorCode": 0, "Message": "Internal server error"}),
        )
        limited = classify_reply(transport.send(MESSAGE))
        broken = classify_reply(transport.send(MESSAGE))
        fine = classify_reply(transport.send(MESSAGE))
    assert (limited.verdict, limited.retry_after) == (Verdict.RETRY, 3.0)
    assert (broken.verdict, broken.retry_after) == (Verdict.RETRY, None)
    assert fine.verdict is Verdict.SENT
    assert len(fake.accepted) == 1


def test_postmark_timeout_after_the_request_arrived_is_uncertain() -> None:
    with FakePostmark() as fake, postmark_transport(fake) as transport:
        fake.then(Slow(TIMEOUT * 3))
        reply = transport.send(MESSAGE)
    assert (reply.stage, reply.code) == (Stage.RESPONSE, None)
    assert classify_reply(reply).verdict is Verdict.UNCERTAIN
    assert len(fake.accepted) == 1  # it was accepted: only the same Message-ID protects a resend


def test_connection_refused_is_a_retry_at_connect() -> None:
    fake = FakePostmark().start()
    url = fake.url
    fake.stop()
    transport = PostmarkTransport(
        PostmarkConfig(fake_postmark.TOKEN, http=HttpConfig(url, connect_timeout=TIMEOUT))
    )
    try:
        reply = transport.send(MESSAGE)
    finally:
        transport.close()
    assert reply.stage is Stage.CONNECT
    assert classify_reply(reply).verdict is Verdict.RETRY


# Resend


def test_resend_passes_the_outbox_key_and_deduplicates() -> None:
    with FakeResend() as fake, resend_transport(fake) as transport:
        first = classify_reply(transport.send(MESSAGE))
        again = classify_reply(transport.send(MESSAGE))
    assert first.verdict is again.verdict is Verdict.SENT
    assert first.provider_message_id == again.provider_message_id
    assert len(fake.requests) == 2
    [accepted] = fake.accepted
    assert accepted.idempotency_key == "order-1-confirmation"
    assert fake.requests[0].headers["authorization"] == f"Bearer {fake_resend.API_KEY}"
    assert accepted.email["from"] == "Shop <no-reply@shop.example>"
    assert accepted.email["to"] == ["alice@example.com"]
    assert accepted.email["headers"]["Message-ID"] == "<m1@shop.example>"
    assert accepted.email["headers"][ORIGINAL_MESSAGE_ID] == "<m1@shop.example>"


@pytest.mark.slow
def test_resend_timeout_is_retried_with_the_same_key_and_sends_once() -> None:
    with FakeResend() as fake, resend_transport(fake) as transport:
        fake.then(Slow(TIMEOUT * 3))
        lost = transport.send(MESSAGE)
        assert classify_reply(lost).verdict is Verdict.RETRY  # not uncertain: the key protects
        # The first request is still being processed: Resend says so, and that is a retry too.
        in_progress = classify_reply(transport.send(MESSAGE))
        assert in_progress.verdict is Verdict.RETRY
        assert "concurrent_idempotent_requests" in in_progress.reason
        wait_for(lambda: fake.in_flight == 0)
        done = classify_reply(transport.send(MESSAGE))
    assert done.verdict is Verdict.SENT
    [accepted] = fake.accepted
    assert done.provider_message_id == accepted.id
    assert {r.headers["idempotency-key"] for r in fake.requests} == {"order-1-confirmation"}


def test_resend_validation_error_and_rate_limit() -> None:
    with FakeResend() as fake, resend_transport(fake) as transport:
        invalid = classify_reply(transport.send(dataclasses.replace(MESSAGE, recipient="nobody")))
        fake.then(
            Answer(
                429,
                {"statusCode": 429, "name": "rate_limit_exceeded", "message": "Too many requests"},
                {"retry-after": "1"},
            )
        )
        limited = classify_reply(transport.send(MESSAGE))
    assert invalid.verdict is Verdict.FAILED
    assert invalid.reason.startswith("422 validation_error: Invalid `to` field")
    assert (limited.verdict, limited.retry_after) == (Verdict.RETRY, 1.0)


# SES


def test_ses_sends_the_raw_message_through_boto3() -> None:
    with FakeSes() as fake, ses_transport(fake) as transport:
        outcome = classify_reply(transport.send(MESSAGE))
    assert outcome.verdict is Verdict.SENT
    [accepted] = fake.accepted
    assert outcome.provider_message_id == accepted.message_id
    assert accepted.params["Destination"] == {"ToAddresses": ["alice@example.com"]}
    assert accepted.params["FeedbackForwardingEmailAddress"] == "no-reply@shop.example"
    assert accepted.params["Content"]["Raw"]["Data"].endswith(MESSAGE.data)
    assert "/eu-west-1/ses/aws4_request" in fake.requests[0].headers["authorization"]
    # SES replaced the Message-ID; ours survives in its own header.
    delivered = BytesHeaderParser().parsebytes(accepted.delivered)
    assert delivered["Message-ID"] == f"<{accepted.message_id}@email.amazonses.com>"
    assert delivered[ORIGINAL_MESSAGE_ID] == "<m1@shop.example>"


def test_ses_errors_map_like_the_others_and_boto_does_not_retry() -> None:
    with FakeSes() as fake, ses_transport(fake) as transport:
        fake.then(
            fake_ses.error(400, "MessageRejected", "Email address is not verified."),
            fake_ses.error(
                429, "TooManyRequestsException", "Too many requests", {"Retry-After": "2"}
            ),
            fake_ses.error(500, "InternalFailure", "try again"),
            Slow(TIMEOUT * 3),
        )
        rejected, throttled, broken, lost = (
            classify_reply(transport.send(MESSAGE)) for _ in range(4)
        )
    assert (rejected.verdict, rejected.reason) == (
        Verdict.FAILED,
        "400 MessageRejected: Email address is not verified.",
    )
    assert (throttled.verdict, throttled.retry_after) == (Verdict.RETRY, 2.0)
    assert broken.verdict is Verdict.RETRY
    assert lost.verdict is Verdict.UNCERTAIN  # SendEmail takes no idempotency token
    assert len(fake.requests) == 4  # one request per send: the row owns retries


# The concurrency limit


def test_concurrency_limit_caps_requests_in_flight() -> None:
    with FakePostmark(latency=0.05) as fake, postmark_transport(fake) as inner:
        transport = Limited(inner, 2)
        threads = [
            threading.Thread(target=lambda: [transport.send(MESSAGE) for _ in range(3)])
            for _ in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(fake.accepted) == 18
    assert fake.max_in_flight == 2


def test_build_transport_applies_the_limit_and_names_the_provider(settings: Settings) -> None:
    with FakeResend() as fake:
        transport = build_transport(
            dataclasses.replace(
                settings,
                transport="resend",
                resend_api_key=fake_resend.API_KEY,
                provider_url=fake.url,
                transport_concurrency=3,
            )
        )
        try:
            assert isinstance(transport, Limited)
            assert isinstance(transport.transport, ResendTransport)
            assert classify_reply(transport.send(MESSAGE)).verdict is Verdict.SENT
        finally:
            transport.close()


# End to end: rows -> relay -> delivery -> provider -> rows sent with the provider's id


@contextmanager
def provider_harness(settings: Settings, transport: Transport) -> Iterator[Harness]:
    with pool(settings) as p:
        h = Harness(settings, "smtp://127.0.0.1:1", p)  # its SMTP transport is never used
        h.delivery.transport.close()
        h.delivery.transport = transport
        try:
            yield h
        finally:
            h.delivery.close()  # its results in Postgres, its connections closed
            transport.close()


def provider_settings(settings: Settings, kind: str, fake: FakeProvider) -> Settings:
    return dataclasses.replace(
        settings,
        transport=kind,
        provider_url=fake.url,
        postmark_server_token=fake_postmark.TOKEN,
        resend_api_key=fake_resend.API_KEY,
        ses_region="us-east-1",
        http_connect_timeout=TIMEOUT,
        http_read_timeout=TIMEOUT,
    )


FAKES: dict[str, type[FakeProvider]] = {
    "postmark": FakePostmark,
    "resend": FakeResend,
    "ses": FakeSes,
}


def delivered_ids(kind: str, fake: Any) -> dict[str, str]:
    """Our Message-ID -> the provider's id, from what each fake accepted."""
    if kind == "postmark":
        return {a.header("Message-ID"): a.message_id for a in fake.accepted}
    if kind == "resend":
        return {a.email["headers"]["Message-ID"]: a.id for a in fake.accepted}
    return {
        line.split(b": ", 1)[1].decode(): a.message_id
        for a in fake.accepted
        for line in a.params["Content"]["Raw"]["Data"].split(b"\r\n")
        if line.startswith(ORIGINAL_MESSAGE_ID.encode())
    }


TRANSPORTS = {"postmark": postmark_transport, "resend": resend_transport, "ses": ses_transport}


@pytest.mark.parametrize("kind", sorted(FAKES))
def test_the_request_leaves_only_after_the_previous_result_is_recorded(kind: str) -> None:
    """The point of no return of an HTTP send is its request, as the dot is SMTP's:
    delivery's wait for the thread's previous result runs before it, never after."""
    seen: list[int] = []
    with FAKES[kind]() as fake, TRANSPORTS[kind](fake) as transport:  # type: ignore[operator]

        def previous_recorded() -> None:
            seen.append(len(fake.requests))  # how many requests had arrived by then

        message = dataclasses.replace(MESSAGE, before_commit=previous_recorded)
        outcome = classify_reply(transport.send(message))
        assert outcome.verdict is Verdict.SENT
        assert len(fake.requests) == 1
    assert seen == [0]


@pytest.mark.parametrize("kind", sorted(FAKES))
def test_rows_are_sent_with_the_providers_message_id(settings: Settings, kind: str) -> None:
    add_newsletter(settings, 5)
    add_login(settings, "login-1", "alice@example.com")
    with FAKES[kind]() as fake:
        settings = provider_settings(settings, kind, fake)
        with provider_harness(settings, build_transport(settings)) as h:
            h.run()
    assert statuses(settings) == {"sent": 6}
    stored = dict(query(settings, "SELECT message_id, provider_message_id FROM email_outbox"))
    assert delivered_ids(kind, fake) == stored
    attempts = query(settings, "SELECT verdict, stage, reply_code FROM email_attempt")
    assert set(attempts) == {("sent", "response", 200)}


@pytest.mark.slow
def test_resend_timeout_end_to_end_reuses_the_key(settings: Settings) -> None:
    login = add_login(settings, "login-1", "alice@example.com")
    with FakeResend() as fake:
        fake.then(Slow(TIMEOUT * 2))
        settings = provider_settings(settings, "resend", fake)
        with provider_harness(settings, build_transport(settings)) as h:
            h.run()
    assert statuses(settings) == {"sent": 1}
    [accepted] = fake.accepted
    assert query(settings, "SELECT provider_message_id FROM email_outbox") == [(accepted.id,)]
    verdicts = [
        r[0]
        for r in query(
            settings, "SELECT verdict FROM email_attempt WHERE outbox_id = %s ORDER BY id", login
        )
    ]
    assert verdicts[0] == "retry"
    assert verdicts[-1] == "sent"
    assert "uncertain" not in verdicts
    assert {r.headers["idempotency-key"] for r in fake.requests} == {"login-1"}


@pytest.mark.slow
def test_postmark_retry_after_end_to_end(settings: Settings) -> None:
    add_login(settings, "login-1", "alice@example.com")
    with FakePostmark() as fake:
        fake.then(
            Answer(429, {"ErrorCode": 429, "Message": "Rate limit exceeded"}, {"Retry-After": "1"})
        )
        settings = provider_settings(settings, "postmark", fake)
        with provider_harness(settings, build_transport(settings)) as h:
            h.run()
    assert statuses(settings) == {"sent": 1}
    first, second = fake.requests
    # The test settings' backoff is at most 0.2 s: only Retry-After explains the wait.
    assert second.at - first.at >= 1.0
    # A 429 is about our account, not this message: not an attempt, but waited for.
    attempts = query(settings, "SELECT verdict, reply_code FROM email_attempt ORDER BY id")
    assert attempts == [("sent", 200)]
    reasons = query(
        settings, "SELECT reason FROM email_event WHERE from_status = 'sending' ORDER BY id"
    )
    assert "not an attempt, sending path failed: 429" in reasons[0][0]


def test_postmark_inactive_recipient_end_to_end(settings: Settings) -> None:
    add_login(settings, "login-1", "gone@example.com")
    with FakePostmark(inactive=frozenset({"gone@example.com"})) as fake:
        settings = provider_settings(settings, "postmark", fake)
        with provider_harness(settings, build_transport(settings)) as h:
            h.run()
    [(status, attempts, last_error)] = query(
        settings, "SELECT status, attempts, last_error FROM email_outbox"
    )
    assert (status, attempts) == ("failed", 1)
    assert "ErrorCode 406" in last_error
    assert "inactive" in last_error


# Failover: SMTP primary down, Resend takes over; recorded per attempt.


def test_failover_to_a_provider_while_the_relay_is_down_and_back(settings: Settings) -> None:
    sink = SmtpSink()  # not started yet: the primary refuses connections
    with FakeResend() as fake:
        failing = dataclasses.replace(
            provider_settings(settings, "smtp", fake),
            smtp_url=sink.url,
            failover_transport="resend",
            failover_threshold=2,
            failover_cooldown_seconds=0.5,
        )
        transport = build_transport(failing)
        with provider_harness(failing, transport) as h:
            add_newsletter(failing, 6)
            h.run()
            assert statuses(failing) == {"sent": 6}
            assert len(fake.accepted) == 6
            sink.start()
            try:
                time.sleep(0.6)  # the cooldown passes: the next send probes the relay
                add_newsletter(failing, 3, prefix="later")
                h.run()
            finally:
                sink.stop()
    assert statuses(failing) == {"sent": 9}
    assert len(sink.messages) == 3
    assert len(fake.accepted) == 6
    by_transport = dict(
        query(
            settings, "SELECT transport || ' ' || verdict, count(*) FROM email_attempt GROUP BY 1"
        )
    )
    # The two refusals that tripped the failover's breaker were not attempts.
    assert by_transport == {
        "resend (failover) sent": 6,
        "smtp sent": 3,
    }


def test_failover_settings_are_checked(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="OUTBOX_FAILOVER_TRANSPORT must be one of"):
        build_transport(dataclasses.replace(settings, failover_transport="pigeon"))
    with pytest.raises(ConfigError, match="is the primary transport itself"):
        build_transport(dataclasses.replace(settings, failover_transport="smtp"))
    with pytest.raises(ConfigError, match="OUTBOX_RESEND_API_KEY"):
        build_transport(dataclasses.replace(settings, failover_transport="resend"))
    other_relay = dataclasses.replace(
        settings, failover_transport="smtp", failover_smtp_url="smtp://127.0.0.1:2"
    )
    assert isinstance(build_transport(other_relay), Failover)
