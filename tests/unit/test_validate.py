from __future__ import annotations

import datetime as dt
import string
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import email_validator
import pytest
from hypothesis import given
from hypothesis import strategies as st

from outbox.config import PACKAGE_TEMPLATES
from outbox.errors import (
    HeaderInjection,
    InvalidAddress,
    InvalidKey,
    InvalidParams,
    MissingParams,
    UnknownTemplate,
)
from outbox.message.render import Template, TemplateSet
from outbox.validate import (
    ascii_address,
    check_key,
    check_params_for,
    check_params_shape,
    check_priority,
    content_hash,
    dump_params,
    normalize_address,
)

TEMPLATES = TemplateSet(PACKAGE_TEMPLATES)


@pytest.mark.parametrize(
    ("given_address", "stored"),
    [
        ("Alice@Example.COM", "Alice@example.com"),
        ("a.b+tag@sub.example.org", "a.b+tag@sub.example.org"),
        ("o'brien@example.ie", "o'brien@example.ie"),
        ("user@bücher.example", "user@bücher.example"),
        ("jörg@example.de", "jörg@example.de"),
    ],
)
def test_valid_addresses_are_normalised(given_address: str, stored: str) -> None:
    assert normalize_address(given_address) == stored


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "no-at-sign",
        "a@",
        "@example.com",
        "a..b@example.com",
        ".a@example.com",
        "a@example",
        "a@localhost",
        "a b@example.com",
        "a@exa mple.com",
        "a@-example.com",
        "a@" + "b" * 250 + ".com",
        "Alice <a@example.com>",
    ],
)
def test_invalid_addresses_are_refused(bad: str) -> None:
    with pytest.raises(InvalidAddress):
        normalize_address(bad)


@pytest.mark.parametrize(
    "bad", ["a@example.com\r\nBcc: x@example.com", "a\n@example.com", "a@b.com\x00"]
)
def test_line_breaks_in_addresses_are_injection(bad: str) -> None:
    with pytest.raises(HeaderInjection):
        normalize_address(bad)


def test_non_strings_are_refused() -> None:
    with pytest.raises(InvalidAddress):
        normalize_address(None)


ATEXT = string.ascii_letters + string.digits + "!#$%&'*+/=?^_`{|}~-."


@pytest.mark.parametrize("name", ["POSTMASTER", "Abuse", "NEWS", "WebMaster", "info"])
def test_role_mailboxes_are_stored_in_lower_case_as_email_validator_stores_them(
    name: str,
) -> None:
    """RFC 2142's mailbox names know no case: one spelling, whichever path checks it."""
    expected = email_validator.validate_email(
        f"{name}@Example.com", check_deliverability=False
    ).normalized
    assert normalize_address(f"{name}@Example.com") == expected == f"{name.lower()}@example.com"
    assert normalize_address("NEWSDESK@example.com") == "NEWSDESK@example.com"  # not one


@given(
    local=st.text(alphabet=ATEXT, min_size=1, max_size=70),
    domain=st.sampled_from(
        ["example.com", "EXAMPLE.org", "a.b.example.net", "x.test", "bad..example"]
    ),
)
def test_fast_path_agrees_with_email_validator(local: str, domain: str) -> None:
    address = f"{local}@{domain}"
    try:
        expected: str | None = email_validator.validate_email(
            address, check_deliverability=False
        ).normalized
    except email_validator.EmailNotValidError:
        expected = None
    try:
        got: str | None = normalize_address(address)
    except InvalidAddress:
        got = None
    assert got == expected


def test_ascii_address_needs_an_ascii_local_part() -> None:
    assert ascii_address("user@bücher.example") == "user@xn--bcher-kva.example"
    assert ascii_address("jörg@example.de") is None


@pytest.mark.parametrize("key", ["order-1234-confirmation", "k", "x" * 255, "ключ-1"])
def test_keys(key: str) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize("key", ["", "x" * 256, "a\nb", "a\x00", "tab\there", "\ud800", 12, None])
def test_bad_keys(key: object) -> None:
    with pytest.raises(InvalidKey):
        check_key(key)


def test_priority() -> None:
    assert check_priority("high").value == "high"
    with pytest.raises(InvalidParams):
        check_priority("urgent")


