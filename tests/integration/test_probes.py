"""`outbox health --process NAME`: a live process answers 0, a stalled or dead one
non-zero with one line why; and a listening port already taken stops a process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from outbox.config import Settings
from tests.integration.formation import bare_env, health, isolated, started
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.slow  # a process watched until its state goes stale (20 s)

OUTBOX = [sys.executable, "-m", "outbox.cli"]


def _env(settings: Settings, tmp_path: Path) -> dict[str, str]:
    env = bare_env(DATABASE_URL=settings.database_url, REDIS_URL=settings.redis_url)
    return env | isolated(settings, tmp_path / "state")


def test_a_live_relay_answers_and_a_stalled_or_dead_one_does_not(
    settings: Settings, tmp_path: Path
) -> None:
    env = _env(settings, tmp_path)
    with started([*OUTBOX, "relay"], env, tmp_path / "relay.log") as relay:
        wait_until(lambda: health("relay", env).returncode == 0, timeout=60, interval=0.5)
        assert health("relay", env).stdout.strip() == "ok"
        os.kill(relay.pid, signal.SIGSTOP)  # wedged: no thread of it runs any more
        try:
            wait_until(lambda: health("relay", env).returncode != 0, timeout=40, interval=1)
            stalled = health("relay", env)
            assert stalled.returncode == 1
            [line] = stalled.stdout.strip().splitlines()
            assert line.startswith(f"relay (pid {relay.pid}): no word for ")
            assert line.endswith("stalled")
        finally:
            os.kill(relay.pid, signal.SIGCONT)
        wait_until(lambda: health("relay", env).returncode == 0, timeout=30, interval=0.5)
        os.kill(relay.pid, signal.SIGKILL)
        relay.wait(10)
        dead = health("relay", env)
        assert dead.returncode == 1
        assert dead.stdout.strip() == f"relay (pid {relay.pid}): not running"


def test_a_process_that_never_started_here_is_not_alive(settings: Settings, tmp_path: Path) -> None:
    env = _env(settings, tmp_path)
    never = health("worker-bulk", env)
    assert never.returncode == 1
    assert never.stdout.strip().startswith("worker-bulk: no process has reported here")


def test_readiness_needs_postgres(settings: Settings, tmp_path: Path) -> None:
    env = _env(settings, tmp_path)
    with started([*OUTBOX, "metrics"], env, tmp_path / "metrics.log"):
        wait_until(lambda: health("metrics", env).returncode == 0, timeout=60, interval=0.5)
        away = env | {"DATABASE_URL": "postgresql://postgres@127.0.0.1:1/postgres"}
        not_ready = health("metrics", away)
        assert not_ready.returncode == 1
        assert not_ready.stdout.startswith("not ready: Postgres does not answer")


def test_a_worker_pool_answers_while_its_threads_run(settings: Settings, tmp_path: Path) -> None:
    env = _env(settings, tmp_path)
    with started([*OUTBOX, "worker", "bulk", "-t", "2"], env, tmp_path / "w.log") as pool:
        wait_until(lambda: health("worker-bulk", env).returncode == 0, timeout=60, interval=0.5)
        pool.send_signal(signal.SIGTERM)
        assert pool.wait(40) == 0, (tmp_path / "w.log").read_text()[-2000:]
    # A clean stop removes its state: the probe says nothing runs here.
    assert "no process has reported here" in health("worker-bulk", env).stdout


@pytest.mark.parametrize(
    ("command", "setting"),
    [
        (["worker", "high"], "OUTBOX_HIGH_METRICS_PORT"),
        (["metrics"], "OUTBOX_METRICS_PORT"),
        (["web"], "PORT"),
    ],
)
def test_a_port_already_taken_stops_the_process_with_one_line(
    command: list[str], setting: str, settings: Settings, tmp_path: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = _env(settings, tmp_path) | {setting: str(port), "OUTBOX_METRICS_HOST": "127.0.0.1"}
        args = ["--host", "127.0.0.1"] if command == ["web"] else []
        done = subprocess.run(
            [*OUTBOX, *command, *args], env=env, capture_output=True, text=True, timeout=30,
            check=False,
        )  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert setting in line
    assert f"port {port} on 127.0.0.1 is already in use" in line
