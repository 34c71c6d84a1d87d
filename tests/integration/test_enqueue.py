from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from outbox import enqueue, enqueue_many
from outbox.config import Settings
from outbox.errors import IdempotencyConflict, InvalidAddress, MissingParams, UnknownTemplate
from outbox.message.message_id import message_id
from tests.integration.helpers import query

LOGIN = {"name": "Alice", "code": "123456", "product": "Shop", "minutes": 10}
NEWS = {"name": "R", "title": "News", "intro": "Hi", "url": "https://x.example"}


def count(settings: Settings) -> int:
    with psycopg.connect(settings.database_url) as other:
        row = other.execute("SELECT count(*) FROM email_outbox").fetchone()
        assert row is not None
        return int(row[0])


def login(
    conn: psycopg.Connection[Any], settings: Settings, key: str = "login-1", **kw: Any
) -> Any:
    args = {
        "to": "alice@example.com",
        "template": "login_code",
        "params": LOGIN,
        "priority": "high",
    }
    return enqueue(conn, idempotency_key=key, settings=settings, **{**args, **kw})


def test_enqueue_is_part_of_the_callers_transaction(
    conn: psycopg.Connection[Any], settings: Settings
) -> None:
    result = login(conn, settings)
    assert result.created
    assert result.message_id == message_id("login-1", settings.message_id_domain)
    assert count(settings) == 0  # not committed yet: invisible to others
    conn.rollback()
    assert count(settings) == 0
    login(conn, settings)
    conn.commit()
    assert count(settings) == 1


def test_one_statement_per_enqueue(conn: psycopg.Connection[Any], settings: Settings) -> None:
    # The template version is stored in the caller's transaction until a later
    # statement finds it committed; from then on, an enqueue is one statement.
    login(conn, settings, key="warm-1")
    conn.commit()
    login(conn, settings, key="warm-2")
    conn.commit()
    statements: list[object] = []

    class CountingCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
            statements.append(query)
            return super().execute(query, *args, **kwargs)

    conn.cursor_factory = CountingCursor
    login(conn, settings)
    assert len(statements) == 1


def test_same_key_is_enqueued_once(conn: psycopg.Connection[Any], settings: Settings) -> None:
    first = login(conn, settings)
    conn.commit()
    again = login(conn, settings)
    conn.commit()
    assert not again.created
    assert (again.id, again.message_id) == (first.id, first.message_id)
    assert count(settings) == 1


def test_same_key_other_content_is_a_conflict(
    conn: psycopg.Connection[Any], settings: Settings
) -> None:
    login(conn, settings)
    conn.commit()
    with pytest.raises(IdempotencyConflict, match="login-1"):
        login(conn, settings, params={**LOGIN, "code": "999999"})
    with pytest.raises(IdempotencyConflict):
        login(conn, settings, to="mallory@example.com")
    conn.rollback()
    assert count(settings) == 1


def test_concurrent_transactions_with_one_key(settings: Settings) -> None:
    with psycopg.connect(settings.database_url) as a, psycopg.connect(settings.database_url) as b:
        first = login(a, settings)
        # b's insert waits for a's transaction; commit a from another thread.
        timer = threading.Timer(0.3, a.commit)
        timer.start()
        second = login(b, settings)
        b.commit()
        timer.join()
    assert first.created
    assert not second.created
    assert first.id == second.id
    assert count(settings) == 1


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"to": "not-an-address"}, InvalidAddress),
        ({"template": "nope"}, UnknownTemplate),
        ({"params": {"name": "A"}}, MissingParams),
    ],
)
def test_bad_input_writes_nothing(
    conn: psycopg.Connection[Any],
    settings: Settings,
    kwargs: dict[str, Any],
    error: type[Exception],
) -> None:
    with pytest.raises(error):
        login(conn, settings, **kwargs)
    conn.commit()
    assert count(settings) == 0


def test_notify_wakes_listeners_at_commit(
    conn: psycopg.Connection[Any], settings: Settings
) -> None:
    with psycopg.connect(settings.database_url, autocommit=True) as listener:
        listener.execute("LISTEN outbox_due")
        login(conn, settings)
        assert list(listener.notifies(timeout=0.2)) == []
        conn.commit()
        notes = list(listener.notifies(timeout=2, stop_after=1))
    assert [n.payload for n in notes] == ["high"]


def newsletter(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "idempotency_key": f"nl-{i}",
            "to": f"r{i}@example.com",
            "template": "newsletter",
            "params": NEWS,
        }
        for i in range(start, start + n)
    ]


