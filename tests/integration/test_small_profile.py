"""Procfile.small's `worker`: the relay and both pools in one process, sending."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from outbox import enqueue
from outbox.config import Settings
from outbox.testing.sink import SmtpSink
from tests.integration.helpers import LOGIN, add_newsletter, query, statuses, wait_until

# `outbox worker all`'s three processes as children, each test a scenario of seconds.
pytestmark = pytest.mark.slow


@contextmanager
def small_worker(
    settings: Settings, sink: SmtpSink, log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, **dataclasses.replace(settings, smtp_url=sink.url).to_env()}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env["OUTBOX_HIGH_METRICS_PORT"] = env["OUTBOX_BULK_METRICS_PORT"] = "0"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "outbox.cli", "worker", "all"], env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            yield proc
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def test_one_process_type_sends_login_codes_and_newsletters(
    settings: Settings, tmp_path: Path
) -> None:
    add_newsletter(settings, 200)
    log = tmp_path / "small.log"
    with SmtpSink() as sink, small_worker(settings, sink, log) as proc:
        with psycopg.connect(settings.database_url) as conn:
            enqueue(
                conn, idempotency_key="login", to="alice@example.com", template="login_code",
                params=LOGIN, priority="high", settings=settings,
            )  # fmt: skip
            conn.commit()
        wait_until(lambda: statuses(settings) == {"sent": 201}, timeout=90)
        # Each pool consumed its own queue, in a process of its own.
        queues = dict(
            query(
                settings,
                "SELECT o.priority, count(DISTINCT a.worker) FROM email_attempt a"
                " JOIN email_outbox o ON o.id = a.outbox_id GROUP BY 1",
            )
        )
        assert set(queues) == {"high", "bulk"}
        workers = {r[0] for r in query(settings, "SELECT kind FROM outbox_process")}
        assert workers == {"relay", "worker"}
        proc.send_signal(signal.SIGTERM)
        # The signal ends the command (128 + SIGTERM) once all three have stopped;
        # the workers' own bound is OUTBOX_WORKER_SHUTDOWN_SECONDS.
        assert proc.wait(40) == 128 + signal.SIGTERM, log.read_text()[-2000:]
        wait_until(lambda: query(settings, "SELECT count(*) FROM outbox_process") == [(0,)], 10)
    hosts = {
        r[0].split(":")[1] for r in query(settings, "SELECT DISTINCT worker FROM email_attempt")
    }
    assert len(hosts) == 2, hosts  # two worker processes: one per pool


def test_when_one_part_dies_the_whole_process_ends(settings: Settings, tmp_path: Path) -> None:
    log = tmp_path / "small.log"
    with SmtpSink() as sink, small_worker(settings, sink, log) as proc:
        wait_until(
            lambda: (
                {r[0] for r in query(settings, "SELECT kind FROM outbox_process")}
                == {"relay", "worker"}
            ),
            timeout=60,
        )
        relay_pid = next(
            int(r[0].rsplit(":", 1)[1])
            for r in query(settings, "SELECT name FROM outbox_process WHERE kind = 'relay'")
        )
        os.kill(relay_pid, signal.SIGKILL)
        assert proc.wait(40) != 0, log.read_text()[-2000:]
