"""Reading what an operator names on the command line."""

from __future__ import annotations

import datetime as dt

import pytest

from outbox.cli.input import (
    RequeueFilter,
    email_ref,
    parse_duration,
    parse_since,
    requeue_filter,
    suppression_reason,
)
from outbox.errors import ConfigError

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30d", 30 * 86400),
        ("12h", 12 * 3600),
        ("90m", 90 * 60),
        ("45s", 45),
        ("1w", 7 * 86400),
        ("1d12h", 36 * 3600),
        (" 2D ", 2 * 86400),
        ("1.5h", 5400),
        ("1d 6h", 30 * 3600),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "30", "d", "30x", "30d junk", "-1d", "0d", "h30", "1d-2h"])
def test_bad_durations_say_what_is_expected(text: str) -> None:
    with pytest.raises(ConfigError, match="duration"):
        parse_duration(text)


def test_since_is_a_duration_back_or_an_iso_time() -> None:
    assert parse_since("2h", NOW) == NOW - dt.timedelta(hours=2)
    assert parse_since("2026-11-30", NOW) == dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    assert parse_since("2026-11-30T08:00:00+01:00", NOW) == dt.datetime(
        2026, 11, 30, 7, 0, tzinfo=dt.UTC
    )
    with pytest.raises(ConfigError, match="neither a duration"):
        parse_since("yesterday", NOW)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("order-7", {"ref": "order-7", "bracketed": "<order-7>", "row_id": None}),
        ("42", {"ref": "42", "bracketed": "<42>", "row_id": 42}),
        (
            "abc@mail.example",
            {"ref": "abc@mail.example", "bracketed": "<abc@mail.example>", "row_id": None},
        ),
        (
            " <abc@mail.example> ",
            {"ref": "<abc@mail.example>", "bracketed": "<abc@mail.example>", "row_id": None},
        ),
        # Beyond bigint: a key that happens to be digits, never a row id.
        ("99999999999999999999", {"ref": "99999999999999999999",
                                  "bracketed": "<99999999999999999999>", "row_id": None}),
    ],
)  # fmt: skip
def test_an_email_is_named_by_any_of_its_references(ref: str, expected: dict[str, object]) -> None:
    assert email_ref(ref) == expected


def test_an_empty_reference_is_refused() -> None:
    with pytest.raises(ConfigError):
        email_ref("  ")


def test_requeue_filter_to_statement_parameters() -> None:
    chosen = requeue_filter(
        dead=True,
        failed=True,
        template=" newsletter ",
        since="1d",
        to_domain="@Example.COM.",
        now=NOW,
    )
    assert chosen == RequeueFilter(
        statuses=("failed", "dead"),
        template="newsletter",
        since=NOW - dt.timedelta(days=1),
        to_domain="example.com",
    )
    assert chosen.params() == {
        "statuses": ["failed", "dead"],
        "template": "newsletter",
        "since": NOW - dt.timedelta(days=1),
        "to_domain": "example.com",
    }


def test_a_requeue_filter_without_filters_leaves_them_null() -> None:
    assert requeue_filter(held=True, now=NOW).params() == {
        "statuses": ["held"],
        "template": None,
        "since": None,
        "to_domain": None,
    }


def test_an_internationalised_domain_is_compared_in_its_ascii_form() -> None:
    assert requeue_filter(dead=True, to_domain="bücher.example", now=NOW).to_domain == (
        "xn--bcher-kva.example"
    )


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({}, "--failed, --dead and/or --held"),
        ({"dead": True, "to_domain": "a@b.example"}, "not a domain"),
        ({"dead": True, "to_domain": " "}, "not a domain"),
        ({"dead": True, "template": ""}, "--template needs"),
        ({"dead": True, "since": "soon"}, "--since"),
    ],
)
def test_bad_requeue_options_are_refused(options: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        requeue_filter(now=NOW, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("manual", "manual"),
        ("complaint", "complaint"),
        ("asked by phone, ticket 4411", "asked by phone, ticket 4411"),
        ("  two\nlines\t", "two lines"),
    ],
)
def test_suppression_reasons_are_codes_or_one_line(text: str, stored: str) -> None:
    assert suppression_reason(text) == stored


@pytest.mark.parametrize(("text", "problem"), [("", "needs"), ("x" * 201, "longer"),
                                               ("bell\x07", "control")])  # fmt: skip
def test_bad_suppression_reasons_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        suppression_reason(text)
