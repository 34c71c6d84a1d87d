"""Owners of API keys: names, keys stored under an owner's name, what a key reaches."""

from __future__ import annotations

import pytest

from outbox.validate import MAX_KEY_LENGTH
from outbox.web.email_request import batch_fields, key_errors
from outbox.web.owners import MARK, Owner, checked_owner

BILLING = Owner("billing")
DEFAULT = Owner(None)


@pytest.mark.parametrize(
    ("given", "stored"),
    [("default", None), ("billing", "billing"), ("svc-2.eu_west", "svc-2.eu_west")],
)
def test_owner_names(given: str, stored: str | None) -> None:
    assert checked_owner(given) == stored


@pytest.mark.parametrize("bad", ["", "-x", "a b", f"a{MARK}b", "x" * 65, "Zürich"])
def test_an_owner_name_that_could_be_mistaken_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="give --owner"):
        checked_owner(bad)


def test_an_owners_keys_are_stored_under_its_name_and_shown_as_given() -> None:
    stored = BILLING.stored_key("order-1")
    assert stored == f"billing{MARK}order-1"
    assert BILLING.shown_key(stored) == "order-1"
    assert DEFAULT.stored_key("order-1") == "order-1"  # as before owners existed
    # An operator of the default owner sees another owner's key as stored.
    assert Owner(None, operator=True).shown_key(stored) == stored
    assert BILLING.shown_text(f"key {stored!r} was used") == "key 'order-1' was used"


def test_a_key_that_would_reach_into_another_namespace_or_overflow_is_refused() -> None:
    assert DEFAULT.key_problem(f"billing{MARK}order-1") is not None
    assert BILLING.key_problem(f"shop{MARK}order-1") is not None
    room = MAX_KEY_LENGTH - len("billing") - 1
    assert BILLING.key_problem("k" * room) is None
    assert f"{room} characters" in str(BILLING.key_problem("k" * (room + 1)))
    assert DEFAULT.key_problem("k" * MAX_KEY_LENGTH) is None
    assert [e.where for e in key_errors(f"x{MARK}", DEFAULT)] == ["Idempotency-Key"]
    item = {"to": "a@example.com", "subject": "s", "text": "t", "idempotency_key": f"x{MARK}"}
    assert [e.where for e in batch_fields({"emails": [item]}, BILLING)] == [
        "/emails/0/idempotency_key"
    ]


def test_what_a_key_reaches_is_a_filter_of_the_lookup() -> None:
    assert BILLING.visible() == {
        "every_owner": False,
        "owner_prefix": f"billing{MARK}",
        "mark": MARK,
    }
    assert DEFAULT.visible()["owner_prefix"] == ""
    assert Owner("billing", operator=True).visible()["every_owner"] is True
