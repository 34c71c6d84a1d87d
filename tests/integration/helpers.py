"""Shared set-up for the integration tests: rows, pools, waiting."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from outbox import enqueue_many
from outbox.config import Settings

NEWS = {"name": "R", "title": "News", "intro": "Hi", "url": "https://x.example"}
LOGIN = {"name": "Alice", "code": "123456", "product": "Shop", "minutes": 10}


def add_newsletter(
    settings: Settings, n: int, *, prefix: str = "nl", domain: str = "example.com"
) -> list[int]:
    with psycopg.connect(settings.database_url) as conn:
        results = enqueue_many(
            conn,
            (
                {
                    "idempotency_key": f"{prefix}-{i}",
                    "to": f"r{i}@{domain}",
                    "template": "newsletter",
                    "params": NEWS,
                }
                for i in range(n)
            ),
            settings=settings,
        )
        conn.commit()
    return [r.id for r in results]


@contextmanager
def pool(settings: Settings) -> Iterator[ConnectionPool]:
    with ConnectionPool(settings.database_url, min_size=1, max_size=4) as p:
        yield p


def query(settings: Settings, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.database_url) as conn:
        return conn.execute(sql.encode(), args or None).fetchall()


def statuses(settings: Settings) -> dict[str, int]:
    return dict(query(settings, "SELECT status, count(*) FROM email_outbox GROUP BY 1"))


def wait_until(check: Callable[[], bool], timeout: float = 30.0, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
