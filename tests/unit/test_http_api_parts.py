"""The HTTP API's pure parts: tokens, the rate limit, request shapes, error mapping."""

from __future__ import annotations

import datetime as dt

import pytest

from outbox.errors import (
    HeaderInjection,
    InvalidAddress,
    InvalidContent,
    InvalidField,
    InvalidKey,
    InvalidMessage,
    InvalidParams,
    MissingParams,
    SenderNotAllowed,
    UnknownTemplate,
)
from outbox.web import api_keys, email_request
from outbox.web.email_request import BadField, batch_fields, email_fields, intake_error
from outbox.web.openapi import document
from outbox.web.rate_limit import RateLimiter, retry_after


def test_tokens_are_random_prefixed_and_kept_as_sha256() -> None:
    a, b = api_keys.new_token(), api_keys.new_token()
    assert a != b
    assert a.startswith("obx_")
    assert len(a) == 47  # obx_ and 32 bytes in URL-safe base64
    assert len(api_keys.token_hash(a)) == 64
    assert api_keys.token_hash(a) == api_keys.token_hash(a)
    assert api_keys.shown_prefix(a) == a[:12]


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer obx_abc", "obx_abc"),
        ("bearer   obx_abc  ", "obx_abc"),
        ("Basic obx_abc", None),
        ("Bearer abc", None),  # not one of ours: no lookup
        ("Bearer obx_" + "a" * 300, None),
        ("", None),
        (None, None),
    ],
)
def test_bearer(header: str | None, token: str | None) -> None:
    assert api_keys.bearer(header) == token


def test_scopes() -> None:
    assert api_keys.checked_scopes([]) == ["send"]
    assert api_keys.checked_scopes(["read", "send", "read"]) == ["send", "read"]
    with pytest.raises(ValueError, match="admin"):
        api_keys.checked_scopes(["admin"])


