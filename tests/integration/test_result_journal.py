"""Results journaled in the real Redis before the next send, and recovered by
the sweep from a process that died before writing them to the real Postgres."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap

import redis

from outbox.config import Settings
from outbox.db.store import connections, processes, relaying, results
from outbox.delivery.journal import ResultJournal, decode, journal_key, process_of
from outbox.delivery.writer import Pending
from tests.integration.helpers import add_newsletter, harness, pool, query, statuses, wait_until
from tests.integration.test_result_writer import _sent, _taken

DEAD = "gone-host:4242:worker-1"  # no heartbeat: a process killed mid-batch


def _age_locks(settings: Settings, seconds: float) -> None:
    """The rows were taken ``seconds`` ago (the stuck threshold has passed)."""
    with connections.connect(settings.database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE email_outbox SET locked_at = now() - make_interval(secs => %s)"
            " WHERE status = 'sending'",
            (seconds,),
        )


def _sweep(settings: Settings) -> tuple[int, relaying.Swept]:
    journal = ResultJournal(settings.redis_url, settings.namespace)
    with pool(settings) as conn_pool, conn_pool.connection() as conn:
        recovered = journal.recover(conn, stuck_seconds=settings.stuck_seconds)
        swept = relaying.sweep(
            conn, stuck_seconds=settings.stuck_seconds, max_attempts=8, hold=False
        )
    journal.drop(recovered.finished)
    return recovered.recorded, swept


def test_the_sweep_records_what_a_dead_worker_journaled_and_resends_only_the_rest(
    settings: Settings, redis_client: redis.Redis
) -> None:
    with pool(settings) as conn_pool:
        sent_a, sent_b, in_flight = _taken(settings, conn_pool, 3, DEAD)
    journal = ResultJournal(settings.redis_url, settings.namespace)
    assert journal.ensure(journal.record(DEAD, _sent(sent_a)))
    assert journal.ensure(journal.record(DEAD, _sent(sent_b, text="2.0.0 queued as B2")))
    journal.close()  # the process died: the kernel sends what it held
    key = journal_key(settings.namespace, process_of(DEAD))
    wait_until(lambda: redis_client.hlen(key) == 2, 5)
    _age_locks(settings, settings.stuck_seconds + 5)

    recorded, swept = _sweep(settings)

    assert recorded == 2
    assert swept.uncertain == {"pending": 1}  # only the one it had in flight
    rows = query(
        settings, "SELECT id, status, attempts, provider_message_id FROM email_outbox ORDER BY id"
    )
    assert rows == [
        (sent_a, "sent", 1, "A1"),
        (sent_b, "sent", 1, "A1"),
        (in_flight, "pending", 1, None),
    ]
    attempts = query(
        settings, "SELECT outbox_id, verdict, reply_text FROM email_attempt ORDER BY outbox_id"
    )
    assert attempts == [
        (sent_a, "sent", "2.0.0 queued as A1"),
        (sent_b, "sent", "2.0.0 queued as B2"),
        (in_flight, "uncertain", "worker lost while sending"),
    ]
    assert not redis_client.exists(key)  # nothing left to apply


def test_a_live_process_journal_is_left_to_it(
    settings: Settings, redis_client: redis.Redis
) -> None:
    live = "live-host:7:worker-3"
    with pool(settings) as conn_pool:
        (row_id,) = _taken(settings, conn_pool, 1, live)
        with conn_pool.connection() as conn:
            processes.beat(conn, "live-host:7", "worker", {})
    journal = ResultJournal(settings.redis_url, settings.namespace)
    assert journal.ensure(journal.record(live, _sent(row_id)))
    key = journal_key(settings.namespace, process_of(live))
    # In the kernel, on its way (small sends are held back up to 200 ms, to share packets).
    wait_until(lambda: redis_client.hlen(key) == 1, 5)
    _age_locks(settings, settings.stuck_seconds + 5)  # a slow send, but its process beats

    recorded, swept = _sweep(settings)

    assert (recorded, swept.uncertain) == (0, {})
    assert query(settings, "SELECT status FROM email_outbox") == [("sending",)]
    assert redis_client.hlen(key) == 1  # left to its process
    journal.clear(live, [row_id])  # the live thread drops it once Postgres has the result
    # Sent without waiting for Redis' reply (there is none): it arrives very soon.
    wait_until(lambda: not redis_client.exists(key), 5)
    journal.close()


def test_an_entry_of_an_earlier_attempt_is_not_applied(
    settings: Settings, redis_client: redis.Redis
) -> None:
    with pool(settings) as conn_pool:
        (row_id,) = _taken(settings, conn_pool, 1, DEAD)
    journal = ResultJournal(settings.redis_url, settings.namespace)
    stale = dataclasses.replace(_sent(row_id), attempt=0)  # the row is in attempt 1
    assert journal.ensure(journal.record(DEAD, stale))
    journal.close()  # the process died
    key = journal_key(settings.namespace, process_of(DEAD))
    wait_until(lambda: redis_client.hlen(key) == 1, 5)  # the sweep reads it
    _age_locks(settings, settings.stuck_seconds + 5)

    recorded, swept = _sweep(settings)

    assert (recorded, swept.uncertain) == (0, {"pending": 1})
    assert query(settings, "SELECT verdict FROM email_attempt") == [("uncertain",)]


def test_a_journal_entry_outlives_a_sigkill_right_after_it_was_sent(
    settings: Settings, redis_client: redis.Redis
) -> None:
    """Replies are off, so nothing waits on Redis: the bytes handed to the kernel
    before the kill still arrive, whatever the process does next."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from outbox.delivery.journal import ResultJournal
        from tests.integration.test_result_writer import _sent
        journal = ResultJournal({settings.redis_url!r}, {settings.namespace!r})
        for row_id in range(1, 201):
            assert journal.ensure(journal.record({DEAD!r}, _sent(row_id)))
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        cwd=os.getcwd(),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    key = journal_key(settings.namespace, process_of(DEAD))
    wait_until(lambda: redis_client.hlen(key) == 200, 5)


