"""Results recorded in Postgres in groups, several threads' in one statement.

A worker thread hands each result over the moment its reply arrives
(:meth:`ResultWriter.submit`); it has already journaled it in Redis
(:mod:`outbox.delivery.journal`), so it goes on to its next message at once.
One writer thread per process writes what has been handed over in one
statement (:func:`outbox.db.store.record_results`, and
:func:`outbox.db.store.return_unattempted` for rows handed back). A group
gathers for at most ``gather_seconds`` or ``group_size`` results, and goes at
once when a thread waits for one of its results (:meth:`ResultWriter.wait`):
at the end of its batch, or before its next end-of-data dot when its result
could not be journaled. Each statement and commit costs Postgres far more
than a result in it, so groups keep that cost near what one write per batch
cost, while a result reaches Postgres within milliseconds.

While Postgres is away the writer keeps the results and tries again (the rows
stay ``sending``, held by this live process, and are not swept); it says so
once, and once when it could write again. A statement that fails for its own
content, not for the connection, is split so one bad result cannot hold up
the others, and a result Postgres refuses even alone is recorded without its
reply.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence

from outbox.db import store
from outbox.errors import StoreError
from outbox.telemetry.outages import DownOnce

log = logging.getLogger(__name__)

_RETRY_DELAYS = (0.1, 0.2, 0.5, 1.0)  # then every second until Postgres answers
# A group of journaled results waits this long for others to join it, at most.
GATHER_SECONDS = 0.02
GROUP_SIZE = 64


class Pending:
    """A result on its way to Postgres; :meth:`ResultWriter.wait` gives the row's
    new status once it is written (None: the row was no longer ours).

    Not a ``concurrent.futures.Future``: one of those is a condition and a
    lock per message, made and thrown away on the sending thread; waiting is
    rare (a batch's end, a result the journal could not take), so waiters
    share the writer's condition instead.
    """

    __slots__ = ("entry", "error", "finished", "record", "status", "worker")

    def __init__(
        self,
        worker: str,
        result: store.AttemptRecord | store.Unattempted,
        entry: bytes | None = None,
    ) -> None:
        self.worker = worker
        self.record = result
        # An attempt as record_results reads it (store.result_entry): the journal's
        # entry when it was journaled, so the result is encoded once.
        self.entry = entry
        self.finished = False
        self.status: str | None = None
        self.error: StoreError | None = None

    def done(self) -> bool:
        return self.finished

    def result(self) -> str | None:
        if self.error is not None:
            raise self.error
        return self.status


class ResultWriter:
    def __init__(
        self,
        connect: Callable[[], store.Conn],
        *,
        max_age_seconds: float,
        gather_seconds: float = GATHER_SECONDS,
        group_size: int = GROUP_SIZE,
    ) -> None:
        self._connect = connect  # an autocommit connection of the writer's own
        self._conn: store.Conn | None = None
        self.max_age_seconds = max_age_seconds
        self.gather_seconds = gather_seconds
        self.group_size = group_size
        self._items: list[Pending] = []
        self._waiting = 0  # threads blocked in wait(): their group goes at once
        self._stopping = False  # stop(): write what is held, then the thread ends
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # the writer thread waits for work
        self._finished = threading.Condition(self._lock)  # waiters, for their results
        self._thread: threading.Thread | None = None
        self.postgres = DownOnce(log, "Postgres (recording results)")

    def submit(
        self,
        worker: str,
        result: store.AttemptRecord | store.Unattempted,
        entry: bytes | None = None,
    ) -> Pending:
        """Hand a result over (an attempt with its :func:`~outbox.db.store.result_entry`
        if it has one); the writer thread writes it at once, or with the next write."""
        item = Pending(worker, result, entry)
        with self._cond:
            self._items.append(item)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="outbox-result-writer", daemon=True
                )
                self._thread.start()
            # Only a change the writer acts on wakes it: a first result to gather
            # for, or a full group. Waking it for every result would cost a thread
            # switch, and the interpreter lock, per message.
            if len(self._items) == 1 or len(self._items) >= self.group_size:
                self._cond.notify()
        return item

    def _connection(self) -> store.Conn:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        self._drop()

    def stop(self, timeout: float) -> bool:
        """At a clean stop: write what is held, end the writer thread and close its
        connection. False if Postgres did not take it all within ``timeout``: the
        thread goes on trying (the results are journaled, and the sweeper records
        them from the journal if the process ends first). A result handed over
        later starts a new thread."""
        with self._cond:
            thread, self._stopping = self._thread, True
            self._cond.notify()
        if thread is not None:
            thread.join(timeout)
        with self._cond:
            self._stopping = False
            held = len(self._items)
            ended = thread is None or not thread.is_alive()
        if not ended:
            log.warning("stopping with the results of %d or more rows not yet in Postgres", held)
            return False
        self._drop()
        return True

    def wait(self, done: Pending) -> str | None:
        """The row's new status once its result is written (None: no longer ours)."""
        if not done.finished:
            with self._lock:
                self._waiting += 1
                self._cond.notify()
                try:
                    while not done.finished:
                        self._finished.wait()
                finally:
                    self._waiting -= 1
        return done.result()

    def _finish(self, item: Pending, status: str | None, error: StoreError | None = None) -> None:
        item.status, item.error = status, error
        item.finished = True  # waiters look under the lock, woken after each write

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items:
                    if self._stopping:
                        # Under the lock with nothing held: a result handed over
                        # from now on finds no thread and starts one.
                        self._thread = None
                        return
                    self._cond.wait()
                deadline = time.monotonic() + self.gather_seconds
                while (
                    not self._waiting and not self._stopping and len(self._items) < self.group_size
                ):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                batch, self._items = self._items, []
            try:
                self._write_all(batch)
            except Exception as exc:  # a defect: the batches waiting fail loudly, not hang
                log.exception("recording the results of %d rows failed", len(batch))
                error = StoreError(f"recording results failed: {exc!r}")
                for item in batch:
                    if not item.finished:
                        self._finish(item, None, error)
            finally:
                with self._lock:
                    self._finished.notify_all()

    def _write_all(self, batch: Sequence[Pending]) -> None:
        if not batch:
            return
        try:
            self._write(batch)
        except StoreError as exc:
            if len(batch) > 1:
                # This statement's own fault: one result in it, most likely; the
                # others are written without it, each half on its own.
                half = len(batch) // 2
                self._write_all(batch[:half])
                self._write_all(batch[half:])
                return
            self._write_plain(batch[0], exc)

    def _write_plain(self, item: Pending, exc: StoreError) -> None:
        """A result Postgres refused even alone: its state, without the reply's text."""
        log.error(
            "result of email %s refused by Postgres (%s); recorded without its reply",
            item.record.id,
            type(exc.__cause__ or exc).__name__,
        )
        result = item.record
        plain: store.AttemptRecord | store.Unattempted
        if isinstance(result, store.AttemptRecord):
            plain = dataclasses.replace(
                result,
                reason=f"{result.status}; reply not storable",
                reply_text=None,
                reply_code=None,
                enhanced_status=None,
                provider_message_id=None,
            )
        else:
            plain = dataclasses.replace(result, reason="handed back; reason not storable")
        stand_in = Pending(item.worker, plain)
        try:
            self._write([stand_in])
            self._finish(item, stand_in.status)
        except StoreError as again:
            self._finish(item, None, again)  # the row stays held; its batch fails loudly

    def _write(self, batch: Sequence[Pending]) -> None:
        """One write, tried again while the connection (not the statement) fails."""
        records = [i for i in batch if isinstance(i.record, store.AttemptRecord)]
        returned = [i.record for i in batch if isinstance(i.record, store.Unattempted)]
        kept: set[int] = set()
        statuses: dict[int, str] = {}
        tries = 0
        while records or returned:
            try:
                conn = self._connection()
                try:
                    # Autocommit: each statement is one round trip; what one wrote
                    # is not written again when the next one's connection fails.
                    if records:
                        kept = store.record_entries(
                            conn,
                            [_entry(i) for i in records],
                            [i.record.id for i in records],
                            refused=any(_suppresses(i) for i in records),
                        )
                        records = []
                    if returned:
                        statuses = store.return_unattempted(
                            conn, returned, max_age_seconds=self.max_age_seconds
                        )
                        returned = []
                except StoreError as exc:
                    if not store.connection_lost(exc, conn):
                        raise _Refused(exc) from exc
                    self._drop()
                    raise
            except _Refused as refused:
                raise refused.error from None
            except StoreError as exc:
                self.postgres.failed(exc, waiting=f"results of {len(batch)} rows held")
                delay = _RETRY_DELAYS[min(tries, len(_RETRY_DELAYS) - 1)]
                tries += 1
                time.sleep(delay)
        self.postgres.ok()
        lost = [i.record.id for i in batch if isinstance(i.record, store.AttemptRecord)]
        lost = [row_id for row_id in lost if row_id not in kept]
        if lost:
            log.warning("rows %s were swept back while being sent", sorted(lost)[:20])
        for item in batch:
            if isinstance(item.record, store.AttemptRecord):
                status = item.record.status if item.record.id in kept else None
            else:
                status = statuses.get(item.record.id)
            self._finish(item, status)


def _entry(item: Pending) -> bytes:
    if item.entry is None:
        assert isinstance(item.record, store.AttemptRecord)
        item.entry = store.result_entry(item.worker, item.record)
    return item.entry


def _suppresses(item: Pending) -> bool:
    return isinstance(item.record, store.AttemptRecord) and item.record.suppress


class _Refused(Exception):
    """A statement Postgres rejected for its content: not worth trying again as it is."""

    def __init__(self, error: StoreError) -> None:
        super().__init__(str(error))
        self.error = error