def test_the_bucket_allows_a_burst_then_the_rate() -> None:
    limiter = RateLimiter(rate=2.0, burst=3)
    assert [limiter.take(1, 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take(1, 0.0) == pytest.approx(0.5)
    assert limiter.take(2, 0.0) == 0.0  # another key has its own bucket
    assert limiter.take(1, 0.5) == 0.0  # one token back after half a second
    assert limiter.take(1, 0.5) > 0
    assert limiter.take(1, 100.0) == 0.0  # refilled, never above the burst
    assert [limiter.take(1, 100.0) for _ in range(3)][-1] > 0


def test_retry_after_is_whole_seconds_at_least_one() -> None:
    assert retry_after(0.01) == "1"
    assert retry_after(1.2) == "2"


def test_fields_come_from_enqueue() -> None:
    assert email_request.FIELDS[:4] == ("to", "template", "params", "priority")
    assert "idempotency_key" not in email_request.FIELDS
    assert "settings" not in email_request.FIELDS


def where(errors: list[BadField]) -> list[str]:
    return [e.where for e in errors]


def test_email_shape_names_every_bad_field() -> None:
    assert email_fields({"to": "a@b.c", "template": "t"}) == []
    assert where(email_fields({})) == ["/to"]  # no template: the email's own content
    assert email_fields({"to": "a@b.c", "template": None, "subject": "s", "text": "t"}) == []
    bad = {"to": 1, "template": 2, "params": [], "priority": "now", "x": 1}
    assert where(email_fields(bad)) == ["/params", "/priority", "/template", "/to", "/x"]
    typed = {"to": "a", "sender": 1, "subject": [], "html": {}, "locale": 5}
    assert where(email_fields(typed)) == ["/html", "/locale", "/sender", "/subject"]


@pytest.mark.parametrize(
    "value",
    ["2026-12-01T10:00:00Z", "2026-12-01T10:00:00.5+02:00", "2026-12-01t10:00:00-05:30"],
)
def test_send_at_takes_rfc3339_with_a_zone(value: str) -> None:
    email = {"to": "a@b.c", "send_at": value}
    assert email_fields(email) == []
    send_at = email_request.enqueue_arguments(email)["send_at"]
    assert isinstance(send_at, dt.datetime)
    assert send_at.utcoffset() is not None


@pytest.mark.parametrize(
    "value", ["2026-12-01T10:00:00", "2026-12-01", "tomorrow", 1764583200, "2026-13-01T10:00:00Z"]
)
def test_send_at_without_a_zone_or_not_a_date_is_named(value: object) -> None:
    assert where(email_fields({"to": "a@b.c", "send_at": value})) == ["/send_at"]


def test_attachments_come_in_base64_and_leave_as_bytes() -> None:
    email = {
        "to": "a@b.c",
        "attachments": [{"filename": "a.txt", "content": "aGVsbG8=", "content_type": "text/plain"}],
    }
    assert email_fields(email) == []
    arguments = email_request.enqueue_arguments(email)
    assert arguments["attachments"] == [
        {"filename": "a.txt", "content": b"hello", "content_type": "text/plain"}
    ]
    assert arguments["template"] is None  # absent: an email of its own content
    assert email["attachments"][0]["content"] == "aGVsbG8="  # the body is left as it was


def test_bad_attachments_are_named_one_by_one() -> None:
    email = {
        "to": "a@b.c",
        "attachments": [
            {"filename": "a", "content": "not base64!"},
            {"filename": "a", "content": "ü"},
            "x",
            {"filename": "b", "content": 3, "size": 1},
        ],
    }
    assert where(email_fields(email)) == [
        "/attachments/0/content",
        "/attachments/1/content",
        "/attachments/2",
        "/attachments/3/content",
        "/attachments/3/size",
    ]
    assert where(email_fields({"to": "a@b.c", "attachments": {}})) == ["/attachments"]


def test_a_cancellation_body_takes_a_reason_only() -> None:
    assert email_request.cancel_fields({}) == []
    assert email_request.cancel_fields({"reason": "order withdrawn"}) == []
    assert where(email_request.cancel_fields({"reason": 1})) == ["/reason"]
    assert where(email_request.cancel_fields({"why": "x"})) == ["/"]
    assert where(email_request.cancel_fields([])) == ["/"]
    assert where(email_fields("text")) == ["/"]
    assert where(email_fields({"to": "a", "template": "t"}, "/emails/3", with_key=True)) == [
        "/emails/3/idempotency_key"
    ]


def test_batch_shape() -> None:
    item = {"idempotency_key": "k", "to": "a@b.c", "template": "t"}
    assert batch_fields({"emails": [item]}) == []
    assert where(batch_fields({"emails": []})) == ["/emails"]
    assert where(batch_fields({"emails": [item] * 1001})) == ["/emails"]
    assert where(batch_fields({"emails": [item], "more": 1})) == ["/"]
    assert where(batch_fields({"emails": [item, {"to": "a"}]})) == [
        "/emails/1/idempotency_key",
    ]


@pytest.mark.parametrize(
    ("error", "where_"),
    [
        (InvalidAddress("invalid recipient: x"), "/to"),
        (HeaderInjection("recipient contains CR, LF or NUL"), "/to"),
        (HeaderInjection("param 'name' reaches the Subject"), "/params"),
        (UnknownTemplate("no template 'x'"), "/template"),
        (MissingParams("missing name"), "/params"),
        (InvalidParams("priority must be 'high' or 'bulk'"), "/priority"),
        (InvalidParams("params are 9 bytes, over the limit"), "/params"),
        (InvalidKey("idempotency_key is longer"), "Idempotency-Key"),
        (SenderNotAllowed("billing@other.example is not at a sending domain"), "/sender"),
        (InvalidAddress("sender must be one address, as Name <local@domain>"), "/sender"),
        (InvalidAddress("reply_to has 11 addresses, over 10"), "/reply_to"),
        (InvalidAddress("cc must be an address or a list of addresses"), "/cc"),
        (InvalidAddress("bcc's display name contains control characters"), "/bcc"),
        (HeaderInjection("subject contains CR, LF or NUL"), "/subject"),
        (HeaderInjection("header 'X-A' contains CR, LF or NUL"), "/headers"),
        (InvalidField("headers has 60 entries, over 50"), "/headers"),
        (InvalidField("each tag must be a non-empty string"), "/tags"),
        (InvalidField("metadata 'k' must be a string, number or boolean"), "/metadata"),
        (InvalidContent("an email without a template needs a subject"), "/subject"),
        (InvalidContent("an email without a template needs text or html (or both)"), "/text"),
        (InvalidContent("html contains a NUL character"), "/html"),
        (InvalidMessage("send_at must be a datetime with a timezone"), "/send_at"),
        (InvalidMessage("locale picks a template's variant"), "/locale"),
        (InvalidParams("attachment #1: filename must be a plain file name"), "/attachments"),
        (InvalidParams("attachments are 9 bytes, over the limit of 5"), "/attachments"),
        (InvalidMessage("subject, text and html are for an email without a template"), "/template"),
    ],
)
def test_intake_errors_name_their_field(error: Exception, where_: str) -> None:
    assert intake_error(error).where == where_  # type: ignore[arg-type]


def test_batch_errors_point_into_the_array() -> None:
    got = intake_error(InvalidAddress("email #7: invalid recipient: x"), batch=True)
    assert (got.where, got.detail) == ("/emails/7/to", "invalid recipient: x")
    key = intake_error(InvalidKey("email #2: idempotency_key is longer"), batch=True)
    assert key.where == "/emails/2/idempotency_key"


def test_problem_document() -> None:
    doc = email_request.problem(422, "Unprocessable", "fix", errors=[BadField("/to", "bad")])
    assert doc == {
        "type": "about:blank",
        "title": "Unprocessable",
        "status": 422,
        "detail": "fix",
        "errors": [{"pointer": "/to", "detail": "bad"}],
    }
    header = BadField("Idempotency-Key", "is required", header=True).as_json()
    assert header == {"header": "Idempotency-Key", "detail": "is required"}


def test_openapi_names_every_field_and_route() -> None:
    doc = document()
    assert doc["openapi"] == "3.1.0"
    schemas = doc["components"]["schemas"]
    assert set(email_request.FIELDS) <= set(schemas["EmailRequest"]["properties"])
    assert schemas["BatchRequest"]["properties"]["emails"]["maxItems"] == 1000
    assert schemas["EmailRequest"]["required"] == ["to"]
    attachment = schemas["EmailRequest"]["properties"]["attachments"]["items"]
    assert attachment["properties"]["content"]["contentEncoding"] == "base64"
    delete = doc["paths"]["/v1/emails/{id}"]["delete"]
    assert {"200", "404", "409"} <= set(delete["responses"])
    post = doc["paths"]["/v1/emails"]["post"]
    assert {"200", "202", "401", "403", "409", "422", "429"} <= set(post["responses"])