def test_without_redis_nothing_is_journaled_and_the_caller_is_told(settings: Settings) -> None:
    journal = ResultJournal("redis://127.0.0.1:9/0", settings.namespace)  # nothing listens
    assert journal.ensure(journal.record(DEAD, _sent(1))) is False
    assert journal.redis.is_down
    # For a second after a failure no thread tries Redis again: told at once.
    assert journal.record(DEAD, _sent(2)).sent is False


def test_a_delivered_batch_leaves_no_journal_behind(
    settings: Settings, redis_client: redis.Redis
) -> None:
    add_newsletter(settings, 30)
    with harness(settings) as (h, sink):
        h.run()
    assert statuses(settings) == {"sent": 30}
    assert len(sink.messages) == 30
    wait_until(lambda: not list(redis_client.scan_iter(f"{settings.namespace}:results:*")), 5)


def test_without_redis_each_send_waits_for_postgres_and_nothing_is_lost(
    settings: Settings,
) -> None:
    """The journal is an accelerator: without it the end-of-data dot waits for
    the thread's previous result to be in Postgres, as before it existed."""
    unreachable = dataclasses.replace(settings, redis_url="redis://127.0.0.1:9/0")
    add_newsletter(unreachable, 30)
    with harness(unreachable) as (h, sink):
        h.run()
        assert h.delivery.journal.redis.is_down
    assert statuses(settings) == {"sent": 30}
    assert len(sink.messages) == 30
    assert query(settings, "SELECT count(*) FROM email_attempt") == [(30,)]


def test_a_reply_json_cannot_hold_is_journaled_as_postgres_stores_it(
    settings: Settings, redis_client: redis.Redis
) -> None:
    journal = ResultJournal(settings.redis_url, settings.namespace)
    hostile = dataclasses.replace(_sent(1), reply_text="250 ok \udcff\x00")  # an undecodable byte
    assert journal.ensure(journal.record(DEAD, hostile))
    journal.close()
    key = journal_key(settings.namespace, process_of(DEAD))
    wait_until(lambda: redis_client.hexists(key, "1"), 5)
    raw = redis_client.hget(key, "1")
    assert isinstance(raw, bytes)
    assert decode(raw) == (
        DEAD,
        dataclasses.replace(hostile, reply_text="250 ok " + "\ufffd" * 4),
    )  # 3 bytes, NUL


