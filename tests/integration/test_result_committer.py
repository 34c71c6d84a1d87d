"""The per-process result committer against the real Postgres: results of
many threads committed together, one bad result never holds up the others, a
commit whose answer was lost is read back, never written twice."""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator

import psycopg.conninfo
import pytest

from outbox.config import Settings
from outbox.db.store import connections, relaying, results, sending
from outbox.delivery.result_committer import ResultCommitter
from outbox.errors import StoreError
from tests.integration.helpers import add_newsletter, pool, query
from tests.lost_answer import LostAnswer


def connect(settings: Settings, url: str | None = None) -> Callable[[], connections.Conn]:
    return functools.partial(
        connections.connect, url or settings.database_url, autocommit=True, prepare=False
    )


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


def test_a_writer_that_prepares_plans_once_and_records_alike(settings: Settings) -> None:
    """The worker's result writer plans its statements once (prepared statements
    on); without prepared statements the server's default stays."""
    with (
        connections.connect(settings.database_url, autocommit=True, generic_plans=True) as conn,
        connections.connect(
            settings.database_url, autocommit=True, prepare=False, generic_plans=True
        ) as plain,
        pool(settings) as conn_pool,
    ):
        assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_generic_plan",)
        assert plain.execute("SHOW plan_cache_mode").fetchone() == ("auto",)
        ids = _taken(settings, conn_pool, 12, "w1")
        # More calls than psycopg makes before it prepares the statement.
        for start in range(0, 12, 2):
            group = ids[start : start + 2]
            assert results.record_results(conn, [("w1", _sent(i)) for i in group]) == set(group)
    sent = query(settings, "SELECT count(*) FROM email_outbox WHERE status = 'sent'")
    attempts = query(settings, "SELECT count(*) FROM email_attempt WHERE verdict = 'sent'")
    assert (sent, attempts) == ([(12,)], [(12,)])


_OPEN: list[ResultCommitter] = []


def _committer(settings: Settings, connect_to: Callable[[], connections.Conn]) -> ResultCommitter:
    """A committer the test closes, whatever the test leaves held."""
    committer = ResultCommitter(connect_to, max_age_seconds=settings.max_age_seconds)
    _OPEN.append(committer)
    return committer


@pytest.fixture(autouse=True)
def _committers_closed() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close(timeout=5)


