"""Results recorded in Postgres in groups, several threads' in one statement.

A worker thread hands each result over the moment its reply arrives
(:meth:`ResultWriter.submit`); it has already journaled it in Redis
(:mod:`outbox.delivery.journal`), which is what a kill -9 is recovered from,
so it goes on to its next message at once. Results reach Postgres when a
thread waits for one of its own (:meth:`ResultWriter.wait`): at the end of
its batch, or before its next end-of-data dot when its result could not be
journaled. The waiting thread writes everything handed over by then, its
own results and the other threads', in one statement
(:func:`outbox.db.store.record_entries`, and
:func:`outbox.db.store.return_unattempted` for rows handed back). A thread
whose results are in a write under way waits for that write; one whose
results are still held writes them at once on a connection of its own (up to
three, opened as they are needed), so a batch's end does not queue behind
another's commit. There is no writer thread: in a process whose threads contend for
the interpreter lock, one more thread waking per group cost more than the
statements it saved, and a batch's end is where its results are needed.

While Postgres is away the waiting thread keeps the results and tries again
(the rows stay ``sending``, held by this live process, and are not swept); it
says so once, and once when it could write again. A statement that fails for
its own content, not for the connection, is split so one bad result cannot
hold up the others, and a result Postgres refuses even alone is recorded
without its reply.
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
# Writes at once, each on a connection of its own: a write waits for its commit
# to reach the disk (several ms), and on one connection each batch's end
# queued behind the others'; Postgres flushes concurrent commits together.
_CONNECTIONS = 3


class Pending:
    """A result on its way to Postgres; :meth:`ResultWriter.wait` gives the row's
    new status once it is written (None: the row was no longer ours).

    Not a ``concurrent.futures.Future``: one of those is a condition and a
    lock per message, made and thrown away on the sending thread; waiting is
    rare (a batch's end, a result the journal could not take), so waiters
    share the writer's condition instead.
    """

    __slots__ = ("entry", "error", "finished", "record", "status", "taken", "worker")

    def __init__(self, worker: str, result: store.AttemptRecord | store.Unattempted) -> None:
        self.worker = worker
        self.record = result
        # An attempt as record_results reads it (store.result_entry): set by the
        # journal when it sends the result, or here when written first; made once.
        self.entry: bytes | None = None
        self.taken = False  # in a write under way (or written)
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
        connections: int = _CONNECTIONS,
    ) -> None:
        self._connect = connect  # autocommit connections of the writer's own
        self.max_age_seconds = max_age_seconds
        self._max_lines = connections
        self._lines: list[_Line] = []  # every connection opened, to close them at the end
        self._idle: list[_Line] = []
        self._items: list[Pending] = []
        self._writing = 0  # writes under way, one per connection in use
        self._lock = threading.Lock()
        self._finished = threading.Condition(self._lock)  # a group was written
        self.postgres = DownOnce(log, "Postgres (recording results)")

    def submit(self, worker: str, result: store.AttemptRecord | store.Unattempted) -> Pending:
        """Hand a result over; it is written by the next thread that waits for a result."""
        item = Pending(worker, result)
        with self._lock:
            self._items.append(item)
        return item

    def held(self) -> int:
        """Results handed over and not yet written."""
        with self._lock:
            return len(self._items)

    def _drop(self) -> None:
        with self._lock:
            lines, self._lines, self._idle = self._lines, [], []
        for line in lines:
            line.drop()

    def close(self) -> None:
        self._drop()

    def wait(self, done: Pending) -> str | None:
        """The row's new status once its result is written (None: no longer ours);
        written by this thread, with everything else handed over, unless another
        thread's write carries it."""
        while not done.finished:
            self._write_held(None, done)
        return done.result()

    def stop(self, timeout: float) -> bool:
        """At a clean stop: write what is held and close the connections. False if
        Postgres did not take it all within ``timeout``: the results stay held for
        a later wait or stop (and are journaled: the sweeper records them from the
        journal if the process ends first)."""
        deadline = time.monotonic() + timeout
        try:
            while self._write_held(deadline):
                pass
        except _OutOfTime:
            log.warning("stopping with the results of %d rows not yet in Postgres", self.held())
            return False
        self._drop()
        return True

    def _write_held(self, deadline: float | None, done: Pending | None = None) -> bool:
        """Write what is held on a free connection, or wait for a write under way
        (until ``deadline``): the one carrying ``done``, or any when every
        connection is busy. False if there was nothing to write or wait for."""
        with self._lock:
            if done is not None and done.finished:
                return True
            in_flight = done is not None and done.taken
            if self._items and not in_flight and (self._idle or len(self._lines) < self._max_lines):
                batch, self._items = self._items, []
                for item in batch:
                    item.taken = True
                line = self._idle.pop() if self._idle else self._new_line()
                self._writing += 1
            elif self._writing:
                left = None if deadline is None else deadline - time.monotonic()
                if (left is not None and left <= 0) or not self._finished.wait(left):
                    raise _OutOfTime
                return True
            elif done is not None:
                raise RuntimeError("waited for a result this writer was not handed")
            else:
                return False
        try:
            self._write_all(batch, deadline, line)
        except _OutOfTime:
            with self._lock:  # not written in time: held again, in order, for the next try
                again = [item for item in batch if not item.finished]
                for item in again:
                    item.taken = False
                self._items[:0] = again
            raise
        except Exception as exc:  # a defect: the batches waiting fail loudly, not hang
            log.exception("recording the results of %d rows failed", len(batch))
            error = StoreError(f"recording results failed: {exc!r}")
            for item in batch:
                if not item.finished:
                    self._finish(item, None, error)
        finally:
            with self._lock:
                self._writing -= 1
                if line in self._lines:  # not closed meanwhile
                    self._idle.append(line)
                self._finished.notify_all()
        return True

    def _new_line(self) -> _Line:
        line = _Line(self._connect)
        self._lines.append(line)
        return line

    def _finish(self, item: Pending, status: str | None, error: StoreError | None = None) -> None:
        item.status, item.error = status, error
        item.finished = True  # waiters look under the lock, woken after each write

    def _write_all(self, batch: Sequence[Pending], deadline: float | None, line: _Line) -> None:
        # A part _write finished before the other part was refused is not written twice.
        batch = [item for item in batch if not item.finished]
        if not batch:
            return
        try:
            self._write(batch, deadline, line)
        except StoreError as exc:
            if len(batch) > 1:
                # This statement's own fault: one result in it, most likely; the
                # others are written without it, each half on its own.
                half = len(batch) // 2
                self._write_all(batch[:half], deadline, line)
                self._write_all(batch[half:], deadline, line)
                return
            self._write_plain(batch[0], exc, deadline, line)

    def _write_plain(
        self, item: Pending, exc: StoreError, deadline: float | None, line: _Line
    ) -> None:
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
            self._write([stand_in], deadline, line)
            self._finish(item, stand_in.status)
        except StoreError as again:
            self._finish(item, None, again)  # the row stays held; its batch fails loudly

    def _write(self, batch: Sequence[Pending], deadline: float | None, line: _Line) -> None:
        """One write, tried again while the connection (not the statement) fails;
        each part's results are finished as soon as that part is written."""
        records = [(i, i.record) for i in batch if isinstance(i.record, store.AttemptRecord)]
        returned = [(i, i.record) for i in batch if isinstance(i.record, store.Unattempted)]
        tries = 0
        while records or returned:
            try:
                conn = line.connection()
                try:
                    # Autocommit: each statement is one round trip; what one wrote
                    # is not written again when the next one's connection fails.
                    if records:
                        kept = store.record_entries(
                            conn,
                            [_entry(i, r) for i, r in records],
                            [r.id for _, r in records],
                            refused=any(r.suppress for _, r in records),
                        )
                        self._recorded(records, kept)
                        records = []
                    if returned:
                        statuses = store.return_unattempted(
                            conn, [r for _, r in returned], max_age_seconds=self.max_age_seconds
                        )
                        for item, r in returned:
                            self._finish(item, statuses.get(r.id))
                        returned = []
                except StoreError as exc:
                    if not store.connection_lost(exc, conn):
                        raise _Refused(exc) from exc
                    line.drop()
                    raise
            except _Refused as refused:
                raise refused.error from None
            except StoreError as exc:
                self.postgres.failed(exc, waiting=f"results of {len(batch)} rows held")
                delay = _RETRY_DELAYS[min(tries, len(_RETRY_DELAYS) - 1)]
                tries += 1
                if deadline is not None and time.monotonic() + delay > deadline:
                    raise _OutOfTime from None
                time.sleep(delay)
        self.postgres.ok()

    def _recorded(
        self, records: Sequence[tuple[Pending, store.AttemptRecord]], kept: set[int]
    ) -> None:
        lost = sorted(r.id for _, r in records if r.id not in kept)
        if lost:
            log.warning("rows %s were swept back while being sent", lost[:20])
        for item, r in records:
            self._finish(item, r.status if r.id in kept else None)


def _entry(item: Pending, record: store.AttemptRecord) -> bytes:
    if item.entry is None:
        item.entry = store.result_entry(item.worker, record)
    return item.entry


class _Line:
    """One of the writer's autocommit connections, opened on first use and again
    after it was lost."""

    __slots__ = ("_conn", "_connect")

    def __init__(self, connect: Callable[[], store.Conn]) -> None:
        self._connect = connect
        self._conn: store.Conn | None = None

    def connection(self) -> store.Conn:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        return self._conn

    def drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


class _OutOfTime(Exception):
    """A stop's time ran out before Postgres took the results."""


class _Refused(Exception):
    """A statement Postgres rejected for its content: not worth trying again as it is."""

    def __init__(self, error: StoreError) -> None:
        super().__init__(str(error))
        self.error = error
