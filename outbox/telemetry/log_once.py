"""Saying what is wrong once: one line when a part goes down, one when it is back,
and a summary per interval of what happened to emails meanwhile (not a line each).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from outbox.errors import first_line


class DownOnce:
    """The state of one part (a transport, the broker, Postgres) as this process sees it."""

    def __init__(
        self, log: logging.Logger, part: str, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.log = log
        self.part = part
        self.clock = clock
        self.down_since: float | None = None
        self.failures = 0
        self._lock = threading.Lock()

    @property
    def is_down(self) -> bool:
        return self.down_since is not None

    def failed(self, error: object, *, waiting: str = "") -> bool:
        """A failure; True (and one warning) only for the first of an outage."""
        with self._lock:
            self.failures += 1
            if self.down_since is not None:
                return False
            self.down_since = self.clock()
        suffix = f"; {waiting} waiting" if waiting else ""
        self.log.warning("%s is down: %s%s", self.part, first_line(error), suffix)
        return True

    def ok(self, *, began: float | None = None, waiting: str = "") -> bool:
        """A success; True (and one warning) only for the first after an outage.

        ``began`` (this clock's time when the work started): a success of work begun
        before the outage was noticed says nothing of now, and is not counted, or
        another thread's late answer would announce the part back just after it went.
        """
        with self._lock:
            if self.down_since is None:
                return False
            if began is not None and began < self.down_since:
                return False
            took, failures = self.clock() - self.down_since, self.failures
            self.down_since, self.failures = None, 0
        suffix = f"; {waiting} waiting" if waiting else ""
        self.log.warning(
            "%s is back after %.1fs (%d failures meanwhile)%s", self.part, took, failures, suffix
        )
        return True


class Summary:
    """Counts events by reason and logs them together, at most once per ``interval``."""

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        *,
        interval: float = 10.0,
        level: int = logging.WARNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.what = what
        self.interval = interval
        self.level = level
        self.clock = clock
        self._counts: Counter[str] = Counter()
        self._since = clock()
        self._lock = threading.Lock()

    def add(self, reason: str, n: int = 1) -> None:
        with self._lock:
            self._counts[reason] += n
        self.flush()

    def flush(self, *, force: bool = False) -> None:
        with self._lock:
            now = self.clock()
            if not self._counts or (not force and now - self._since < self.interval):
                return
            counts, self._counts = self._counts, Counter()
            took, self._since = now - self._since, now
        total = sum(counts.values())
        reasons = "; ".join(f"{n} {reason}" for reason, n in counts.most_common(3))
        more = f" (and {len(counts) - 3} other reasons)" if len(counts) > 3 else ""
        self.log.log(self.level, "%d %s in %.0fs: %s%s", total, self.what, took, reasons, more)


def quiet_pool_logs() -> None:
    """psycopg_pool warns at every failed reconnection (several a second per pool while
    Postgres is away); the process's own once-down, once-back lines say it instead."""
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


def quiet_broker_client_logs() -> None:
    """pika logs every connection it opens and closes (INFO) and every failed try of
    each node (ERROR); the process's own once-down, once-back lines say what matters."""
    logging.getLogger("pika").setLevel(logging.CRITICAL)
