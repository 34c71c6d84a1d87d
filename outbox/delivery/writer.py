"""Results recorded as soon as they are known, several threads' in one statement.

A worker thread hands each result over the moment its reply arrives; one
writer thread per process collects what arrives within ``flush_seconds`` and
writes it in one statement (:func:`outbox.db.store.record_results_each`), and
hands back rows without an attempt (:func:`outbox.db.store.return_unattempted`)
the same way. A worker killed with SIGKILL then resends only the messages
whose reply had arrived and was not yet written: at most about one per
thread, instead of a whole batch per thread.

While Postgres is away the writer keeps the results and tries again (the rows
stay ``sending``, held by this live process, and are not swept); it says so
once, and once when it could write again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from outbox.db import store
from outbox.errors import StoreError
from outbox.telemetry.outages import DownOnce

log = logging.getLogger(__name__)

_RETRY_DELAYS = (0.1, 0.2, 0.5, 1.0)  # then every second until Postgres answers


@dataclass(frozen=True, slots=True)
class _Item:
    worker: str
    result: store.AttemptRecord | store.Unattempted
    done: Future[str | None]  # the row's new status; None: the row was no longer ours


class ResultWriter:
    def __init__(
        self,
        pool: store.Pool,
        *,
        flush_seconds: float,
        max_age_seconds: float,
    ) -> None:
        self.pool = pool
        self.flush_seconds = flush_seconds
        self.max_age_seconds = max_age_seconds
        self._items: list[_Item] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.postgres = DownOnce(log, "Postgres (recording results)")

    def submit(
        self, worker: str, result: store.AttemptRecord | store.Unattempted
    ) -> Future[str | None]:
        item = _Item(worker, result, Future())
        with self._cond:
            self._items.append(item)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="outbox-result-writer", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return item.done

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items:
                    self._cond.wait()
            if self.flush_seconds:
                time.sleep(self.flush_seconds)  # let the other threads' results join
            with self._cond:
                batch, self._items = self._items, []
            self._write(batch)

    def _write(self, batch: Sequence[_Item]) -> None:
        records = [(i.worker, i.result) for i in batch if isinstance(i.result, store.AttemptRecord)]
        returned = [i.result for i in batch if isinstance(i.result, store.Unattempted)]
        tries = 0
        while True:
            try:
                with self.pool.connection() as conn:
                    kept = store.record_results_each(conn, records) if records else set()
                    statuses = (
                        store.return_unattempted(
                            conn, returned, max_age_seconds=self.max_age_seconds
                        )
                        if returned
                        else {}
                    )
                break
            except StoreError as exc:  # the pool's timeout too
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
