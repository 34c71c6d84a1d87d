"""Single-email POSTs share commits, and each is answered as it would be alone.

A group forms when every committer is busy: here the one committer is held on
a row lock (another transaction inserting the same key, not yet committed)
while more requests arrive; they queue and are committed together when it is
free. Against the real Postgres and a real `outbox web`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

import outbox
from outbox.config import Settings
from outbox.db.store import connections
from outbox.errors import IdempotencyConflict, StoreError
from outbox.intake import Enqueued
from outbox.web.enqueue_groups import EnqueueGroups
from tests.integration.helpers import LOGIN, query
from tests.integration.test_http_api import Api, running

BODY = {"to": "alice@example.com", "template": "login_code", "params": LOGIN}


def email(key: str, to: str = "alice@example.com") -> dict[str, Any]:
    return {"idempotency_key": key, "to": to, "template": "login_code", "params": LOGIN}


@pytest.fixture
def groups(settings: Settings) -> Iterator[EnqueueGroups]:
    with connections.Pool(settings.database_url, name="test-groups", max_size=4) as pool:

        def on(conn: connections.Conn, arguments: dict[str, Any]) -> Enqueued:
            return outbox.enqueue(conn, settings=settings, **arguments)

        g = EnqueueGroups(pool, on, committers=1, wait_seconds=30)
        yield g
        g.close()


def held_committer(settings: Settings, key: str) -> psycopg.Connection[Any]:
    """A transaction that inserted ``key`` and has not committed: an enqueue of it waits."""
    conn = psycopg.connect(settings.database_url)
    outbox.enqueue(conn, **email(key), settings=settings)
    return conn


def submit(
    pool: concurrent.futures.ThreadPoolExecutor, groups: EnqueueGroups, jobs: list[dict[str, Any]]
) -> list[concurrent.futures.Future[Enqueued]]:
    return [pool.submit(groups.enqueue, job) for job in jobs]


def wait_queued(groups: EnqueueGroups, n: int) -> None:
    deadline = time.monotonic() + 10
    while len(groups._waiting) < n:  # the test's own view of the queue
        assert time.monotonic() < deadline, "requests did not queue"
        time.sleep(0.01)


def test_requests_waiting_together_share_one_commit_and_keep_their_own_answers(
    settings: Settings, groups: EnqueueGroups
) -> None:
    blocker = held_committer(settings, "blocker")
    with concurrent.futures.ThreadPoolExecutor(40) as pool:
        first = pool.submit(groups.enqueue, email("blocker"))  # waits on the row lock
        time.sleep(0.2)
        jobs = [email(f"k-{i}", f"r{i}@example.com") for i in range(30)]
        jobs.append(email("k-3", "r3@example.com"))  # the same email twice in one group
        jobs.append(email("k-4", "someone-else@example.com"))  # the key, other content
        futures = submit(pool, groups, jobs)
        wait_queued(groups, len(jobs))
        blocker.commit()
        blocker.close()
        assert first.result(10).created is False  # the blocker's row, found
        outcomes = [f.exception(10) or f.result(10) for f in futures]
    assert groups.group_sizes == [len(jobs)]  # all of them in one transaction
    created = [o for o in outcomes[:30] if isinstance(o, Enqueued)]
    assert [o.created for o in created] == [True] * 30
    again = outcomes[30]
    assert isinstance(again, Enqueued)
    assert again.created is False
    assert (again.id, again.message_id) == (created[3].id, created[3].message_id)
    assert isinstance(outcomes[31], IdempotencyConflict)
    rows = query(settings, "SELECT count(*), count(DISTINCT idempotency_key) FROM email_outbox")
    assert rows == [(31, 31)]  # 30 and the blocker


def test_a_statement_postgres_refuses_fails_alone_and_the_others_commit(
    settings: Settings, groups: EnqueueGroups
) -> None:
    # A rule of this database that enqueue's validation knows nothing of.
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        conn.execute(
            "ALTER TABLE email_outbox ADD CONSTRAINT test_refused"
            " CHECK (recipient <> 'refused@example.com') NOT VALID"
        )
    try:
        blocker = held_committer(settings, "blocker")
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            first = pool.submit(groups.enqueue, email("blocker"))
            time.sleep(0.2)
            jobs = [email(f"k-{i}", f"r{i}@example.com") for i in range(10)]
            jobs.insert(5, email("bad", "refused@example.com"))
            futures = submit(pool, groups, jobs)
            wait_queued(groups, len(jobs))
            blocker.commit()
            blocker.close()
            first.result(10)
            outcomes = [f.exception(10) or f.result(10) for f in futures]
    finally:
        with psycopg.connect(settings.database_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE email_outbox DROP CONSTRAINT test_refused")
    assert isinstance(outcomes[5], StoreError)
    good = [o for i, o in enumerate(outcomes) if i != 5]
    assert all(isinstance(o, Enqueued) and o.created for o in good), good
    assert groups.group_sizes == []  # the shared transaction never committed
    keys = {r[0] for r in query(settings, "SELECT idempotency_key FROM email_outbox")}
    assert keys == {"blocker"} | {f"k-{i}" for i in range(10)}


def test_requests_alone_commit_at_once(settings: Settings, groups: EnqueueGroups) -> None:
    for i in range(5):
        assert groups.enqueue(email(f"k-{i}")).created
    assert groups.group_sizes == []  # never more than one waiting
    assert query(settings, "SELECT count(*) FROM email_outbox") == [(5,)]


def test_closing_answers_what_was_waiting_and_refuses_what_comes_after(
    settings: Settings, groups: EnqueueGroups
) -> None:
    blocker = held_committer(settings, "blocker")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        first = pool.submit(groups.enqueue, email("blocker"))
        time.sleep(0.2)
        waiting = pool.submit(groups.enqueue, email("k-1"))
        wait_queued(groups, 1)
        closing = threading.Thread(target=groups.close)
        closing.start()
        blocker.commit()
        blocker.close()
        closing.join(15)
        assert first.result(10).created is False
        assert waiting.result(10).created is True
    with pytest.raises(StoreError, match="shutting down"):
        groups.enqueue(email("k-2"))


def test_many_concurrent_posts_through_outbox_web_each_answered_once(settings: Settings) -> None:
    for api in running(dataclasses.replace(settings, web_pool_size=4)):  # one committer
        token = api.key()

        # A client per thread: 32 connections at once, none shared between threads.
        local = threading.local()
        clients: list[httpx.Client] = []

        def post(
            i: int,
            api: Api = api,
            token: str = token,
            local: threading.local = local,
            clients: list[httpx.Client] = clients,
        ) -> tuple[int, Any]:
            if not hasattr(local, "client"):
                local.client = httpx.Client(timeout=30)
                clients.append(local.client)
            key = f"web-{i % 150}"  # 50 of 200 repeat a key
            headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key}
            answer = local.client.post(api.url + "/v1/emails", json=BODY, headers=headers)
            return answer.status_code, answer.json()

        try:
            with concurrent.futures.ThreadPoolExecutor(32) as pool:
                answers = list(pool.map(post, range(200)))
        finally:
            for client in clients:
                client.close()
        assert {status for status, _ in answers} <= {200, 202}
        assert sum(1 for status, _ in answers if status == 202) == 150
        by_key: dict[str, set[tuple[int, str]]] = {}
        for _, doc in answers:
            by_key.setdefault(doc["idempotency_key"], set()).add((doc["id"], doc["message_id"]))
        assert all(len(ids) == 1 for ids in by_key.values())
        assert len(by_key) == 150
        assert max(api.server.app.api.groups.group_sizes, default=1) > 1  # commits were shared
    assert query(settings, "SELECT count(*) FROM email_outbox") == [(150,)]
