"""Shipped process definitions (Procfiles, compose.yaml) started as a user starts them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import psycopg

from outbox import enqueue
from outbox.config import Settings
from outbox.testing.sink import SmtpSink
from tests.integration.helpers import LOGIN, wait_until

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def bare_env(**settings: str) -> dict[str, str]:
    """Only what a shell gives (no OUTBOX_* of the test run) and ``settings``; the
    installed commands first on PATH, importing this tree."""
    env = {k: v for k, v in os.environ.items() if k in {"HOME", "LANG", "TMPDIR", "USER"}}
    env["PATH"] = f"{BIN}:/usr/local/bin:/usr/bin:/bin"
    env["PYTHONPATH"] = str(ROOT)
    return {**env, **settings}


def isolated(settings: Settings, state_dir: Path) -> dict[str, str]:
    """What keeps this run apart from others on the machine: its own broker namespace,
    state directory and free ports (the defaults are fixed ports)."""
    return {
        "OUTBOX_NAMESPACE": settings.namespace,
        "OUTBOX_STATE_DIR": str(state_dir),
        "OUTBOX_HIGH_METRICS_PORT": str(free_port()),
        "OUTBOX_BULK_METRICS_PORT": str(free_port()),
        "OUTBOX_METRICS_PORT": str(free_port()),
        "OUTBOX_WORKER_METRICS_DIR": str(state_dir / "prom"),
    }


@contextmanager
def started(
    command: list[str], env: Mapping[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, env=dict(env), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def health(name: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "outbox"), "health", "--process", name, "--ready"],
        env=dict(env), capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def wait_until_healthy(names: list[str], env: Mapping[str, str], timeout: float = 60) -> None:
    wait_until(lambda: all(health(n, env).returncode == 0 for n in names), timeout, interval=1)


def login_code_delivered(settings: Settings, sink: SmtpSink, key: str) -> None:
    with psycopg.connect(settings.database_url) as conn:
        enqueue(
            conn, idempotency_key=key, to="alice@example.com", template="login_code",
            params=LOGIN, priority="high", settings=settings,
        )  # fmt: skip
        conn.commit()
    wait_until(lambda: any("alice@example.com" in m.recipients for m in sink.messages), 60)
