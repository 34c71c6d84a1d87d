"""The per-process result writer against the real Postgres: one bad result
never holds up the others, and every result is written once waited for."""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable

import pytest

from outbox.config import Settings
from outbox.db import store
from outbox.delivery.writer import ResultWriter
from outbox.errors import StoreError
from tests.integration.helpers import add_newsletter, pool, query


def connect(settings: Settings) -> Callable[[], store.Conn]:
    return functools.partial(store.connect, settings.database_url, autocommit=True)


def _taken(settings: Settings, conn_pool: store.Pool, n: int, worker: str) -> list[int]:
    ids = add_newsletter(settings, n)
    with conn_pool.connection() as conn:
        claimed = store.claim_due(conn, priority="bulk", limit=n, relay="r1")
        rows = store.take_for_sending(conn, [c.id for c in claimed], worker)
    assert sorted(r.id for r in rows) == sorted(ids)
    return ids


def _sent(
    row_id: int, *, reply_code: int = 250, text: str = "2.0.0 queued as A1"
) -> store.AttemptRecord:
    return store.AttemptRecord(
        id=row_id,
        attempt=1,
        status="sent",
        reason="accepted",
        delay_seconds=0.0,
        provider_message_id="A1",
        verdict="sent",
        stage="body",
        reply_code=reply_code,
        enhanced_status="2.0.0",
        reply_text=text,
        duration_ms=1.0,
        transport="smtp",
    )