def test_results_of_many_threads_are_all_written(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        committer = _committer(settings, connect(settings))
        workers = [f"w{n}" for n in range(4)]
        ids = add_newsletter(settings, 40)
        with conn_pool.connection() as conn:
            claimed = [c.id for c in relaying.claim_due(conn, priority="bulk", limit=40, relay="r")]
            for n, worker in enumerate(workers):
                sending.take_for_sending(conn, claimed[n::4], worker)
        statuses: dict[int, str | None] = {}

        def thread(worker: str, mine: list[int]) -> None:
            for row_id in mine:
                statuses[row_id] = committer.submit(worker, _sent(row_id)).wait(10)

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


def test_results_handed_over_during_a_commit_go_together_in_the_next(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        first, *rest = _taken(settings, conn_pool, 5, "w6")
        gate, connected = threading.Event(), threading.Event()

        def slow_connect() -> connections.Conn:
            connected.set()
            gate.wait(10)  # the first group's write holds here
            return connect(settings)()

        committer = _committer(settings, slow_connect)
        a = committer.submit("w6", _sent(first))
        assert connected.wait(10)
        others = [committer.submit("w6", _sent(i)) for i in rest]
        assert not any(h.done() for h in [a, *others])
        assert committer.held() == 5
        gate.set()
        assert [h.wait(10) for h in [a, *others]] == ["sent"] * 5
        assert committer.held() == 0
    # Rows changed by one transaction share its id: the four came in one commit.
    xids = query(
        settings, "SELECT DISTINCT xmin::text FROM email_outbox WHERE id = ANY(%s)", list(rest)
    )
    assert len(xids) == 1
    assert query(settings, "SELECT count(*) FROM email_attempt") == [(5,)]


def test_a_result_postgres_refuses_does_not_hold_up_the_others(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        good, bad, other = _taken(settings, conn_pool, 3, "w1")
        committer = _committer(settings, connect(settings))
        # A reply code beyond Postgres's integer range: the statement fails on its content.
        futures = [
            committer.submit("w1", _sent(good)),
            committer.submit("w1", _sent(bad, reply_code=2**40)),
            committer.submit("w1", _sent(other)),
        ]
        assert [f.wait(10) for f in futures] == ["sent", "sent", "sent"]
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
        committer = _committer(settings, connect(settings))
        # Another worker's result for the row: the row is not its to finish.
        assert committer.submit("w2", _sent(row_id)).wait(10) is None
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
    committer = _committer(settings, connect(settings))
    try:
        done = [committer.submit("w3", refused), committer.submit("w3", _sent(fine))]
        assert [d.wait(10) for d in done] == ["failed", "sent"]
    finally:
        committer.close(timeout=5)
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

    committer = _committer(settings, broken)
    first = committer.submit("w5", _sent(1))
    with pytest.raises(StoreError, match="recording results failed"):
        first.wait(10)
    # The committer still takes the next results.
    with pytest.raises(StoreError, match="recording results failed"):
        committer.submit("w5", _sent(2)).wait(10)


def test_close_commits_what_is_held_and_closes_the_connection(settings: Settings) -> None:
    with pool(settings) as conn_pool:
        ids = _taken(settings, conn_pool, 3, "w7")
        committer = _committer(settings, connect(settings))
        handles = [committer.submit("w7", _sent(row_id)) for row_id in ids]  # nobody waits
        assert committer.close(timeout=10) is True
        assert [h.wait(0) for h in handles] == ["sent"] * 3
        assert committer._conn is None  # its connection closed
        with pytest.raises(RuntimeError, match="closed"):
            committer.submit("w7", _sent(ids[0]))
    rows = query(settings, "SELECT count(*) FROM email_outbox WHERE status = 'sent'")
    assert rows == [(3,)]


def test_close_while_postgres_refuses_connections_gives_up_and_says_so(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with pool(settings) as conn_pool:
        (row_id,) = _taken(settings, conn_pool, 1, "w9")

        def refused() -> connections.Conn:
            raise StoreError("connection refused (Postgres is down)")

        committer = _committer(settings, refused)
        done = committer.submit("w9", _sent(row_id))
        with pytest.raises(TimeoutError):
            done.wait(0.3)  # held while Postgres is away, tried again
        assert committer.close(timeout=0.5) is False
        assert not done.done()
    # Held by this process until it is silent: the sweeper's, not lost.
    assert query(settings, "SELECT status FROM email_outbox") == [("sending",)]
    assert "results of 1 rows not yet in Postgres" in caplog.text


def test_a_commit_whose_answer_was_lost_is_read_back_not_written_twice(
    settings: Settings,
) -> None:
    params = psycopg.conninfo.conninfo_to_dict(settings.database_url)
    front = LostAnswer((str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)))
    try:
        with pool(settings) as conn_pool:
            first, second = _taken(settings, conn_pool, 2, "w11")
            committer = _committer(settings, connect(settings, front.url(settings.database_url)))
            front.arm(b"email_attempt")  # record_results' statement: it commits, unheard
            lost = committer.submit("w11", _sent(first))
            assert lost.wait(10) is None  # recorded by the commit nobody heard: not again
            assert front.cut.is_set()
            assert committer.submit("w11", _sent(second)).wait(10) == "sent"
    finally:
        front.close()
    rows = query(settings, "SELECT status FROM email_outbox ORDER BY id")
    assert rows == [("sent",), ("sent",)]
    attempts = query(
        settings, "SELECT outbox_id, count(*) FROM email_attempt GROUP BY 1 ORDER BY 1"
    )
    assert attempts == [(first, 1), (second, 1)]


def test_results_written_before_a_refused_hand_back_are_not_written_again(
    settings: Settings,
) -> None:
    with pool(settings) as conn_pool:
        sent, handed_back = _taken(settings, conn_pool, 2, "w10")
        committer = _committer(settings, connect(settings))
        attempt = committer.submit("w10", _sent(sent))
        # jsonb refuses \u0000: the hand-back's statement fails after the attempts' one.
        back = committer.submit(
            "w10", results.Unattempted(handed_back, "w10", "path down \x00", 0.0)
        )
        assert back.wait(10) == "pending"  # recorded without its reason
        assert attempt.wait(0) == "sent"
    assert query(settings, "SELECT count(*) FROM email_attempt") == [(1,)]
