from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from outbox.message.return_path import (
    RowToken,
    outbox_id_from_token,
    read_token,
    return_path,
    row_token_from_address,
    token,
    unsubscribe_mailto,
)
from outbox.token_signatures import sign, verify

SECRET = "s3cret"


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_round_trip(outbox_id: int) -> None:
    address = return_path(outbox_id, domain="bounces.shop.example", secret=SECRET)
    assert address.startswith("bounces+")
    assert address.endswith("@bounces.shop.example")
    assert address == address.lower()
    found = row_token_from_address(address)
    assert found is not None
    assert outbox_id_from_token(found, secret=SECRET) == outbox_id


def test_survives_uppercasing_by_an_mta() -> None:
    assert outbox_id_from_token(token(12345, secret=SECRET).upper(), secret=SECRET) == 12345


@pytest.mark.parametrize(
    "forged",
    [
        "9ix-0000000000000000",  # right id, made-up signature
        token(1, secret="other secret"),  # signed with another key
        token(1, secret=SECRET).replace("1-", "2-", 1),  # signature of another row
        "9ix",
        "",
        "9ix-" + "g" * 16,
        token(1, secret=SECRET) + "0",
    ],
)
def test_forged_tokens_name_no_row(forged: str) -> None:
    assert outbox_id_from_token(forged, secret=SECRET) is None


def test_a_verp_signature_is_not_an_unsubscribe_signature() -> None:
    assert not verify(SECRET, "unsubscribe", "abc", sign(SECRET, "verp", "abc"))
    assert verify(SECRET, "verp", "abc", sign(SECRET, "verp", "abc"))


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("bounces+abc-123@b.example", "abc-123"),
        ("<Bounces+abc-123@b.example>", "abc-123"),
        ("bounces@b.example", None),
        ("bounces+@b.example", None),
        ("other+abc@b.example", None),
        ("not an address", None),
    ],
)
def test_token_from_address(address: str, expected: str | None) -> None:
    assert row_token_from_address(address) == expected


def test_ids_are_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        token(-1, secret=SECRET)


def test_each_kind_of_token_reads_as_its_own_kind() -> None:
    bounce = row_token_from_address(return_path(42, domain="b.example", secret=SECRET))
    unsubscribe = row_token_from_address(unsubscribe_mailto(42, domain="b.example", secret=SECRET))
    assert bounce is not None
    assert unsubscribe is not None
    assert read_token(bounce, secret=SECRET) == RowToken(42, "bounce")
    assert read_token(unsubscribe, secret=SECRET) == RowToken(42, "unsubscribe")
    previous = f"16-{sign(SECRET, 'verp', '16')}"  # the previous release's form
    assert read_token(previous, secret=SECRET) == RowToken(42, "previous")


def test_a_kind_cannot_be_passed_off_as_another() -> None:
    unsubscribe = token(42, secret=SECRET, kind="unsubscribe")
    signature = unsubscribe.rpartition("-")[2]
    for forged in (f"b.16-{signature}", f"16-{signature}"):
        assert read_token(forged, secret=SECRET) is None
    bounce_signature = token(42, secret=SECRET).rpartition("-")[2]
    assert read_token(f"u.16-{bounce_signature}", secret=SECRET) is None