def test_params_are_canonical_json() -> None:
    assert dump_params({"b": 1, "a": [1, "x"]}, max_bytes=100) == '{"a":[1,"x"],"b":1}'
    assert dump_params(None, max_bytes=100) == "{}"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ([1, 2], "must be a dict"),
        ("text", "must be a dict"),
        ({1: "x"}, "not JSON-serialisable"),
        ({"a": object()}, "not JSON-serialisable"),
        ({"a": {1, 2}}, "not JSON-serialisable"),
        ({"a": dt.datetime(2026, 1, 1)}, "not JSON-serialisable"),
        ({"a": "\ud800"}, "not JSON-serialisable"),
        ({"a": 2**70}, "not JSON-serialisable"),
        ({"a": float("nan")}, "NaN"),
        ({"a": [float("inf")]}, "NaN"),
        ({"a": "nul\x00"}, "NUL"),
        ({"a": "x" * 200}, "over the limit"),
    ],
)
def test_bad_params(params: object, message: str) -> None:
    with pytest.raises(InvalidParams, match=message):
        dump_params(params, max_bytes=100)


def test_missing_params_are_named() -> None:
    template = TEMPLATES.get("login_code")
    with pytest.raises(MissingParams, match="code, minutes"):
        check_params_for(template, {"name": "A", "product": "P"})


@pytest.mark.parametrize(
    "value", ["Shop\r\nBcc: victim@example.com", "a\nb", "x\x00", {"k": "a\rb"}]
)
def test_header_breakers_in_subject_params(value: object) -> None:
    template = TEMPLATES.get("login_code")  # the subject uses code and product
    params = {"name": "A", "code": "1", "product": value, "minutes": 5}
    with pytest.raises(HeaderInjection, match="product"):
        check_params_for(template, params)


def test_line_breaks_in_body_only_params_are_fine() -> None:
    template = TEMPLATES.get("login_code")
    check_params_for(template, {"name": "A\nB", "code": "1", "product": "P", "minutes": 5})


def test_unknown_template() -> None:
    with pytest.raises(UnknownTemplate):
        TEMPLATES.get("no_such_template")
    with pytest.raises(UnknownTemplate):
        TEMPLATES.get("../login_code")


def test_content_hash_depends_on_every_field() -> None:
    base = content_hash("a@example.com", "t", "{}", "bulk")
    assert base == content_hash("a@example.com", "t", "{}", "bulk")
    others = {
        content_hash("b@example.com", "t", "{}", "bulk"),
        content_hash("a@example.com", "u", "{}", "bulk"),
        content_hash("a@example.com", "t", '{"a":1}', "bulk"),
        content_hash("a@example.com", "t", "{}", "high"),
    }
    assert base not in others
    assert len(others) == 4


def test_templates_dir_exists() -> None:
    assert Path(PACKAGE_TEMPLATES, "login_code", "subject.txt").is_file()


def _shaped(example: dict[str, object]) -> Template:
    """A template whose only part this check reads is its example."""
    return cast(Template, SimpleNamespace(example=example))


@pytest.mark.parametrize(
    ("example", "params", "message"),
    [
        ({"items": [{"n": 1}]}, {"items": 5}, "params['items'] must be a list, as in the"
         " template's example, not a plain value"),
        ({"items": [{"n": 1}]}, {"items": [{"n": 1}, 7]}, "params['items'][1] must be an"
         " object, as in the template's example, not a plain value"),
        ({"items": [{"n": 1}]}, {"items": [{"m": 1}]}, "params['items'][0] lacks 'n', which"
         " the template's example has"),
        ({"a": {"b": {"c": 1}}}, {"a": {"b": {"c": [1]}}}, "params['a']['b']['c'] must be a"
         " plain value, as in the template's example, not a list"),
        ({"a": 1}, {"a": {"x": 1}}, "params['a'] must be a plain value, as in the template's"
         " example, not an object"),
    ],
)  # fmt: skip
def test_a_param_of_another_shape_is_named_by_its_whole_path(
    example: dict[str, object], params: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidParams) as raised:
        check_params_shape(_shaped(example), params)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    "params",
    [
        {"items": [{"n": "one", "extra": True}], "name": 5},  # scalars stand for each other
        {"items": []},  # an empty list has nothing of another shape
        {},  # an absent param is MissingParams' business, not this check's
        {"items": [{"n": None}], "other": [1, 2]},  # a param the example lacks: any shape
    ],
)
def test_params_of_the_examples_shape_pass(params: dict[str, object]) -> None:
    check_params_shape(_shaped({"items": [{"n": 1}], "name": "Alice", "gone": None}), params)
