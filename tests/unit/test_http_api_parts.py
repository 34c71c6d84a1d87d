"""The HTTP API's pure parts: tokens, the rate limit, request shapes, error mapping."""

from __future__ import annotations

import pytest

from outbox.errors import (
    HeaderInjection,
    InvalidAddress,
    InvalidKey,
    InvalidParams,
    MissingParams,
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
    assert where(email_fields({})) == ["/template", "/to"]
    bad = {"to": 1, "template": None, "params": [], "priority": "now", "x": 1}
    assert where(email_fields(bad)) == ["/params", "/priority", "/template", "/to", "/x"]
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
        "/emails/1/template",
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
    post = doc["paths"]["/v1/emails"]["post"]
    assert {"200", "202", "401", "403", "409", "422", "429"} <= set(post["responses"])
