"""What a console request asks for (outbox.web.console_query) and its chart."""

from __future__ import annotations

import datetime as dt

import pytest

from outbox.errors import InvalidRequest
from outbox.web.chart import sends_chart
from outbox.web.console_query import (
    Filters,
    first_id_at,
    id_window,
    parse_cursor,
    parse_filters,
    parse_id,
    parse_search,
    reason_of,
)


def test_an_address_is_recognised_and_folded() -> None:
    search = parse_search({"q": "  Carol@Example.COM "})
    assert search.ref == "Carol@Example.COM"
    assert search.address == "carol@example.com"
    assert parse_search({"q": "order-17"}).address is None
    assert parse_search({"q": "<abc@outbox.localhost>"}).address is None  # a Message-ID


def test_filters_parse_and_come_back_as_the_same_fields() -> None:
    form = {
        "status": "dead",
        "priority": "high",
        "template": "login_code",
        "since": "2026-12-01T10:00",
        "until": "2026-12-01T12:30",
    }
    filters = parse_filters(form)
    assert filters.since == dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.UTC)
    assert filters.as_query() == form
    assert Filters().as_query() == {}


@pytest.mark.parametrize(
    "form",
    [
        {"status": "lost"},
        {"priority": "urgent"},
        {"template": "../etc"},
        {"since": "yesterday"},
        {"since": "2026-12-02T00:00", "until": "2026-12-01T00:00"},
    ],
)
def test_a_bad_filter_is_refused(form: dict[str, str]) -> None:
    with pytest.raises(InvalidRequest):
        parse_filters(form)


def test_cursors_and_ids_are_plain_numbers() -> None:
    assert parse_cursor("") is None
    assert parse_cursor("120") == 120
    assert parse_id("7") == 7
    for bad in ("-1", "1e3", "x", "9" * 19):
        with pytest.raises(InvalidRequest):
            parse_cursor(bad)
        with pytest.raises(InvalidRequest):
            parse_id(bad)
    with pytest.raises(InvalidRequest):
        parse_search({"q": "x" * 999})


def test_an_action_needs_a_reason_of_one_line() -> None:
    assert reason_of({"reason": " relay\nfixed  again "}) == "relay fixed again"
    for bad in ({}, {"reason": "   "}, {"reason": "x" * 501}):
        with pytest.raises(InvalidRequest):
            reason_of(bad)


def test_the_chart_has_one_bar_per_busy_minute_scaled_to_the_busiest() -> None:
    svg = sends_chart({100: 5, 110: 10, 50: 99}, now_minute=119, minutes=60)
    assert svg.count("<rect") == 2  # minute 50 is outside the last hour
    assert 'height="100.0"' in svg  # the busiest minute is full height (120 - 20)
    assert 'height="50.0"' in svg
    assert "15 sent in the last 60 minutes" in svg
    assert "<script" not in svg
    assert sends_chart({}, now_minute=10).count("<rect") == 0


T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def enqueued_at(minutes: dict[int, int]) -> object:
    """``created_at_of`` over rows id → minute after T0 (ids may have gaps)."""
    ids = sorted(minutes)

    def first_from(outbox_id: int) -> dt.datetime | None:
        later = [i for i in ids if i >= outbox_id]
        return T0 + dt.timedelta(minutes=minutes[later[0]]) if later else None

    return first_from


def test_the_first_id_at_a_time_is_found_by_bisection_over_gaps() -> None:
    rows = {i: i * 10 for i in range(1, 200, 3)}  # every third id, ten minutes apart
    lookup = enqueued_at(rows)
    # An id between rows stands for the next row: id 2 is "from id 4 on".
    for minute, expected in ((0, 1), (10, 1), (11, 2), (300, 29), (10_000, 200)):
        found = first_id_at(T0 + dt.timedelta(minutes=minute), 1, 199, lookup)  # type: ignore[arg-type]
        assert found == expected, minute
        assert all(rows[i] < minute for i in rows if i < found)


def test_a_time_filter_widens_to_ids_enqueued_within_the_slack() -> None:
    rows = {i: i for i in range(1, 1001)}  # one row a minute
    lookup = enqueued_at(rows)
    since, until = T0 + dt.timedelta(minutes=500), T0 + dt.timedelta(minutes=560)
    first, end = id_window(Filters(since=since, until=until), 1, 1000, lookup)  # type: ignore[arg-type]
    assert (first, end) == (440, 620)  # an hour of slack either side
    assert id_window(Filters(), 1, 1000, lookup) == (0, None)  # type: ignore[arg-type]
    first, end = id_window(Filters(since=since), 1, 1000, lookup)  # type: ignore[arg-type]
    assert (first, end) == (440, None)


def test_a_tag_filter_takes_a_label_as_enqueue_does() -> None:
    assert parse_filters({"tag": " receipt "}).tag == "receipt"
    assert parse_filters({"tag": "receipt"}).as_query() == {"tag": "receipt"}
    assert parse_filters({"tag": ""}).tag is None
    for bad in ("two words", "x" * 65, "ümlaut", "a'b"):
        with pytest.raises(InvalidRequest):
            parse_filters({"tag": bad})
