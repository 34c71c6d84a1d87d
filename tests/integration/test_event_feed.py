"""The event feed: recorded with the change that causes it, read in order,
never passing an event that commits later."""

from __future__ import annotations

import asyncio
import dataclasses

import psycopg
import pytest

import outbox
from outbox import enqueue
from outbox.config import Settings
from outbox.db.store import api_key_rows, connections, suppressions
from outbox.errors import InvalidCursor
from outbox.redact import recipient_tag
from outbox.web import api_keys
from tests.integration.drivers import ASYNC, SYNC
from tests.integration.helpers import LOGIN, query
from tests.integration.test_http_api import running
from tests.keys import SECRET


@pytest.fixture
def esettings(settings: Settings) -> Settings:
    return dataclasses.replace(settings, secret=SECRET)


def add(settings: Settings, key: str, to: str = "alice@example.com") -> int:
    with psycopg.connect(settings.database_url) as conn:
        return enqueue(
            conn,
            idempotency_key=key,
            to=to,
            template="login_code",
            params=LOGIN,
            tags=["signup"],
            metadata={"user": "42"},
            settings=settings,
        ).id


def set_status(settings: Settings, row: int, *steps: str) -> None:
    with psycopg.connect(settings.database_url) as conn:
        for status in steps:
            conn.execute(
                "UPDATE email_outbox SET status = %s, status_reason = %s,"
                " provider_message_id = 'Q123' WHERE id = %s",
                (status, f"now {status}", row),
            )


def read(settings: Settings, after: str | None = None, limit: int = 100) -> list[dict]:
    with psycopg.connect(settings.database_url) as conn:
        return outbox.read_events(conn, after, limit, settings=settings)


def test_routine_steps_write_no_event_and_outcomes_one_each(esettings: Settings) -> None:
    row = add(esettings, "k1")
    set_status(esettings, row, "queued", "sending")
    assert read(esettings) == []
    set_status(esettings, row, "sent")
    [event] = read(esettings)
    assert event["type"] == "email.sent"
    assert event["id"].startswith("evt_")
    assert event["data"] == {
        "id": row,
        "idempotency_key": "k1",
        "message_id": query(esettings, "SELECT message_id FROM email_outbox")[0][0],
        "provider_id": "Q123",
        "status": "sent",
        "reason": "now sent",
        "tags": ["signup"],
        "metadata": {"user": "42"},
        "to": recipient_tag("alice@example.com", secret=SECRET),
    }
    assert event["timestamp"].endswith("Z")
    with psycopg.connect(esettings.database_url) as conn:
        clear = outbox.read_events(conn, addresses=True, settings=esettings)
    assert clear[0]["data"]["to"] == "alice@example.com"


def test_cancel_and_suppressed_enqueue_are_events(esettings: Settings) -> None:
    row = add(esettings, "k1")
    with psycopg.connect(esettings.database_url) as conn:
        outbox.cancel(conn, "k1", reason="order refunded", by="test")
        suppressions.suppress(conn, "gone@example.com", reason="manual")
    suppressed = add(esettings, "k2", to="gone@example.com")
    events = read(esettings)
    assert [(e["type"], e["data"]["id"]) for e in events] == [
        ("email.cancelled", row),
        ("email.suppressed", suppressed),
    ]
    assert events[0]["data"]["reason"] == "cancelled: order refunded"


def test_the_cursor_pages_in_order_and_a_bad_one_is_refused(esettings: Settings) -> None:
    rows = [add(esettings, f"k{i}") for i in range(5)]
    for row in rows:
        set_status(esettings, row, "failed")
    first = read(esettings, limit=2)
    rest = read(esettings, first[-1]["cursor"], limit=10)
    assert [e["data"]["id"] for e in first + rest] == rows
    assert read(esettings, rest[-1]["cursor"]) == []
    with pytest.raises(InvalidCursor):
        read(esettings, "12; DROP TABLE email_outbox")
    with pytest.raises(ValueError, match="limit"):
        read(esettings, None, 0)


def test_an_event_committed_after_a_later_id_is_not_passed_by(esettings: Settings) -> None:
    """A transaction that took its id first commits last: a reader that served
    the later id already still gets it, in either order of the transactions."""
    a, b, c, d = (add(esettings, f"k{i}") for i in range(4))
    url = esettings.database_url
    with psycopg.connect(url) as first, psycopg.connect(url) as second:
        # The older transaction (lower xid) writes the higher event id and commits first.
        first.execute("SELECT pg_current_xact_id()")
        second.execute("SELECT pg_current_xact_id()")
        second.execute("UPDATE email_outbox SET status = 'sent' WHERE id = %s", (a,))
        first.execute("UPDATE email_outbox SET status = 'sent' WHERE id = %s", (b,))
        first.commit()
        seen = read(esettings)
        assert [e["data"]["id"] for e in seen] == [b]
        second.commit()
        later = read(esettings, seen[-1]["cursor"])
        assert [e["data"]["id"] for e in later] == [a]
    with psycopg.connect(url) as first, psycopg.connect(url) as second:
        # The transaction holding the lower event id commits last: nothing
        # after it is served until it ends.
        first.execute("UPDATE email_outbox SET status = 'sent' WHERE id = %s", (c,))
        second.execute("UPDATE email_outbox SET status = 'sent' WHERE id = %s", (d,))
        second.commit()
        assert read(esettings, later[-1]["cursor"]) == []
        first.commit()
        last = read(esettings, later[-1]["cursor"])
        assert [e["data"]["id"] for e in last] == [c, d]
    ids = [e["id"] for e in read(esettings)]
    assert len(ids) == len(set(ids)) == 4


