"""Shipped process definitions (Procfiles, compose.yaml) started as a user starts them."""

from __future__ import annotations

import os
import random
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


def honcho_base_port(processes: int) -> int:
    """A base for honcho's ``PORT``s (base, base + 100, ...: one per Procfile line)
    whose every port is free now, below the ephemeral range (32768 and up), where
    an outgoing connection of another test could hold one."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(10_000, 32_768 - 100 * processes, 100)
        if all(_is_free(base + 100 * i) for i in range(processes)):
            return base
    raise AssertionError("no free range of ports for honcho between 10000 and 32767")


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


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
    try:
        wait_until(lambda: all(health(n, env).returncode == 0 for n in names), timeout, 1)
    except AssertionError:
        answers = {n: (health(n, env).stdout + health(n, env).stderr).strip() for n in names}
        raise AssertionError(f"not healthy within {timeout}s: {answers}") from None


def login_code_delivered(settings: Settings, sink: SmtpSink, key: str) -> None:
    with psycopg.connect(settings.database_url) as conn:
        enqueue(
            conn, idempotency_key=key, to="alice@example.com", template="login_code",
            params=LOGIN, priority="high", settings=settings,
        )  # fmt: skip
        conn.commit()
    wait_until(lambda: any("alice@example.com" in m.recipients for m in sink.messages), 60)
