"""send_at (outbox.fields.schedule): aware datetimes only, stored in UTC."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from outbox.errors import InvalidMessage
from outbox.fields.schedule import check_send_at


def test_an_aware_datetime_is_stored_in_utc() -> None:
    berlin = dt.datetime(2026, 12, 24, 18, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    stored = check_send_at(berlin)
    assert stored == berlin
    assert stored is not None
    assert stored.tzinfo is dt.UTC
    assert stored.hour == 17
    assert check_send_at(None) is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (dt.datetime(2026, 12, 24, 18, 0), "naive"),
        (dt.date(2026, 12, 24), "datetime with a timezone"),
        ("2026-12-24T18:00:00Z", "datetime with a timezone"),
        (1766595600, "datetime with a timezone"),
    ],
)
def test_anything_else_is_refused(value: object, says: str) -> None:
    with pytest.raises(InvalidMessage, match=says):
        check_send_at(value)