def test_a_transaction_in_another_database_does_not_hold_the_feed(esettings: Settings) -> None:
    row = add(esettings, "k1")
    elsewhere = esettings.database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(elsewhere) as other:
        other.execute("SELECT pg_current_xact_id()")  # an xid, older than the event's
        set_status(esettings, row, "sent")
        assert [e["data"]["id"] for e in read(esettings)] == [row]
        other.rollback()


def test_the_async_reader_returns_the_same_events(esettings: Settings) -> None:
    row = add(esettings, "k1")
    set_status(esettings, row, "dead")

    async def read_async() -> list[dict]:
        conn = await psycopg.AsyncConnection.connect(esettings.database_url)
        async with conn:
            return await outbox.read_events_async(conn, settings=esettings)

    assert asyncio.run(read_async()) == read(esettings)
    assert read(esettings)[0]["type"] == "email.dead"


def test_held_is_uncertain(esettings: Settings) -> None:
    row = add(esettings, "k1")
    set_status(esettings, row, "held")
    assert [e["type"] for e in read(esettings)] == ["email.uncertain"]


def test_the_http_feed_returns_what_read_events_does_per_owner(esettings: Settings) -> None:
    running_api = running(esettings)
    api = next(running_api)
    try:
        shop = _owner_key(esettings, "shop")
        other = _owner_key(esettings, "billing")
        answer = api.post("/v1/emails", shop, {**_LOGIN_EMAIL}, key="order-1")
        assert answer.status_code == 202, answer.text
        mine = answer.json()["id"]
        theirs = api.post("/v1/emails", other, {**_LOGIN_EMAIL}, key="order-1").json()["id"]
        for row in (mine, theirs):
            set_status(esettings, row, "sent")
        page = api.get("/v1/events", shop, limit="10").json()
        assert [e["data"]["id"] for e in page["events"]] == [mine]
        assert page["events"][0]["data"]["idempotency_key"] == "order-1"
        assert page["next_cursor"] == page["events"][0]["cursor"]
        assert api.get("/v1/events", shop, after=page["next_cursor"]).json() == {
            "events": [],
            "next_cursor": page["next_cursor"],
        }
        everything = read(esettings)
        assert [e["data"]["id"] for e in everything] == [mine, theirs]
        # The same event as read_events shows it, but for the key as its owner gave it.
        shown = {**everything[0], "data": {**everything[0]["data"], "idempotency_key": "order-1"}}
        assert page["events"][0] == shown
        bad = api.get("/v1/events", shop, after="nonsense")
        assert bad.status_code == 422
        assert api.get("/v1/events", shop, limit="0").status_code == 422
    finally:
        running_api.close()


_LOGIN_EMAIL = {"to": "alice@example.com", "template": "login_code", "params": LOGIN}


def _owner_key(settings: Settings, owner: str) -> str:
    token = api_keys.new_token()
    with connections.connect(settings.database_url) as conn:
        api_key_rows.create_api_key(
            conn,
            name=f"{owner}-key",
            token_hash=api_keys.token_hash(token),
            prefix=api_keys.shown_prefix(token),
            scopes=["send", "read"],
            owner=owner,
        )
        conn.commit()
    return token


@pytest.mark.parametrize("driver", sorted(SYNC))
def test_every_sync_driver_reads_the_same_events(esettings: Settings, driver: str) -> None:
    rows = [add(esettings, f"k{i}") for i in range(3)]
    for row in rows:
        set_status(esettings, row, "sent")
    expected = read(esettings)
    with SYNC[driver](esettings.database_url) as handle:
        first = outbox.read_events(handle.conn, None, 2, settings=esettings)
        rest = outbox.read_events(handle.conn, first[-1]["cursor"], settings=esettings)
        handle.commit()
    assert first + rest == expected


@pytest.mark.parametrize("driver", sorted(ASYNC))
def test_every_async_driver_reads_the_same_events(esettings: Settings, driver: str) -> None:
    rows = [add(esettings, f"k{i}") for i in range(3)]
    for row in rows:
        set_status(esettings, row, "sent")
    expected = read(esettings)

    async def run() -> list[dict]:
        async with ASYNC[driver](esettings.database_url) as handle:
            found = await outbox.read_events_async(handle.conn, settings=esettings)
            await handle.commit()
            return found

    assert asyncio.run(run()) == expected
