"""OUTBOX_RETENTION_DAYS, applied by the relay once a day.

A thread of its own, on a connection of its own: a purge of a large backlog
takes minutes and must not hold up a single claim. A Postgres advisory lock
lets one relay purge at a time; the others find it taken and skip the day's run.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading

from outbox.config import Settings
from outbox.db.store import connections, data_retention
from outbox.errors import OutboxError

log = logging.getLogger(__name__)

DAY = 24 * 3600.0
_FIRST_RUN = 60.0  # after start, once the relay is busy with what is due
_RETRY = 600.0  # after a failed run (Postgres away)


class Retention(threading.Thread):
    def __init__(
        self,
        settings: Settings,
        stop: threading.Event,
        *,
        interval: float = DAY,
        first_run: float = _FIRST_RUN,
    ) -> None:
        super().__init__(name="outbox-retention", daemon=True)
        self.settings = settings
        self.stop = stop
        self.interval = interval
        self.first_run = first_run

    def run(self) -> None:
        wait = self.first_run
        while not self.stop.wait(wait):
            wait = self.interval
            try:
                self.run_once()
            except OutboxError as exc:
                log.warning("retention: purge failed (%s); again in %.0fs", exc, _RETRY)
                wait = min(self.interval, _RETRY)

    def run_once(self) -> data_retention.Purged | None:
        """Purge now; None when another relay holds the retention lock."""
        before = dt.datetime.now(dt.UTC) - dt.timedelta(days=self.settings.retention_days)
        with (
            connections.connect(self.settings.database_url) as conn,
            data_retention.retention_lock(conn) as taken,
        ):
            if not taken:
                log.info("retention: another relay is purging; skipped")
                return None
            purged = data_retention.purge(conn, before=before)
        log.info(
            "retention: purged %d emails (%d attempts, %d events, %d bounce reports)"
            " last changed before %s",
            purged.emails,
            purged.attempts,
            purged.events,
            purged.bounces,
            before.isoformat(timespec="seconds"),
        )
        return purged
