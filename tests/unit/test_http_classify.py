"""HTTP providers: what a response means, and how a built message becomes a request."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import pytest

from outbox.config import Settings
from outbox.delivery.classify import classify_http, classify_reply
from outbox.delivery.retry import RetryPolicy, decide
from outbox.errors import ConfigError
from outbox.message.build import Attachment, Envelope, build_message
from outbox.models import HttpReply, Outcome, Reply, Stage, Status, Verdict
from outbox.transports import postmark, resend, ses
from outbox.transports.base import OutgoingMessage
from outbox.transports.http import retry_after
from outbox.transports.parts import ORIGINAL_MESSAGE_ID, split
from outbox.transports.select import check

MESSAGE_ID = "<k1.abc@shop.example>"


def message(*, attachments: tuple[Attachment, ...] = ()) -> OutgoingMessage:
    envelope = Envelope(
        sender="Shöp <no-reply@shop.example>",
        to="alice@example.com",
        subject="Código 123456",
        message_id=MESSAGE_ID,
        date=dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC),
        extra_headers=(("Auto-Submitted", "auto-generated"), ("DKIM-Signature", "v=1; a=x")),
    )
    data = build_message(envelope, "Code: 123456\nBye", "<p>Code: <b>123456</b></p>", attachments)
    return OutgoingMessage(
        envelope_from="bounces+1-abc@bounce.shop.example",
        recipient="alice@example.com",
        data=data,
        message_id=MESSAGE_ID,
        idempotency_key="login-1",
    )


def response(status: int, **fields: Any) -> HttpReply:
    return HttpReply(Stage.RESPONSE, status, **fields)


# classify_http: the rules every provider shares


def test_2xx_is_sent_with_the_providers_id() -> None:
    outcome = classify_http(response(200, text="OK", provider_message_id="pm-1"))
    assert outcome == Outcome(Verdict.SENT, "200 OK", provider_message_id="pm-1")


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_throttling_and_server_errors_retry_after_the_asked_delay(status: int) -> None:
    outcome = classify_http(response(status, text="busy", retry_after=7.0))
    assert outcome.verdict is Verdict.RETRY
    assert outcome.retry_after == 7.0
    assert outcome.reason == f"{status} busy"


@pytest.mark.parametrize("status", [400, 404, 409, 413, 422, 451])
def test_other_4xx_fail_with_the_providers_text(status: int) -> None:
    outcome = classify_http(response(status, text="ErrorCode 300: Invalid 'To' address"))
    assert outcome.verdict is Verdict.FAILED
    assert "Invalid 'To' address" in outcome.reason


@pytest.mark.parametrize("reply", [response(401), response(403), response(422, transient=True)])
def test_account_refusals_retry_like_a_refused_smtp_session(reply: HttpReply) -> None:
    outcome = classify_http(reply)
    assert outcome.verdict is Verdict.RETRY
    assert "not the message" in outcome.reason


@pytest.mark.parametrize("stage", [Stage.CONNECT, Stage.REQUEST])
def test_failures_before_the_request_left_retry(stage: Stage) -> None:
    outcome = classify_http(HttpReply(stage, error="connect: refused"))
    assert outcome.verdict is Verdict.RETRY
    assert stage.value in outcome.reason


def test_a_lost_response_is_uncertain_without_an_idempotency_key() -> None:
    outcome = classify_http(HttpReply(Stage.RESPONSE, error="timeout (ReadTimeout)"))
    assert outcome.verdict is Verdict.UNCERTAIN


def test_a_lost_response_is_a_plain_retry_with_an_idempotency_key() -> None:
    outcome = classify_http(HttpReply(Stage.RESPONSE, error="timeout", idempotent=True))
    assert outcome.verdict is Verdict.RETRY
    assert "same key" in outcome.reason


def test_classify_reply_picks_the_rules_by_the_replys_kind() -> None:
    # 422 means "refused for good" in HTTP but a 4yz (transient) in SMTP.
    assert classify_reply(response(422)).verdict is Verdict.FAILED
    assert classify_reply(Reply(Stage.RCPT, 450, "4.2.1 busy")).verdict is Verdict.RETRY
    assert classify_reply(Reply(Stage.FINAL_REPLY, 250, "OK queued as Q1")).verdict is (
        Verdict.SENT
    )


def test_retry_after_is_a_floor_for_the_retry_delay() -> None:
    policy = RetryPolicy(base_seconds=30, cap_seconds=3600)
    decision = decide(
        Outcome(Verdict.RETRY, "429", retry_after=120.0),
        attempt=1,
        age_seconds=0,
        policy=policy,
        rand=lambda: 0.0,
    )
    assert decision.status is Status.PENDING
    assert decision.delay_seconds == 120.0
    # Without it, jitter alone decides.
    plain = decide(
        Outcome(Verdict.RETRY, "500"), attempt=1, age_seconds=0, policy=policy, rand=lambda: 0.0
    )
    assert plain.delay_seconds == 0.0


def test_retry_after_header_forms() -> None:
    now = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
    assert retry_after("30") == 30.0
    assert retry_after(" 0 ") == 0.0
    assert retry_after("Wed, 01 May 2024 12:01:30 GMT", now=now) == 90.0
    assert retry_after("Wed, 01 May 2024 11:00:00 GMT", now=now) == 0.0  # already past
    assert retry_after(None) is None
    assert retry_after("soon") is None
    assert retry_after("-5") is None


# The message taken apart for the JSON APIs


def test_split_keeps_every_header_the_apis_do_not_have_a_field_for() -> None:
    parts = split(message().data, MESSAGE_ID)
    assert parts.sender == "Shöp <no-reply@shop.example>"
    assert (parts.sender_name, parts.sender_address) == ("Shöp", "no-reply@shop.example")
    assert parts.subject == "Código 123456"
    assert parts.text == "Code: 123456\nBye"
    assert parts.html == "<p>Code: <b>123456</b></p>"
    assert parts.headers == (
        ("Message-ID", MESSAGE_ID),
        ("Auto-Submitted", "auto-generated"),
        (ORIGINAL_MESSAGE_ID, MESSAGE_ID),
    )
    assert parts.files == ()


def test_postmark_payload() -> None:
    pdf = Attachment("Rechnung März.pdf", "application/pdf", b"%PDF-1.4\x00\xff")
    body = postmark.payload(message(attachments=(pdf,)), message_stream="outbound")
    assert body["From"] == "Shöp <no-reply@shop.example>"
    assert body["To"] == "alice@example.com"
    assert body["Subject"] == "Código 123456"
    assert body["TextBody"] == "Code: 123456\nBye"
    assert body["HtmlBody"] == "<p>Code: <b>123456</b></p>"
    assert body["MessageStream"] == "outbound"
    assert {"Name": "Message-ID", "Value": MESSAGE_ID} in body["Headers"]
    assert not any(h["Name"] == "DKIM-Signature" for h in body["Headers"])  # Postmark signs
    assert body["Attachments"] == [
        {
            "Name": "Rechnung März.pdf",
            "Content": base64.b64encode(b"%PDF-1.4\x00\xff").decode(),
            "ContentType": "application/pdf",
        }
    ]


def test_postmark_responses() -> None:
    ok = postmark.parse_response(
        200,
        b'{"To":"a@example.com","SubmittedAt":"2024-05-01T12:00:00Z",'
        b'"MessageID":"b7bc2f4a-e38e-4336-af7d-e6c392c2f817","ErrorCode":0,"Message":"OK"}',
        {},
    )
    assert classify_http(ok).provider_message_id == "b7bc2f4a-e38e-4336-af7d-e6c392c2f817"
    inactive = postmark.parse_response(
        422, b'{"ErrorCode":406,"Message":"You tried to send to recipient(s) ... inactive."}', {}
    )
    assert inactive.text.startswith("ErrorCode 406: ")
    assert classify_http(inactive).verdict is Verdict.FAILED
    unconfirmed = postmark.parse_response(
        422, b'{"ErrorCode":401,"Message":"Sender signature not confirmed"}', {}
    )
    assert classify_http(unconfirmed).verdict is Verdict.RETRY
    limited = postmark.parse_response(
        429, b'{"ErrorCode":429,"Message":"Rate limit exceeded"}', {"retry-after": "5"}
    )
    assert classify_http(limited).retry_after == 5.0
    html_page = postmark.parse_response(503, b"<html>Service Unavailable</html>", {})
    assert html_page.text == "<html>Service Unavailable</html>"
    assert classify_http(html_page).verdict is Verdict.RETRY


def test_resend_payload_and_key() -> None:
    body = resend.payload(message())
    assert body["from"] == "Shöp <no-reply@shop.example>"
    assert body["to"] == ["alice@example.com"]
    assert body["headers"] == {
        "Message-ID": MESSAGE_ID,
        "Auto-Submitted": "auto-generated",
        ORIGINAL_MESSAGE_ID: MESSAGE_ID,
    }
    assert (body["text"], body["html"]) == ("Code: 123456\nBye", "<p>Code: <b>123456</b></p>")
    assert resend.idempotency_key("order-1/confirmation") == "order-1/confirmation"
    hashed = resend.idempotency_key("bestellung-ä-1")
    assert hashed.startswith("sha256:")
    assert hashed == resend.idempotency_key("bestellung-ä-1")
    assert len(resend.idempotency_key("k" * 255)) == 255
    assert len(resend.idempotency_key("k" * 300)) <= resend.MAX_KEY


def test_resend_responses() -> None:
    ok = resend.parse_response(200, b'{"id":"49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"}', {})
    assert ok.provider_message_id == "49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"
    invalid = resend.parse_response(
        422,
        b'{"statusCode":422,"name":"validation_error","message":"Invalid `to` field."}',
        {},
    )
    assert invalid.text == "validation_error: Invalid `to` field."
    assert classify_http(invalid).verdict is Verdict.FAILED
    in_progress = resend.parse_response(
        409,
        b'{"statusCode":409,"name":"concurrent_idempotent_requests","message":"in progress"}',
        {},
    )
    assert classify_http(in_progress).verdict is Verdict.RETRY
    other_payload = resend.parse_response(
        409, b'{"statusCode":409,"name":"invalid_idempotent_request","message":"x"}', {}
    )
    assert classify_http(other_payload).verdict is Verdict.FAILED
    quota = resend.parse_response(
        429, b'{"statusCode":429,"name":"rate_limit_exceeded","message":"x"}', {"retry-after": "2"}
    )
    assert classify_http(quota).retry_after == 2.0


def test_ses_request_keeps_the_raw_message_and_our_message_id() -> None:
    built = message()
    params = ses.request(built, configuration_set="transactional")
    raw = params["Content"]["Raw"]["Data"]
    assert isinstance(raw, bytes)
    assert raw == f"{ORIGINAL_MESSAGE_ID}: {MESSAGE_ID}\r\n".encode() + built.data
    assert params["Destination"] == {"ToAddresses": ["alice@example.com"]}
    assert params["FeedbackForwardingEmailAddress"] == "bounces+1-abc@bounce.shop.example"
    assert params["ConfigurationSetName"] == "transactional"
    assert "ConfigurationSetName" not in ses.request(built)


@pytest.mark.parametrize(
    ("status", "code", "verdict"),
    [
        (400, "MessageRejected", Verdict.FAILED),
        (400, "BadRequestException", Verdict.FAILED),
        (400, "SendingPausedException", Verdict.RETRY),
        (400, "AccountSuspendedException", Verdict.RETRY),
        (400, "MailFromDomainNotVerifiedException", Verdict.RETRY),
        (404, "NotFoundException", Verdict.RETRY),
        (429, "TooManyRequestsException", Verdict.RETRY),
        (500, "InternalFailure", Verdict.RETRY),
    ],
)
def test_ses_errors(status: int, code: str, verdict: Verdict) -> None:
    reply = ses.parse_error(
        {
            "Error": {"Code": code, "Message": "details"},
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {"retry-after": "3"}},
        }
    )
    assert reply.text == f"{code}: details"
    outcome = classify_http(reply)
    assert outcome.verdict is verdict
    if verdict is Verdict.RETRY:
        assert outcome.retry_after == 3.0


# Choosing the transport


def test_transport_settings_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "OUTBOX_TRANSPORT": "resend",
            "OUTBOX_TRANSPORT_CONCURRENCY": "4",
            "OUTBOX_PROVIDER_URL": "http://127.0.0.1:9",
            "OUTBOX_RESEND_API_KEY": "re_x",
            "OUTBOX_HTTP_READ_TIMEOUT": "2.5",
        }
    )
    assert (settings.transport, settings.transport_concurrency) == ("resend", 4)
    assert (settings.provider_url, settings.resend_api_key) == ("http://127.0.0.1:9", "re_x")
    assert settings.http_read_timeout == 2.5
    defaults = Settings.from_env({})
    assert (defaults.transport, defaults.transport_concurrency) == ("smtp", 0)
    assert defaults.postmark_message_stream == "outbound"


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"transport": "sendgrid"}, "OUTBOX_TRANSPORT must be one of"),
        ({"transport_concurrency": -1}, "OUTBOX_TRANSPORT_CONCURRENCY"),
        ({"transport": "postmark"}, "OUTBOX_POSTMARK_SERVER_TOKEN"),
        ({"transport": "resend"}, "OUTBOX_RESEND_API_KEY"),
        (
            {"transport": "resend", "resend_api_key": "k", "provider_url": "ftp://x"},
            "OUTBOX_PROVIDER_URL",
        ),
        ({"transport": "ses", "http_read_timeout": 0.0}, "OUTBOX_HTTP_READ_TIMEOUT"),
    ],
)
def test_bad_transport_settings(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        check(Settings(**changes))


def test_resend_warns_when_retries_outlive_its_key_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    check(Settings(transport="resend", resend_api_key="k", max_age_seconds=2 * 86400))
    assert any("idempotency window" in r.getMessage() for r in caplog.records)