def test_results_of_many_threads_are_all_written(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        writer = ResultWriter(connect(settings), max_age_seconds=settings.max_age_seconds)
        workers = [f"w{n}" for n in range(4)]
        ids = add_newsletter(settings, 40)
        with conn_pool.connection() as conn:
            claimed = [c.id for c in store.claim_due(conn, priority="bulk", limit=40, relay="r")]
            for n, worker in enumerate(workers):
                store.take_for_sending(conn, claimed[n::4], worker)
        statuses: dict[int, str | None] = {}

        def thread(worker: str, mine: list[int]) -> None:
            for row_id in mine:
                statuses[row_id] = writer.wait(writer.submit(worker, _sent(row_id)))

        threads = [
            threading.Thread(target=thread, args=(w, claimed[n::4])) for n, w in enumerate(workers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert statuses == dict.fromkeys(ids, "sent")
    rows = query(settings, "SELECT count(*) FROM email_outbox WHERE status = 'sent'")
    assert rows == [(40,)]
    assert query(settings, "SELECT count(*) FROM email_attempt") == [(40,)]


def test_a_result_postgres_refuses_does_not_hold_up_the_others(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        good, bad, other = _taken(settings, conn_pool, 3, "w1")
        writer = ResultWriter(connect(settings), max_age_seconds=settings.max_age_seconds)
        # A reply code beyond Postgres's integer range: the statement fails on its content.
        futures = [
            writer.submit("w1", _sent(good)),
            writer.submit("w1", _sent(bad, reply_code=2**40)),
            writer.submit("w1", _sent(other)),
        ]
        assert [writer.wait(f) for f in futures] == ["sent", "sent", "sent"]
    rows = {
        r[0]: r[1:]
        for r in query(
            settings,
            "SELECT o.id, o.status, a.reply_code, a.reply_text FROM email_outbox o"
            " JOIN email_attempt a ON a.outbox_id = o.id",
        )
    }
    assert rows[good] == ("sent", 250, "2.0.0 queued as A1")
    assert rows[other] == ("sent", 250, "2.0.0 queued as A1")
    # Sent, as it was; only the reply Postgres could not take is left out.
    assert rows[bad] == ("sent", None, None)
    reason = query(settings, "SELECT status_reason FROM email_outbox WHERE id = %s", bad)
    assert reason == [("sent; reply not storable",)]


def test_a_row_no_longer_held_is_reported_as_not_ours(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        (row_id,) = _taken(settings, conn_pool, 1, "w1")
        writer = ResultWriter(connect(settings), max_age_seconds=settings.max_age_seconds)
        # Another worker's result for the row: the row is not its to finish.
        assert writer.wait(writer.submit("w2", _sent(row_id))) is None
    assert query(settings, "SELECT status FROM email_outbox") == [("sending",)]


def test_a_group_with_a_refused_recipient_records_every_result_and_suppresses_only_it(
    settings: Settings,
) -> None:
    with pool(settings) as conn_pool:
        gone, fine = _taken(settings, conn_pool, 2, "w3")
    refused = dataclasses.replace(
        _sent(gone, reply_code=550, text="5.1.1 no such user"),
        status="failed",
        verdict="failed",
        stage="rcpt",
        enhanced_status="5.1.1",
        provider_message_id=None,
        suppress=True,
    )
    writer = ResultWriter(connect(settings), max_age_seconds=settings.max_age_seconds)
    try:
        done = [writer.submit("w3", refused), writer.submit("w3", _sent(fine))]
        assert [writer.wait(d) for d in done] == ["failed", "sent"]
    finally:
        writer.close()
    ((address,),) = query(settings, "SELECT recipient FROM email_outbox WHERE id = %s", gone)
    assert query(settings, "SELECT address, scope, reason, detail FROM email_suppression") == [
        (address.lower(), "all", "hard_bounce", "refused at RCPT TO: 5.1.1")
    ]
    assert query(settings, "SELECT count(*) FROM email_attempt") == [(2,)]


def test_a_defect_in_writing_fails_the_waiting_threads_instead_of_hanging_them(
    settings: Settings,
) -> None:
    def broken() -> store.Conn:
        raise RuntimeError("not a database error")  # a defect, not an outage

    writer = ResultWriter(broken, max_age_seconds=settings.max_age_seconds)
    first = writer.submit("w5", _sent(1))
    with pytest.raises(StoreError, match="recording results failed"):
        writer.wait(first)
    # The writer thread is still there for the next results.
    with pytest.raises(StoreError, match="recording results failed"):
        writer.wait(writer.submit("w5", _sent(2)))


def test_a_result_waited_for_is_written_at_once_not_after_the_gathering(
    settings: Settings,
) -> None:
    with pool(settings) as conn_pool:
        (row_id,) = _taken(settings, conn_pool, 1, "w6")
        # A gathering time no test could wait out: only the waiter's wake-up writes it.
        writer = ResultWriter(
            connect(settings), max_age_seconds=settings.max_age_seconds, gather_seconds=3600
        )
        done = writer.submit("w6", _sent(row_id))
        assert not done.done()
        assert writer.wait(done) == "sent"
        assert done.done()


def test_stop_writes_what_is_held_and_ends_the_thread(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        ids = _taken(settings, conn_pool, 3, "w7")
        # Nothing waits for these and the gathering outlasts the test: only stop writes them.
        writer = ResultWriter(
            connect(settings), max_age_seconds=settings.max_age_seconds, gather_seconds=3600
        )
        handles = [writer.submit("w7", _sent(row_id)) for row_id in ids]
        thread = writer._thread
        assert thread is not None
        assert thread.is_alive()
        assert writer.stop(timeout=10) is True
        assert not thread.is_alive()
        assert all(h.done() and h.result() == "sent" for h in handles)
        assert writer._conn is None  # its connection closed with it
    rows = query(settings, "SELECT count(*) FROM email_outbox WHERE status = 'sent'")
    assert rows == [(3,)]


def test_a_result_handed_over_after_stop_is_still_written(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        first, second = _taken(settings, conn_pool, 2, "w8")
        writer = ResultWriter(connect(settings), max_age_seconds=settings.max_age_seconds)
        assert writer.wait(writer.submit("w8", _sent(first))) == "sent"
        assert writer.stop(timeout=10) is True
        assert writer.stop(timeout=10) is True  # a second stop has nothing to do
        assert writer.wait(writer.submit("w8", _sent(second))) == "sent"  # a new thread
        assert writer.stop(timeout=10) is True


def test_stop_while_postgres_refuses_connections_keeps_the_results(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        (row_id,) = _taken(settings, conn_pool, 1, "w9")
        down = threading.Event()
        down.set()

        def connect_unless_down() -> store.Conn:
            if down.is_set():
                raise StoreError("connection refused (Postgres is down)")
            return connect(settings)()

        writer = ResultWriter(connect_unless_down, max_age_seconds=settings.max_age_seconds)
        done = writer.submit("w9", _sent(row_id))
        assert writer.stop(timeout=0.5) is False  # not written: said so, not dropped
        assert not done.done()
        down.clear()  # Postgres is back: the thread that went on trying writes it
        assert writer.wait(done) == "sent"
        assert writer.stop(timeout=10) is True
