"""What a cancellation must carry (outbox.fields.cancel_reasons)."""

from __future__ import annotations

import pytest

from outbox import Cancellation
from outbox.errors import InvalidMessage
from outbox.fields.cancel_reasons import MAX_BY, MAX_REASON, check_cancellation


def test_reason_and_by_are_kept_trimmed() -> None:
    assert check_cancellation("  order refunded ", "support:ana") == (
        "order refunded",
        "support:ana",
    )


def test_reason_and_by_may_be_left_out() -> None:
    assert check_cancellation(None, None) == (None, None)
    assert check_cancellation(None, "support:ana") == (None, "support:ana")
    assert check_cancellation("refund", None) == ("refund", None)


@pytest.mark.parametrize(
    ("reason", "by", "says"),
    [
        ("", "ana", "reason must be a non-empty string"),
        ("   ", "ana", "reason must be a non-empty string"),
        (7, "ana", "reason must be a non-empty string"),
        ("refund", "", "by must be a non-empty string"),
        ("refund", 7, "by must be a non-empty string"),
        ("line\nbreak", "ana", "control characters"),
        ("refund", "ana\x00", "control characters"),
        ("x" * (MAX_REASON + 1), "ana", "over 500"),
        ("refund", "y" * (MAX_BY + 1), "over 200"),
        ("refund \ud800", "ana", "invalid Unicode"),
    ],
)
def test_bad_cancellations_are_refused(reason: object, by: object, says: str) -> None:
    with pytest.raises(InvalidMessage, match=says):
        check_cancellation(reason, by)


def test_the_result_is_true_only_when_it_cancelled() -> None:
    assert Cancellation(True, "cancelled", 1)
    assert not Cancellation(False, "sent", 1)
    assert not Cancellation(False, None)
