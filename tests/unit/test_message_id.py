from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from outbox.message.message_id import message_id

# RFC 5322 section 3.6.4 msg-id with a dot-atom-text left side.
MSG_ID = re.compile(r"<[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+@[A-Za-z0-9.-]+>")


def test_same_key_same_id() -> None:
    assert message_id("order-1234-confirmation", "mail.example") == message_id(
        "order-1234-confirmation", "mail.example"
    )


def test_keys_and_domains_give_different_ids() -> None:
    ids = {
        message_id("order-1", "mail.example"),
        message_id("order-2", "mail.example"),
        message_id("order-1", "other.example"),
    }
    assert len(ids) == 3


def test_key_is_not_readable_in_the_id() -> None:
    assert "1234" not in message_id("order-1234", "mail.example")


@given(st.text(min_size=1, max_size=255))
def test_any_key_gives_a_valid_msg_id(key: str) -> None:
    value = message_id(key, "mail.example")
    assert MSG_ID.fullmatch(value)
    assert value.endswith("@mail.example>")
    assert len(value) < 78


def test_regression_keyed_message_id_cannot_be_computed_from_a_guessed_key() -> None:
    """Finding 1: the Message-ID of ``order-1001-confirmation`` was anyone's to compute."""
    from tests.keys import OTHER_SECRET, SECRET  # noqa: PLC0415

    keyed = message_id("order-1001-confirmation", "mail.example", SECRET)
    assert keyed == message_id("order-1001-confirmation", "mail.example", SECRET)  # stable
    assert keyed != message_id("order-1001-confirmation", "mail.example")  # the unkeyed one
    assert keyed != message_id("order-1001-confirmation", "mail.example", OTHER_SECRET)
    assert MSG_ID.fullmatch(keyed)
