"""Scenario 4: Postgres restarted under load.

A private cluster (never the machine's shared one) is restarted twice while
the relay and workers run: a fast restart (every connection terminated), then
a crash (immediate stop) with a few seconds of downtime and crash recovery.
The relay and the workers must reconnect on their own: none of them is
restarted, and every one is still running at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import time
from collections.abc import Callable, Iterator

import psutil
import psycopg
import pytest

from outbox.config import Settings
from outbox.db.store import migration_runner
from outbox.testing.sink import Behaviour, SmtpSink
from tests.acceptance.checks import add_emails, assert_no_loss, report, wait_final, wait_until
from tests.acceptance.conftest import Rig, child_env, scaled, timeout
from tests.acceptance.servers import PostgresServer

DOWNTIME = 3.0


@pytest.fixture
def private_postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        server.start()
        with psycopg.connect(server.url) as conn:
            migration_runner.migrate(conn)
        yield server
    finally:
        server.destroy()


def _resumed(sink: SmtpSink, since: int, more: int = 50) -> Callable[[], bool]:
    return lambda: len(sink.messages) >= since + more


def test_postgres_restart_under_load_relay_and_workers_reconnect(
    broker_settings: Settings, rig: Rig, private_postgres: PostgresServer
) -> None:
    # Above the downtime plus the workers' in-process retries of their final write.
    settings = dataclasses.replace(
        broker_settings, database_url=private_postgres.url, stuck_seconds=10.0
    )
    total = scaled(1500) + scaled(150)
    add_emails(settings, scaled(1500), prefix="nl")
    add_emails(settings, scaled(150), prefix="hi", priority="high")
    sink = rig.sink(lambda _a: Behaviour(delay=0.002))
    p = rig.pipeline(child_env(settings, sink.url), high=(1, 4), bulk=(1, 8))
    processes = dict(p.procs)

    wait_until(lambda: len(sink.messages) >= 300, timeout(30), "sending under way")
    before = len(sink.messages)
    started = time.monotonic()
    private_postgres.restart("fast")
    back = time.monotonic()
    fast_restart_s = back - started
    fast_resume = wait_until(_resumed(sink, len(sink.messages)), timeout(60), "resumed")
    sent_between = len(sink.messages) - before

    wait_until(lambda: len(sink.messages) >= before + 600, timeout(30), "sending again")
    private_postgres.stop("immediate")
    time.sleep(DOWNTIME)
    private_postgres.start()  # crash recovery
    back = time.monotonic()
    crash_resume = wait_until(_resumed(sink, len(sink.messages)), timeout(60), "resumed")

    drained = wait_final(settings, total, timeout=timeout(90))
    figures = assert_no_loss(settings, sink)
    exited = {name: proc.poll() for name, proc in processes.items() if proc.poll() is not None}
    assert not exited, f"processes exited instead of reconnecting: {exited}"
    report(
        "4 Postgres restart under load",
        figures=figures,
        fast_restart_took_s=fast_restart_s,
        sends_resumed_after_fast_restart_s=fast_resume,
        sent_between_restarts=sent_between,
        crash_downtime_s=DOWNTIME,
        sends_resumed_after_crash_recovery_s=crash_resume,
        drain_after_crash_s=time.monotonic() - back,
        drain_s=drained,
        processes_restarted=0,
    )


OUTAGE = 12.0  # longer than every timeout below: pool wait, stuck threshold, heartbeats


def _pids(processes: dict[str, subprocess.Popen[bytes]]) -> set[int]:
    """Every process of the pipeline: the relay, and each Dramatiq master and its children."""
    found: set[int] = set()
    for proc in processes.values():
        found.add(proc.pid)
        with contextlib.suppress(psutil.NoSuchProcess):
            found |= {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
    return found


def _lines(rig: Rig) -> dict[str, int]:
    return {
        log.name: len(log.read_text(errors="replace").splitlines())
        for log in rig.log_dir.glob("*.log")
    }


def test_postgres_stopped_longer_than_every_timeout_the_same_processes_drain(
    broker_settings: Settings, rig: Rig, private_postgres: PostgresServer
) -> None:
    settings = dataclasses.replace(
        broker_settings, database_url=private_postgres.url, pool_timeout=1.0, stuck_seconds=3.0
    )
    bulk, high = scaled(1500), scaled(100)
    add_emails(settings, bulk, prefix="nl")
    add_emails(settings, high, prefix="hi", priority="high")
    sink = rig.sink(lambda _a: Behaviour(delay=0.002))
    p = rig.pipeline(child_env(settings, sink.url), high=(1, 4), bulk=(1, 8))
    wait_until(lambda: len(sink.messages) >= 300, timeout(30), "sending under way")
    before = _pids(p.procs)
    lines_before = _lines(rig)
    private_postgres.stop("fast")
    stopped = time.monotonic()
    time.sleep(OUTAGE)
    lines_during = {k: v - lines_before.get(k, 0) for k, v in _lines(rig).items()}
    private_postgres.start()
    back = time.monotonic()
    drained = wait_final(settings, bulk + high, timeout=timeout(60))
    after = _pids(p.procs)
    figures = assert_no_loss(settings, sink)
    logs = {log.name: log.read_text(errors="replace") for log in rig.log_dir.glob("*.log")}
    processes = 1 + 2 * 2  # the relay; a master and one worker process per pool
    lines_per_s = max(lines_during.values()) / (back - stopped)
    report(
        "4b Postgres stopped longer than every timeout",
        figures=figures,
        outage_s=back - stopped,
        drain_after_recovery_s=time.monotonic() - back,
        drain_s=drained,
        log_lines_during_outage=lines_during,
        log_lines_per_s_per_log_max=lines_per_s,
        processes=processes,
        processes_restarted=len(before - after),
    )
    assert figures.statuses == {"sent": bulk + high}, "every email sent, none dead"
    assert before == after, f"processes replaced: {before ^ after}"
    assert lines_per_s <= 1, lines_during
    assert logs["relay0.log"].count("Postgres is down") == 1
    assert logs["relay0.log"].count("Postgres is back") == 1