def test_one_send_carries_every_thread_result_waiting_and_a_batch_drops_only_its_own(
    settings: Settings, redis_client: redis.Redis
) -> None:
    journal = ResultJournal(settings.redis_url, settings.namespace)
    first = journal.record("h:9:Thread-1", _sent(1))
    second = journal.record("h:9:Thread-2", _sent(2))
    assert (first.sent, second.sent) == (None, None)  # buffered, not yet sent
    assert journal.ensure(second)  # thread 2's next dot
    assert first.sent is True  # went with it: thread 1's dot sends nothing
    key = journal_key(settings.namespace, "h:9")
    wait_until(lambda: redis_client.hlen(key) == 2, 5)
    assert 0 < redis_client.ttl(key) <= 7 * 24 * 3600  # a journal nobody drops expires

    journal.clear("h:9:Thread-1", [1])  # thread 1's batch is in Postgres
    journal.close()
    wait_until(lambda: redis_client.hkeys(key) == [b"2"], 5)


def test_a_result_is_encoded_once_when_sent_and_the_writer_records_those_bytes(
    settings: Settings, redis_client: redis.Redis
) -> None:
    journal = ResultJournal(settings.redis_url, settings.namespace)
    item = Pending("h:8:Thread-1", _sent(1))
    ticket = journal.add(item)
    assert item.entry is None  # not encoded while its thread goes on
    assert journal.ensure(ticket, item)
    assert item.entry == results.result_entry("h:8:Thread-1", _sent(1))
    journal.close()
    key = journal_key(settings.namespace, "h:8")
    wait_until(lambda: redis_client.hget(key, "1") == item.entry, 5)


def test_a_result_json_cannot_hold_is_left_out_and_its_thread_waits_for_postgres(
    settings: Settings, redis_client: redis.Redis
) -> None:
    journal = ResultJournal(settings.redis_url, settings.namespace)
    unwritable = Pending("h:7:Thread-1", _sent(1, reply_code=2**70))  # no JSON integer
    fine = Pending("h:7:Thread-2", _sent(2))
    first, second = journal.add(unwritable), journal.add(fine)
    assert journal.ensure(second, fine)  # one send for both
    assert first.sent is True
    assert journal.ensure(first, unwritable) is False  # not journaled: Postgres first
    assert unwritable.entry is None
    journal.close()
    key = journal_key(settings.namespace, "h:7")
    wait_until(lambda: redis_client.hkeys(key) == [b"2"], 5)


def test_a_journal_emptied_by_a_drop_and_made_again_still_expires(
    settings: Settings, redis_client: redis.Redis
) -> None:
    """The expiry goes with a hash's first results, not with every send: a drop
    that empties the hash deletes it, and the results after it make a new one."""
    journal = ResultJournal(settings.redis_url, settings.namespace)
    key = journal_key(settings.namespace, "h:6")
    assert journal.ensure(journal.record("h:6:Thread-1", _sent(1)))
    assert journal.ensure(journal.record("h:6:Thread-1", _sent(2)))
    wait_until(lambda: redis_client.hlen(key) == 2, 5)
    assert 0 < redis_client.ttl(key) <= 7 * 24 * 3600
    journal.clear("h:6:Thread-1", [1, 2])  # the hash is empty: Redis deletes it
    wait_until(lambda: not redis_client.exists(key), 5)
    assert journal.ensure(journal.record("h:6:Thread-1", _sent(3)))
    wait_until(lambda: redis_client.hkeys(key) == [b"3"], 5)
    assert 0 < redis_client.ttl(key) <= 7 * 24 * 3600
    # Deleted behind the journal's back (a flushed Redis) while its connection
    # lives on: the next drop re-arms it.
    redis_client.delete(key)
    assert journal.ensure(journal.record("h:6:Thread-1", _sent(4)))
    journal.clear("h:6:Thread-2", [9])
    assert journal.ensure(journal.record("h:6:Thread-1", _sent(5)))
    journal.close()
    wait_until(lambda: redis_client.hlen(key) == 2, 5)
    assert 0 < redis_client.ttl(key) <= 7 * 24 * 3600
