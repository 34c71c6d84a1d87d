"""Scenario 4c: Postgres fails over to its standby under load.

Two private clusters on loopback: a primary and a streaming standby made with
``pg_basebackup``, the standby synchronous (``synchronous_standby_names``), so
a commit is acknowledged only once the standby has it. Every process is given
both hosts with ``target_session_attrs=read-write``, the form a Patroni or RDS
Multi-AZ deployment's clients use, and finds the primary by itself.

The order is the one a failover manager keeps: the old primary is stopped
first (Patroni demotes or fences it; here ``-m immediate``, a crash), then the
standby is promoted. Promoting first would leave two servers that take writes
for a moment, and the old one's commits, waiting for a synchronous standby
that no longer answers, would hang until it is stopped: split brain is what
the fencing is there to prevent. Between the two steps the processes find no
primary at all, as they would while the manager decides.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import subprocess
import time
from collections.abc import Iterator

import psutil
import psycopg
import pytest

from outbox.config import Settings
from outbox.db.store import migration_runner
from outbox.testing.sink import Behaviour
from tests.acceptance.checks import add_emails, assert_no_loss, report, wait_final, wait_until
from tests.acceptance.conftest import Rig, child_env, scaled, timeout
from tests.acceptance.servers import PostgresServer

pytestmark = pytest.mark.slow

STANDBY = "outbox_standby"
DETECTION = 2.0  # the failover manager's time to decide the primary is gone
RECOVERY_S = 60.0  # the backlog drained within this of the promotion
DOWN = re.compile(r"Postgres\b.* is down")
BACK = re.compile(r"Postgres\b.* is back")


@dataclasses.dataclass
class Pair:
    primary: PostgresServer
    standby: PostgresServer

    @property
    def url(self) -> str:
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"


def _sync_state(primary: PostgresServer) -> str | None:
    with psycopg.connect(primary.url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s", (STANDBY,)
        ).fetchone()
    return str(row[0]) if row else None


@pytest.fixture
def replicated_postgres() -> Iterator[Pair]:
    primary, standby = PostgresServer(), PostgresServer()
    try:
        primary.start()
        with psycopg.connect(primary.url) as conn:
            migration_runner.migrate(conn)
        standby.start_standby_of(primary, STANDBY)
        # Synchronous once the standby streams: set before, every commit would wait
        # for it. Set in the primary's own configuration, not the standby's copy:
        # once promoted the standby is alone, and would wait forever for a standby
        # of its own (Patroni's synchronous_mode lifts the requirement the same
        # way while no replica is left).
        with psycopg.connect(primary.url, autocommit=True) as conn:
            conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY}'")
            conn.execute("SELECT pg_reload_conf()")
        wait_until(lambda: _sync_state(primary) == "sync", 30, "the standby synchronous")
        yield Pair(primary, standby)
    finally:
        standby.destroy()
        primary.destroy()


def _pids(processes: dict[str, subprocess.Popen[bytes]]) -> set[int]:
    """Every process of the pipeline: the relay, each Dramatiq master and its children."""
    found: set[int] = set()
    for proc in processes.values():
        found.add(proc.pid)
        with contextlib.suppress(psutil.NoSuchProcess):
            found |= {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
    return found


def test_postgres_fails_over_to_its_standby_and_the_same_processes_drain(
    broker_settings: Settings, rig: Rig, replicated_postgres: Pair
) -> None:
    pair = replicated_postgres
    # Rows held by a worker that lost its answer go back after stuck_seconds;
    # above the failover's gap and the workers' retries of their final write.
    settings = dataclasses.replace(broker_settings, database_url=pair.url, stuck_seconds=10.0)
    bulk, high = scaled(2700), scaled(300)
    add_emails(settings, bulk, prefix="nl")
    add_emails(settings, high, prefix="hi", priority="high")
    sink = rig.sink(lambda _a: Behaviour(delay=0.002))
    p = rig.pipeline(child_env(settings, sink.url), high=(1, 4), bulk=(1, 8))
    processes = dict(p.procs)

    wait_until(lambda: len(sink.messages) >= 600, timeout(60), "sending under way")
    before = _pids(processes)
    sent_at_failover = len(sink.messages)
    pair.primary.stop("immediate")  # fenced: it takes no more writes
    time.sleep(DETECTION)
    pair.standby.promote()
    promoted = time.monotonic()
    resumed = wait_until(lambda: len(sink.messages) >= sent_at_failover + 100, RECOVERY_S)
    drained = wait_final(settings, bulk + high, timeout=timeout(RECOVERY_S))
    drain_s = time.monotonic() - promoted

    figures = assert_no_loss(settings, sink)
    after = _pids(processes)
    exited = {name: proc.poll() for name, proc in processes.items() if proc.poll() is not None}
    logs = {log.name: log.read_text(errors="replace") for log in rig.log_dir.glob("*.log")}
    down = {name: len(DOWN.findall(text)) for name, text in logs.items()}
    back = {name: len(BACK.findall(text)) for name, text in logs.items()}
    report(
        "4c Postgres failover to a synchronous standby",
        figures=figures,
        sent_before_failover=sent_at_failover,
        detection_s=DETECTION,
        sends_resumed_after_promotion_s=resumed,
        drain_after_promotion_s=drain_s,
        drain_wait_s=drained,
        postgres_down_lines=down,
        postgres_back_lines=back,
        processes_restarted=len(before - after),
    )
    assert figures.statuses == {"sent": bulk + high}, "every email sent, none dead"
    assert figures.duplicates <= figures.uncertain, "a duplicate only for a send in flight"
    assert drain_s <= RECOVERY_S, f"backlog drained {drain_s:.0f}s after the promotion"
    assert not exited, f"processes exited instead of following the primary: {exited}"
    assert before == after, f"processes replaced: {before ^ after}"
    # One line when Postgres goes, one when it is back, per process (a pool's log
    # holds one worker process). A process that had nothing to write in the gap
    # (the relay's pool waited through it; the high pool, idle) has nothing to
    # say; the bulk pool, busy, notices.
    assert all(n <= 1 for n in down.values()), down
    assert back == down, f"gone {down}, back {back}"
    assert down["email_bulk.log"] == 1, down
