"""The ``outbox metrics`` process: a Prometheus endpoint over the outbox tables.

Every scrape runs in one read-only REPEATABLE READ transaction, so the new
rows, status changes and attempts it reads are one consistent picture, and
folds them into a :class:`~outbox.telemetry.metrics.Tally` only when every query
succeeded. The queries and what they cost are in the README.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from outbox.config import Settings
from outbox.db.store import connections, domain_checks, metrics_reads
from outbox.errors import StoreError
from outbox.telemetry import liveness
from outbox.telemetry.metrics import (
    LATENCY_BUCKETS,
    PRIORITIES,
    SEND_BUCKETS,
    Current,
    Cursor,
    Scrape,
    StreamRead,
    Tally,
    families,
)

log = logging.getLogger(__name__)

Conn = connections.Conn

# At start, ids this far below the top that are not visible yet are followed as
# gaps: transactions still open while the exporter counted.
SEED_GAP_WINDOW = 10_000
# The id sequences followed: new rows, status changes, attempts.
_STREAMS = ("rows", "events", "attempts")


class OutboxCollector(Collector):
    """Reads the database on every collect (every scrape); one scrape at a time."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.tally: Tally | None = None
        self._conn: Conn | None = None
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            started = time.perf_counter()
            current: Current | None = None
            try:
                current = self.scrape()
            except StoreError as exc:
                log.warning("metrics scrape failed: %s", exc)
                self.close()
            elapsed = time.perf_counter() - started
            metrics = families(self.tally, current) if self.tally else []
        yield from metrics
        yield GaugeMetricFamily(
            "outbox_exporter_up",
            "1 when this scrape read the database, else 0.",
            value=1 if current else 0,
        )
        yield GaugeMetricFamily(
            "outbox_exporter_scrape_duration_seconds",
            "Time this scrape spent reading the database.",
            value=elapsed,
        )

    def scrape(self) -> Current:
        conn = self._connection()
        try:
            tops = _tops(conn)
            tally = self.tally
            if tally is None or _restarted(tally, tops):
                started = time.perf_counter()
                tally = _seed(conn, tops)
                log.info("counted the outbox in %.2fs", time.perf_counter() - started)
            read = _read(conn, tally, tops)
        finally:
            connections.rollback(conn)  # read-only: ends the snapshot
        tally.apply(read)
        self.tally = tally
        return read.current

    def _connection(self) -> Conn:
        if self._conn is None or self._conn.closed:
            self._conn = metrics_reads.connect_snapshot(self.database_url)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass(frozen=True)
class Tops:
    ids: tuple[int, int, int]  # highest visible id of the rows, events and attempts
    now: float  # database clock


def _tops(conn: Conn) -> Tops:
    rows, events, attempts, now = metrics_reads.metrics_tops(conn)
    return Tops((rows, events, attempts), now)


def _restarted(tally: Tally, tops: Tops) -> bool:
    """A sequence below what was read: the tables were truncated (tests) or restored."""
    cursors = (tally.rows, tally.events, tally.attempts)
    return any(top < cursor.after for top, cursor in zip(tops.ids, cursors, strict=True))


def _seed(conn: Conn, tops: Tops) -> Tally:
    """Count the table once; the cursors start at the tops of this snapshot."""
    now = tops.now
    cursors = []
    for stream, top in zip(_STREAMS, tops.ids, strict=True):
        cursor = Cursor(top)
        low = max(top - SEED_GAP_WINDOW, 0) + 1
        cursor.advance(top, metrics_reads.metrics_missing(conn, stream, low=low, high=top), [], now)
        cursors.append(cursor)
    counts, sent_minutes, last_publish = metrics_reads.metrics_seed(conn)
    return Tally.seeded(counts, sent_minutes, last_publish, (cursors[0], cursors[1], cursors[2]))


