"""``POST /v1/emails`` requests share commits: those that arrive during one commit go in the next.

Each request is answered only once its row is committed, and a commit waits
for Postgres to flush its WAL to disk: milliseconds, however small the row.
With one transaction per request the disk, not the CPU, sets the rate, and
every request queues behind the others' flushes. Here a few committer threads
(a quarter of ``OUTBOX_WEB_POOL_SIZE``, at least one) each take every request
waiting when they are free, enqueue them in one transaction on one pooled
connection, commit once and answer all of them. When requests are few, each
is taken at once and commits alone, as before; when they are many, they share
commits instead of queueing for them.

Each request's answer is what it would have been alone: its own created or
found row, its own conflict or refusal (neither touches the transaction: both
are decided before or without a write). A statement Postgres refuses loses the
whole transaction, so then the group is done again one request per
transaction and only that request fails. A commit that fails (the connection
lost) is handled the same way: each request is enqueued again on its own, and
one whose row had landed after all is found by its key (200, the same body);
a request whose own transaction fails too is answered "database unavailable"
(503), and a client that tries again with the same Idempotency-Key loses
nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from outbox.db.store import connections
from outbox.errors import IdempotencyConflict, InvalidMessage, StoreError
from outbox.intake import Enqueued

log = logging.getLogger(__name__)

# Enough to amortise a flush over many rows, few enough that one transaction
# stays short (its new keys are locked until it commits).
MAX_GROUP = 64

Enqueue = Callable[[connections.Conn, dict[str, Any]], Enqueued]


@dataclass(frozen=True, slots=True)
class _Job:
    arguments: dict[str, Any]
    done: Future[Enqueued]


class EnqueueGroups:
    def __init__(
        self,
        pool: connections.Pool,
        enqueue: Enqueue,
        *,
        committers: int,
        wait_seconds: float = 60.0,
    ) -> None:
        self.pool = pool
        self._enqueue = enqueue  # intake.enqueue with the server's settings
        # A request gives up (503) after this long: well past the pool's own wait
        # for a connection (30 s), after which a committer answers with an error.
        self.wait_seconds = wait_seconds
        self._waiting: list[_Job] = []
        self._cond = threading.Condition()
        self._closed = False
        self.group_sizes: list[int] = []  # of the last groups committed together (tests, logs)
        self._threads = [
            threading.Thread(target=self._run, name=f"outbox-api-commit-{i}", daemon=True)
            for i in range(max(1, committers))
        ]
        for thread in self._threads:
            thread.start()

    def enqueue(self, arguments: dict[str, Any]) -> Enqueued:
        """Enqueue one email in the next shared transaction; raises what enqueue raises."""
        job = _Job(arguments, Future())
        with self._cond:
            if self._closed:
                raise StoreError("the HTTP API is shutting down")
            self._waiting.append(job)
            self._cond.notify()
        try:
            return job.done.result(timeout=self.wait_seconds)
        except TimeoutError:
            raise StoreError(f"no commit within {self.wait_seconds:g}s") from None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if not self._waiting:
                    return  # closed, nothing left to answer
                group = self._waiting[:MAX_GROUP]
                del self._waiting[:MAX_GROUP]
            try:
                self._commit(group)
            except BaseException as exc:  # a request must never wait forever
                for job in group:
                    if not job.done.done():
                        job.done.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise

    def _commit(self, group: Sequence[_Job]) -> None:
        if len(group) > 1:
            try:
                outcomes = self._together(group)
            except StoreError as exc:
                # A refused statement (or a lost connection): each on its own,
                # so the one at fault fails alone.
                log.info("a shared commit of %d emails failed (%s): one by one", len(group), exc)
            else:
                with self._cond:  # committers finish at once: one list, kept short
                    self.group_sizes.append(len(group))
                    del self.group_sizes[:-100]
                for job, outcome in zip(group, outcomes, strict=True):
                    _settle(job, outcome)
                return
        for job in group:
            _settle(job, self._alone(job))

    def _together(self, group: Sequence[_Job]) -> list[Enqueued | Exception]:
        outcomes: list[Enqueued | Exception] = []
        with self.pool.connection() as conn:  # commits on leaving, rolls back on an error
            for job in group:
                try:
                    outcomes.append(self._enqueue(conn, job.arguments))
                except (IdempotencyConflict, InvalidMessage) as exc:
                    outcomes.append(exc)
                if connections.transaction_failed(conn):
                    # An error that left the transaction aborted: nothing of it may commit.
                    raise StoreError("a statement of the shared transaction failed")
        return outcomes

    def _alone(self, job: _Job) -> Enqueued | Exception:
        try:
            with self.pool.connection() as conn:
                return self._enqueue(conn, job.arguments)
        except (IdempotencyConflict, InvalidMessage, StoreError) as exc:
            return exc


def _settle(job: _Job, outcome: Enqueued | Exception) -> None:
    if isinstance(outcome, Exception):
        job.done.set_exception(outcome)
    else:
        job.done.set_result(outcome)
