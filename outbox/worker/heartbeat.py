"""A worker process's heartbeat, and its watch over its own database pool.

Every :meth:`Settings.heartbeat_seconds` the process writes its beat (on a
connection of its own, so a wedged pool cannot silence it wrongly) and then
borrows one connection from its pool. When Postgres answers the beat but the
pool has no connection to lend for ``OUTBOX_POOL_TIMEOUT`` several beats in a
row, the pool cannot recover by itself: the process exits non-zero (Dramatiq's
master then exits too) so that the platform restarts it, and its rows are
swept once its beats have stopped.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from outbox.config import Settings
from outbox.db.store import connections, processes, relaying
from outbox.errors import PoolExhausted, StoreError

log = logging.getLogger(__name__)

EXIT_POOL_WEDGED = 3
# A pool reconnecting after an outage lends nothing for a while too; a wedged one
# has every connection handed out and none coming back for this many pool waits.
WEDGED_POOL_WAITS = 10


def process_name() -> str:
    """The prefix of every ``locked_by`` this process writes (see deliver.worker_name)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def queues_of_argv(argv: list[str]) -> list[str]:
    """The queues a ``dramatiq … -Q a b`` command line names."""
    found: list[str] = []
    taking = False
    for arg in argv:
        if arg in ("-Q", "--queues"):
            taking = True
        elif arg.startswith("-"):
            taking = False
        elif taking:
            found.append(arg)
    return found


class Heartbeat:
    def __init__(
        self,
        settings: Settings,
        pool: connections.Pool,
        *,
        in_hand: Callable[[], Collection[int]] | None = None,
        exit_process: Callable[[int], None] = os._exit,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.in_hand = in_hand  # the rows the process's threads hold (None: not a sender)
        self.name = process_name()
        self.queues = queues_of_argv(sys.argv)
        self.exit_process = exit_process
        self.clock = clock
        self.wedged_since: float | None = None
        self.last_run = clock()  # the latest beat tried, answered or not: its liveness
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: connections.Conn | None = None

    def start(self) -> None:
        self.beat()  # before the first message: a row is never held by a process never seen
        self._thread = threading.Thread(target=self._run, name="outbox-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """A clean stop: no more beats, and the process leaves the list."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            connections.ping(self._connection())  # reconnect if needed
            processes.forget_process(self._connection(), self.name)
        except StoreError as exc:
            log.debug("could not leave the process list: %s", exc)
        self._close()

    def _run(self) -> None:
        while not self._stop.wait(self.settings.heartbeat_seconds()):
            self.last_run = self.clock()
            self.beat()

    def silence(self) -> str | None:
        """Why this heartbeat is not beating, or None: silent for OUTBOX_STUCK_SECONDS,
        the process is presumed dead by the sweeper too."""
        if self._thread is None or not self._thread.is_alive():
            return "its heartbeat is not running"
        late = self.clock() - self.last_run
        if late > self.settings.stuck_seconds:
            return f"its heartbeat last beat {late:.0f}s ago"
        return None

    def beat(self) -> bool:
        """One beat, the return of rows no thread holds, and one pool check; False
        when Postgres could not be reached."""
        try:
            processes.beat(self._connection(), self.name, "worker", self._detail())
            self._return_orphans()
        except StoreError as exc:
            log.debug("heartbeat not written: %s", exc)
            self._close()
            self.wedged_since = None  # Postgres is away: the pool is not to blame
            return False
        self._check_pool()
        return True

    def _return_orphans(self) -> None:
        """Rows locked under this process's name that none of its threads holds
        (a take or a hand-back whose answer was lost): the sweeper leaves a live
        process's rows alone, so the process returns them itself."""
        if self.in_hand is None:
            return
        settings = self.settings
        returned = relaying.sweep_orphans(
            self._connection(),
            self.name,
            self.in_hand(),
            stuck_seconds=settings.stuck_seconds,
            max_attempts=settings.max_attempts,
            hold=settings.on_uncertain == "hold",
        )
        if returned:
            log.warning(
                "returned %d rows locked by this process that none of its threads held",
                len(returned),
            )

    def _check_pool(self) -> None:
        wait = self.settings.pool_timeout
        try:
            with self.pool.connection(timeout=wait):
                pass
        except PoolExhausted:
            stats = self.pool.get_stats()
            all_out = stats.get("pool_size", 0) >= stats.get("pool_max", 0) > 0 and not stats.get(
                "pool_available", 0
            )
            if not all_out:
                self.wedged_since = None  # still connecting: a pool that is recovering
                return
            now = self.clock()
            if self.wedged_since is None:
                self.wedged_since = now
                log.warning(
                    "no database connection from the pool in %gs although Postgres answers,"
                    " every connection handed out; pool: %s",
                    wait,
                    stats,
                )
            if now - self.wedged_since >= WEDGED_POOL_WAITS * wait:
                log.critical(
                    "database pool exhausted for %.0fs and not recovering: exiting so that"
                    " the platform restarts this worker",
                    now - self.wedged_since,
                )
                logging.shutdown()
                self.exit_process(EXIT_POOL_WEDGED)
            return
        except StoreError:
            return  # Postgres went away between the beat and the check
        if self.wedged_since is not None:
            log.warning("the database pool lends connections again")
        self.wedged_since = None

    def _detail(self) -> dict[str, Any]:
        stats = self.pool.get_stats()
        return {
            "queues": self.queues,
            "pool": {
                k: stats.get(k, 0) for k in ("pool_size", "pool_available", "requests_waiting")
            },
        }

    def _connection(self) -> connections.Conn:
        if self._conn is None or self._conn.closed:
            timeout = max(1, int(self.settings.heartbeat_seconds()))
            self._conn = connections.connect(
                self.settings.database_url, autocommit=True, timeout=timeout
            )
        return self._conn

    def close(self) -> None:
        """Close the heartbeat's own connection."""
        self._close()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