def _read(conn: Conn, tally: Tally, tops: Tops) -> Scrape:
    """Everything new since the last scrape, and the values read whole."""
    cursors = {"rows": tally.rows, "events": tally.events, "attempts": tally.attempts}
    bounds: dict[str, Any] = {}
    for name, top in zip(_STREAMS, tops.ids, strict=True):
        bounds[f"{name}_low"], bounds[f"{name}_high"] = cursors[name].after + 1, top
    visible = metrics_reads.metrics_visible(conn, bounds)
    ranges: dict[str, dict[str, Any]] = {}
    gaps: dict[str, tuple[list[int], list[int]]] = {}
    for name, top, seen in zip(_STREAMS, tops.ids, visible, strict=True):
        cursor = cursors[name]
        missing = (
            metrics_reads.metrics_missing(conn, name, low=cursor.after + 1, high=top)
            if seen < top - cursor.after
            else []
        )
        found = metrics_reads.metrics_found(conn, name, list(cursor.gaps)) if cursor.gaps else []
        ranges[name] = {"after": cursor.after, "upto": max(top, cursor.after), "found": found}
        gaps[name] = (missing, found)

    def stream(name: str, **extra: Any) -> StreamRead:
        args = {**ranges[name], **extra}
        rows = metrics_reads.metrics_new(conn, name, args)
        return StreamRead(args["upto"], gaps[name][0], gaps[name][1], rows)

    return Scrape(
        rows=stream("rows"),
        events=stream("events", bounds=list(LATENCY_BUCKETS)),
        attempts=stream("attempts", bounds=list(SEND_BUCKETS)),
        current=_current(conn, tops.now),
    )


def _current(conn: Conn, now: float) -> Current:
    read = metrics_reads.metrics_current(conn, list(PRIORITIES))
    in_flight = {(status, priority): int(n) for priority, status, n in read.in_flight}
    heads, bounces, reports, suppressed = read.heads, read.bounces, read.reports, read.suppressed
    return Current(
        now=now,
        in_flight=in_flight,
        oldest_unsent={priority: float(age) for priority, age, _ in heads},
        oldest_due={priority: float(due) for priority, _, due in heads},
        bounces_24h={str(klass): int(n) for klass, n in bounces},
        bounce_reports_24h={(str(src), str(outcome)): int(n) for src, outcome, n in reports},
        suppressed_addresses=suppressed,
        transports_down={str(name): float(seconds) for name, seconds in read.breakers},
        domain_checks={
            (c.finding.domain, c.finding.check): int(c.finding.state)
            for c in domain_checks.last_domain_checks(conn)
        },
    )


def metrics_registry(
    database_url: str, extra: Sequence[Collector] = ()
) -> tuple[CollectorRegistry, OutboxCollector]:
    """The exporter's figures, counted once already; ``extra`` collectors add theirs.

    Served by ``outbox metrics``, or by ``outbox web`` at /metrics (OUTBOX_METRICS_AUTH).
    """
    registry = CollectorRegistry()
    for added in extra:
        registry.register(added)
    collector = OutboxCollector(database_url)
    try:
        collector.scrape()  # the one full count, before Prometheus starts asking
    except StoreError as exc:
        log.warning("cannot read the outbox yet (%s); every scrape tries again", exc)
        collector.close()
    registry.register(collector)
    return registry, collector


def serve(
    database_url: str,
    *,
    host: str,
    port: int,
    stop: threading.Event,
    extra: Sequence[Collector] = (),
    liveness_of: Settings | None = None,
) -> None:
    """Serve /metrics until ``stop`` is set; ``extra`` collectors add their figures;
    with ``liveness_of``, keep the process's liveness file (``metrics``)."""
    registry, collector = metrics_registry(database_url, extra)
    server, thread = start_http_server(port, addr=host, registry=registry)
    log.info("metrics on http://%s:%d/metrics", host, server.server_port)
    reporter = (
        liveness.Reporter(
            liveness_of,
            "metrics",
            lambda: liveness.thread_alive(thread, "its HTTP server"),
            stale_after=liveness.STALE_AFTER,
        ).start()
        if liveness_of is not None
        else None
    )
    try:
        stop.wait()
    finally:
        if reporter is not None:
            reporter.stop()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        collector.close()
