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
from concurrent.futures import Future
from dataclasses import dataclass

from outbox.db import store
from outbox.errors import StoreError
from outbox.telemetry.outages import DownOnce

log = logging.getLogger(__name__)

_RETRY_DELAYS = (0.1, 0.2, 0.5, 1.0)  # then every second until Postgres answers
# A group of journaled results waits this long for others to join it, at most.
GATHER_SECONDS = 0.02
GROUP_SIZE = 64


@dataclass(frozen=True, slots=True)
class _Item:
    worker: str
    result: store.AttemptRecord | store.Unattempted
    done: Future[str | None]  # the row's new status; None: the row was no longer ours


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
        self._items: list[_Item] = []
        self._waiting = 0  # threads blocked in wait(): their group goes at once
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.postgres = DownOnce(log, "Postgres (recording results)")

    def submit(
        self, worker: str, result: store.AttemptRecord | store.Unattempted
    ) -> Future[str | None]:
        """Hand a result over; the writer thread writes it at once, or with the next write."""
        item = _Item(worker, result, Future())
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
        return item.done

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

    def wait(self, done: Future[str | None]) -> str | None:
        """The row's new status once its result is written (None: no longer ours)."""
        if done.done():
            return done.result()
        with self._cond:
            self._waiting += 1
            self._cond.notify_all()
        try:
            return done.result()
        finally:
            with self._cond:
                self._waiting -= 1

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items:
                    self._cond.wait()
                deadline = time.monotonic() + self.gather_seconds
                while not self._waiting and len(self._items) < self.group_size:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                batch, self._items = self._items, []
            self._write_all(batch)

    def _write_all(self, batch: Sequence[_Item]) -> None:
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

    def _write_plain(self, item: _Item, exc: StoreError) -> None:
        """A result Postgres refused even alone: its state, without the reply's text."""
        log.error(
            "result of email %s refused by Postgres (%s); recorded without its reply",
            item.result.id,
            type(exc.__cause__ or exc).__name__,
        )
        result = item.result
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
        try:
            self._write([_Item(item.worker, plain, item.done)])
        except StoreError as again:
            item.done.set_exception(again)  # the row stays held; its batch fails loudly

    def _write(self, batch: Sequence[_Item]) -> None:
        """One write, tried again while the connection (not the statement) fails."""
        records = [(i.worker, i.result) for i in batch if isinstance(i.result, store.AttemptRecord)]
        returned = [i.result for i in batch if isinstance(i.result, store.Unattempted)]
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
                        kept = store.record_results(conn, records)
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
        lost = [i.result.id for i in batch if isinstance(i.result, store.AttemptRecord)]
        lost = [row_id for row_id in lost if row_id not in kept]
        if lost:
            log.warning("rows %s were swept back while being sent", sorted(lost)[:20])
        for item in batch:
            if isinstance(item.result, store.AttemptRecord):
                status = item.result.status if item.result.id in kept else None
            else:
                status = statuses.get(item.result.id)
            item.done.set_result(status)


class _Refused(Exception):
    """A statement Postgres rejected for its content: not worth trying again as it is."""

    def __init__(self, error: StoreError) -> None:
        super().__init__(str(error))
        self.error = error
