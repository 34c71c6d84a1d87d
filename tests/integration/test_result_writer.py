"""The per-process result writer against the real Postgres: one bad result
never holds up the others, and every result is written once waited for."""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator

import pytest

from outbox.config import Settings
from outbox.db.store import connections, relaying, results, sending
from outbox.delivery.writer import Pending, ResultWriter
from outbox.errors import StoreError
from tests.integration.helpers import add_newsletter, pool, query


def connect(settings: Settings) -> Callable[[], connections.Conn]:
    return functools.partial(connections.connect, settings.database_url, autocommit=True)


def _taken(settings: Settings, conn_pool: connections.Pool, n: int, worker: str) -> list[int]:
    ids = add_newsletter(settings, n)
    with conn_pool.connection() as conn:
        claimed = relaying.claim_due(conn, priority="bulk", limit=n, relay="r1")
        rows = sending.take_for_sending(conn, [c.id for c in claimed], worker)
    assert sorted(r.id for r in rows) == sorted(ids)
    return ids


def _sent(
    row_id: int, *, reply_code: int = 250, text: str = "2.0.0 queued as A1"
) -> results.AttemptRecord:
    return results.AttemptRecord(
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


_OPEN: list[ResultWriter] = []


def _writer(settings: Settings, connect_to: Callable[[], connections.Conn]) -> ResultWriter:
    """A writer whose connection the test closes, whatever the test leaves held."""
    writer = ResultWriter(connect_to, max_age_seconds=settings.max_age_seconds)
    _OPEN.append(writer)
    return writer


@pytest.fixture(autouse=True)
def _writers_closed() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def test_results_of_many_threads_are_all_written(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        writer = _writer(settings, connect(settings))
        workers = [f"w{n}" for n in range(4)]
        ids = add_newsletter(settings, 40)
        with conn_pool.connection() as conn:
            claimed = [c.id for c in relaying.claim_due(conn, priority="bulk", limit=40, relay="r")]
            for n, worker in enumerate(workers):
                sending.take_for_sending(conn, claimed[n::4], worker)
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
        writer = _writer(settings, connect(settings))
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
        writer = _writer(settings, connect(settings))
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
    writer = _writer(settings, connect(settings))
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
    def broken() -> connections.Conn:
        raise RuntimeError("not a database error")  # a defect, not an outage

    writer = _writer(settings, broken)
    first = writer.submit("w5", _sent(1))
    with pytest.raises(StoreError, match="recording results failed"):
        writer.wait(first)
    # The writer still takes the next results.
    with pytest.raises(StoreError, match="recording results failed"):
        writer.wait(writer.submit("w5", _sent(2)))


def test_a_wait_writes_every_thread_result_held_in_one_statement(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        add_newsletter(settings, 4)
        with conn_pool.connection() as conn:
            claimed = [c.id for c in relaying.claim_due(conn, priority="bulk", limit=4, relay="r")]
            mine, theirs = claimed[:2], claimed[2:]
            sending.take_for_sending(conn, mine, "w6a")
            sending.take_for_sending(conn, theirs, "w6b")
        writer = _writer(settings, connect(settings))
        handles = [writer.submit("w6a", _sent(i)) for i in mine]
        others = [writer.submit("w6b", _sent(i)) for i in theirs]
        assert not any(h.done() for h in handles + others)  # held until a thread waits
        assert writer.held() == 4
        assert writer.wait(handles[-1]) == "sent"
        assert all(h.done() and h.result() == "sent" for h in handles + others)
        assert writer.held() == 0
    rows = query(settings, "SELECT count(*) FROM email_outbox WHERE status = 'sent'")
    assert rows == [(4,)]


def test_a_thread_waiting_while_another_writes_is_carried_by_that_write(
    settings: Settings,
) -> None:
    with pool(settings) as conn_pool:
        first, second = _taken(settings, conn_pool, 2, "w6c")
        gate = threading.Event()
        connected = threading.Event()

        def slow_connect() -> connections.Conn:
            connected.set()
            gate.wait(10)  # the first thread's write holds here, its group taken
            return connect(settings)()

        writer = _writer(settings, slow_connect)
        a = writer.submit("w6c", _sent(first))
        b = writer.submit("w6c", _sent(second))
        writing = threading.Thread(target=writer.wait, args=(a,))
        writing.start()
        assert connected.wait(10)
        waited: list[str | None] = []
        waiter = threading.Thread(target=lambda: waited.append(writer.wait(b)))
        waiter.start()
        waiter.join(0.2)
        assert waiter.is_alive()  # it waits for the write under way, which holds b too
        gate.set()
        writing.join(10)
        waiter.join(10)
        assert waited == ["sent"]
        assert a.result() == "sent"
    assert query(settings, "SELECT count(*) FROM email_attempt") == [(2,)]


def _a_write_held_under_way(
    settings: Settings, conn_pool: connections.Pool, worker: str, *, writer_connections: int = 3
) -> tuple[ResultWriter, Pending, int, threading.Thread, threading.Event]:
    """A writer whose first write (of one result, ``a``) is held while connecting
    until the returned gate is set; and a second row taken, not yet handed over."""
    first, second = _taken(settings, conn_pool, 2, worker)
    gate, connected = threading.Event(), threading.Event()
    made: list[int] = []

    def connect_to() -> connections.Conn:
        made.append(1)
        if len(made) == 1:
            connected.set()
            gate.wait(10)
        return connect(settings)()

    writer = ResultWriter(
        connect_to, max_age_seconds=settings.max_age_seconds, connections=writer_connections
    )
    _OPEN.append(writer)
    a = writer.submit(worker, _sent(first))
    writing = threading.Thread(target=writer.wait, args=(a,))
    writing.start()
    assert connected.wait(10)  # a's write is under way, held
    return writer, a, second, writing, gate


def test_results_held_while_another_write_is_under_way_go_on_a_second_connection(
    settings: Settings,
) -> None:
    with pool(settings) as conn_pool:
        writer, a, second, writing, gate = _a_write_held_under_way(settings, conn_pool, "w6d")
        b = writer.submit("w6d", _sent(second))
        assert writer.wait(b) == "sent"  # not queued behind a's write
        assert not a.done()
        gate.set()
        writing.join(10)
        assert a.result() == "sent"
    assert query(settings, "SELECT count(*) FROM email_attempt") == [(2,)]


def test_with_every_connection_writing_a_thread_waits_then_writes_its_own(
    settings: Settings,
) -> None:
    with pool(settings) as conn_pool:
        writer, a, second, writing, gate = _a_write_held_under_way(
            settings, conn_pool, "w6e", writer_connections=1
        )
        b = writer.submit("w6e", _sent(second))  # after a's group was taken
        waited: list[str | None] = []
        waiter = threading.Thread(target=lambda: waited.append(writer.wait(b)))
        waiter.start()
        waiter.join(0.2)
        assert waiter.is_alive()  # the one connection is busy
        gate.set()
        writing.join(10)
        waiter.join(10)
        assert (a.result(), waited) == ("sent", ["sent"])
    assert query(settings, "SELECT count(*) FROM email_attempt") == [(2,)]


def test_stop_writes_what_is_held_and_closes_the_connection(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        ids = _taken(settings, conn_pool, 3, "w7")
        writer = _writer(settings, connect(settings))
        handles = [writer.submit("w7", _sent(row_id)) for row_id in ids]  # nobody waits
        assert writer.stop(timeout=10) is True
        assert all(h.done() and h.result() == "sent" for h in handles)
        assert writer._lines == []  # its connections closed
    rows = query(settings, "SELECT count(*) FROM email_outbox WHERE status = 'sent'")
    assert rows == [(3,)]


def test_a_result_handed_over_after_stop_is_still_written(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        first, second = _taken(settings, conn_pool, 2, "w8")
        writer = _writer(settings, connect(settings))
        assert writer.wait(writer.submit("w8", _sent(first))) == "sent"
        assert writer.stop(timeout=10) is True
        assert writer.stop(timeout=10) is True  # a second stop has nothing to do
        assert writer.wait(writer.submit("w8", _sent(second))) == "sent"  # a new connection
        assert writer.stop(timeout=10) is True


def test_stop_while_postgres_refuses_connections_keeps_the_results(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        (row_id,) = _taken(settings, conn_pool, 1, "w9")
        down = threading.Event()
        down.set()

        def connect_unless_down() -> connections.Conn:
            if down.is_set():
                raise StoreError("connection refused (Postgres is down)")
            return connect(settings)()

        writer = _writer(settings, connect_unless_down)
        done = writer.submit("w9", _sent(row_id))
        assert writer.stop(timeout=0.5) is False  # not written: said so, not dropped
        assert not done.done()
        down.clear()  # Postgres is back: the next wait writes what stop could not
        assert writer.wait(done) == "sent"
        assert writer.stop(timeout=10) is True


def test_results_written_before_a_refused_hand_back_are_not_written_again(
    settings: Settings,
) -> None:
    with pool(settings) as conn_pool:
        sent, handed_back = _taken(settings, conn_pool, 2, "w10")
        writer = _writer(settings, connect(settings))
        attempt = writer.submit("w10", _sent(sent))
        # jsonb refuses \u0000: the hand-back's statement fails after the attempts' one.
        back = writer.submit("w10", results.Unattempted(handed_back, "w10", "path down \x00", 0.0))
        assert writer.wait(back) == "pending"  # recorded without its reason
        assert attempt.result() == "sent"
    assert query(settings, "SELECT count(*) FROM email_attempt") == [(1,)]