def test_enqueue_many_inserts_all(conn: psycopg.Connection[Any], settings: Settings) -> None:
    results = enqueue_many(conn, newsletter(500), settings=settings)
    conn.commit()
    assert len(results) == 500
    assert all(r.created for r in results)
    assert [r.idempotency_key for r in results] == [f"nl-{i}" for i in range(500)]
    assert len({r.message_id for r in results}) == 500
    assert count(settings) == 500
    again = enqueue_many(conn, newsletter(600), settings=settings)
    conn.commit()
    assert sum(r.created for r in again) == 100
    assert [r.id for r in again[:500]] == [r.id for r in results]
    assert count(settings) == 600


def test_enqueue_many_is_all_or_nothing(conn: psycopg.Connection[Any], settings: Settings) -> None:
    rows = newsletter(100)
    rows[57]["to"] = "broken@"
    with pytest.raises(InvalidAddress, match="#57"):
        enqueue_many(conn, rows, settings=settings)
    rows = newsletter(3) + newsletter(1)
    with pytest.raises(IdempotencyConflict, match="twice"):
        enqueue_many(conn, rows, settings=settings)
    conn.commit()
    assert count(settings) == 0


def test_enqueue_many_refuses_changed_content(
    conn: psycopg.Connection[Any], settings: Settings
) -> None:
    enqueue_many(conn, newsletter(10), settings=settings)
    conn.commit()
    rows = newsletter(20)
    rows[3]["params"] = {**NEWS, "title": "Changed"}
    with pytest.raises(IdempotencyConflict, match="nl-3"):
        enqueue_many(conn, rows, settings=settings)
    conn.commit()
    assert count(settings) == 10


def test_enqueue_many_twice_in_one_transaction(
    conn: psycopg.Connection[Any], settings: Settings
) -> None:
    enqueue_many(conn, newsletter(5), settings=settings)
    enqueue_many(conn, newsletter(5, start=5), settings=settings)
    conn.commit()
    assert count(settings) == 10


def test_enqueue_many_side_by_side_returns_each_its_own_rows(settings: Settings) -> None:
    results: dict[str, list[Any]] = {}

    def newsletter_of(prefix: str) -> None:
        rows = [
            {**row, "idempotency_key": f"{prefix}-{i}"} for i, row in enumerate(newsletter(3000))
        ]
        with psycopg.connect(settings.database_url) as own:
            results[prefix] = enqueue_many(own, rows, settings=settings)
            own.commit()

    threads = [threading.Thread(target=newsletter_of, args=(p,)) for p in ("a", "b", "c")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = dict(query(settings, "SELECT idempotency_key, id FROM email_outbox"))
    assert len(stored) == 9000
    for prefix, enqueued in results.items():
        assert [r.idempotency_key for r in enqueued] == [f"{prefix}-{i}" for i in range(3000)]
        assert all(stored[r.idempotency_key] == r.id for r in enqueued)
        assert all(r.created for r in enqueued)


def test_enqueue_many_with_some_known_keys_takes_the_careful_way(
    conn: psycopg.Connection[Any], settings: Settings
) -> None:
    enqueue_many(conn, newsletter(10, start=990), settings=settings)  # the last ten
    conn.commit()
    results = enqueue_many(conn, newsletter(1000), settings=settings)
    conn.commit()
    assert [r.created for r in results] == [True] * 990 + [False] * 10
    assert count(settings) == 1000
    assert [r.idempotency_key for r in results] == [f"nl-{i}" for i in range(1000)]


def test_enqueue_many_first_in_a_transaction_leaves_the_commit_to_the_caller(
    settings: Settings,
) -> None:
    with psycopg.connect(settings.database_url) as fresh:  # nothing run on it yet
        enqueue_many(fresh, newsletter(5), settings=settings)
        with pytest.raises(IdempotencyConflict):  # the staging way, too
            enqueue_many(
                fresh, [{**newsletter(1)[0], "to": "other@example.com"}], settings=settings
            )
        fresh.rollback()
    assert count(settings) == 0
    with psycopg.connect(settings.database_url) as fresh:
        enqueue_many(fresh, newsletter(5), settings=settings)
        enqueue_many(fresh, newsletter(7), settings=settings)  # two known keys: staging way
        fresh.rollback()
    assert count(settings) == 0
    with psycopg.connect(settings.database_url, autocommit=True) as auto:
        enqueue_many(auto, newsletter(5), settings=settings)  # autocommit: its own transaction
    assert count(settings) == 5
