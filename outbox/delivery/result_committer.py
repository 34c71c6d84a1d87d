"""Results committed to Postgres by one thread per worker process, in groups.

A sending thread hands each result over the moment it is known
(:meth:`ResultCommitter.submit`) and goes on with its next message; before
that message's end-of-data dot (or HTTP request) leaves, it waits for the
previous result's commit (:meth:`Committed.wait`). A real relay takes
milliseconds to answer the next message's MAIL, RCPT and DATA, and the commit
fits in that time, so the wait is usually over before it begins. A worker
killed with SIGKILL therefore resends at most the message each thread had in
flight, with its Message-ID; nothing about it depends on the broker.

The committer's thread takes everything handed over since its last commit and
writes it in one statement (:func:`outbox.db.results.record_results`, and
:func:`outbox.db.results.return_unattempted` for rows handed back untried), so
eight threads cost about one commit per round trip of the relay, not eight.

While Postgres is away the results wait here and the committer tries again
(the rows stay ``sending`` under this live process, so no sweep takes them);
it says so once, and once when it is back. A commit whose answer was lost is
resolved by reading back which rows are still held, never by assuming. A
group Postgres refuses for its content is written one result at a time, and
a result refused even alone is recorded without its reply.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence

from outbox.db.store import connections, results
from outbox.errors import StoreError
from outbox.telemetry.log_once import DownOnce

log = logging.getLogger(__name__)

Result = results.AttemptRecord | results.Unattempted

_RETRY_DELAYS = (0.1, 0.2, 0.5, 1.0)  # then every second until Postgres answers


class Committed:
    """A result on its way to Postgres; :meth:`wait` gives its row's new status
    once it is committed (None: the row was no longer this worker's)."""

    __slots__ = ("_done", "error", "result", "status", "worker")

    def __init__(self, worker: str, result: Result) -> None:
        self.worker = worker
        self.result = result
        self.status: str | None = None
        self.error: StoreError | None = None
        self._done = threading.Event()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> str | None:
        """The row's new status once committed; raises the error that kept it out,
        or ``TimeoutError`` if it is not committed within ``timeout``."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the result of email {self.result.id} is not committed yet")
        if self.error is not None:
            raise self.error
        return self.status

    def _finish(self, status: str | None, error: StoreError | None = None) -> None:
        self.status, self.error = status, error
        self._done.set()


class ResultCommitter:
    """The per-process group committer (its thread starts with the first result)."""

    def __init__(
        self,
        connect: Callable[[], connections.Conn],
        *,
        max_age_seconds: float,
        postgres: DownOnce | None = None,
    ) -> None:
        self._connect = connect  # an autocommit connection of the committer's own
        self._conn: connections.Conn | None = None
        self.max_age_seconds = max_age_seconds
        self._waiting: list[Committed] = []
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._deadline: float | None = None  # set by close(): give up retrying after it
        self._closing = False
        # Shared with the process's other users of Postgres: one line when it goes, one back.
        self.postgres = postgres or DownOnce(log, "Postgres")

    def submit(self, worker: str, result: Result) -> Committed:
        """Hand a result over; it is committed with whatever else is waiting."""
        item = Committed(worker, result)
        with self._changed:
            if self._closing:
                raise RuntimeError("the result committer is closed")
            self._waiting.append(item)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="outbox-result-committer", daemon=True
                )
                self._thread.start()
            self._changed.notify()
        return item

    def held(self) -> int:
        """Results handed over and not yet committed (or being committed)."""
        with self._changed:
            return len(self._waiting)

    def close(self, timeout: float) -> bool:
        """At a clean stop: commit what is held, for at most ``timeout``, and close
        the connection. False if Postgres did not take it all in time: those rows
        stay ``sending`` and are swept once this process has gone silent."""
        with self._changed:
            self._closing = True
            self._deadline = time.monotonic() + timeout
            thread = self._thread
            self._changed.notify()
        if thread is not None:
            thread.join(timeout + 1.0)
        left = self.held()
        if left:
            log.warning("stopping with the results of %d rows not yet in Postgres", left)
        self._drop()
        return left == 0 and (thread is None or not thread.is_alive())

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closing:
                    self._changed.wait()
                if not self._waiting:
                    return
                group = list(self._waiting)
            try:
                self._commit(group)
            except _OutOfTime:
                return  # close() gave up: what is left stays held, and is said
            except Exception as exc:  # a defect: the waiting threads fail loudly, not hang
                log.exception("recording the results of %d rows failed", len(group))
                error = StoreError(f"recording results failed: {exc!r}")
                for item in group:
                    if not item.done():
                        item._finish(None, error)
            with self._changed:
                del self._waiting[: len(group)]

    def _commit(self, group: Sequence[Committed]) -> None:
        """Write ``group``, trying again while the connection (not the statement) fails."""
        tries = 0
        uncertain = False  # a write may have committed without our hearing the answer
        began = self.postgres.clock()
        while True:
            todo = [item for item in group if not item.done()]
            if not todo:
                break
            began = self.postgres.clock()
            try:
                conn = self._connection()
                if uncertain:
                    todo = self._unrecorded(conn, todo)
                    uncertain = False
                self._write_all(conn, todo)
                break
            except StoreError as exc:
                self._drop()
                uncertain = True
                self.postgres.failed(
                    f"recording results: {exc}", waiting=f"results of {len(todo)} rows"
                )
                delay = _RETRY_DELAYS[min(tries, len(_RETRY_DELAYS) - 1)]
                tries += 1
                if self._deadline is not None and time.monotonic() + delay > self._deadline:
                    raise _OutOfTime from exc
                time.sleep(delay)
        self.postgres.ok(began=began)

    def _unrecorded(self, conn: connections.Conn, todo: list[Committed]) -> list[Committed]:
        """After a lost answer: the results whose rows are still held. The others
        were committed (or swept back); their attempts are not written twice."""
        held = results.still_held(conn, [(i.result.id, i.worker) for i in todo])
        for item in todo:
            if item.result.id not in held:
                item._finish(None)
        return [item for item in todo if not item.done()]

    def _write_all(self, conn: connections.Conn, todo: Sequence[Committed]) -> None:
        """One statement for the group; split to single results when Postgres
        refuses it for its content (the connection's failures propagate)."""
        try:
            self._write(conn, todo)
        except StoreError as exc:
            if connections.connection_lost(exc, conn):
                raise
            for item in todo:
                if item.done():
                    continue  # its part of the group was written before the refusal
                try:
                    self._write(conn, [item])
                except StoreError as alone:
                    if connections.connection_lost(alone, conn):
                        raise
                    self._write_plain(conn, item, alone)

    def _write(self, conn: connections.Conn, items: Sequence[Committed]) -> None:
        attempts = [(i, i.result) for i in items if isinstance(i.result, results.AttemptRecord)]
        untried = [(i, i.result) for i in items if isinstance(i.result, results.Unattempted)]
        if attempts:
            kept = results.record_results(conn, [(i.worker, r) for i, r in attempts])
            lost = sorted(r.id for _, r in attempts if r.id not in kept)
            if lost:
                log.warning("rows %s were swept back while being sent", lost[:20])
            for item, r in attempts:
                item._finish(r.status if r.id in kept else None)
        if untried:
            back = [u for _, u in untried]
            statuses = results.return_unattempted(conn, back, max_age_seconds=self.max_age_seconds)
            for item, u in untried:
                item._finish(statuses.get(u.id))

    def _write_plain(self, conn: connections.Conn, item: Committed, exc: StoreError) -> None:
        """A result Postgres refused even alone: its state, without the reply's text."""
        log.error(
            "result of email %s refused by Postgres (%s); recorded without its reply",
            item.result.id,
            type(exc.__cause__ or exc).__name__,
        )
        result = item.result
        plain: Result
        if isinstance(result, results.AttemptRecord):
            plain = dataclasses.replace(
                result,
                reason=f"{result.status}; reply not storable",
                reply_text=None,
                reply_code=None,
                enhanced_status=None,
                provider_message_id=None,
                recipients=None,
            )
        else:
            plain = dataclasses.replace(result, reason="handed back; reason not storable")
        stand_in = Committed(item.worker, plain)
        try:
            self._write(conn, [stand_in])
        except StoreError as again:
            if connections.connection_lost(again, conn):
                raise
            item._finish(None, again)  # the row stays held; its batch fails loudly
        else:
            item._finish(stand_in.status)

    def _connection(self) -> connections.Conn:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


class _OutOfTime(Exception):
    """close()'s time ran out before Postgres took the results."""
