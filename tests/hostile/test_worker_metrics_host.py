"""The worker pools' Dramatiq metrics listen on loopback, as SECURITY.md says:
`outbox worker high` started as the Procfile starts it (a real pool on real Redis)."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from outbox.config import Settings

pytestmark = pytest.mark.slow  # a worker pool started and stopped


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening_on(port: int) -> set[str]:
    """The local addresses with a TCP socket listening on ``port`` (Linux's table)."""
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        with open(table) as lines:
            next(lines)
            for line in lines:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                    continue
                raw = bytes.fromhex(address)
                # The kernel prints each 32-bit word in host order (little-endian here).
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                found.add(socket.inet_ntop(family, words))
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's socket table")
def test_regression_worker_metrics_listen_on_loopback_only(
    settings: Settings, tmp_path: Path
) -> None:
    """Dramatiq's exposition server bound 0.0.0.0 (its default) in every pool."""
    port = _free_port()
    env = {**os.environ, **dataclasses.replace(settings).to_env()}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env["OUTBOX_HIGH_METRICS_PORT"] = str(port)
    env["OUTBOX_WORKER_METRICS_DIR"] = str(tmp_path / "prom")
    for name in ("dramatiq_prom_host", "OUTBOX_METRICS_HOST"):
        env.pop(name, None)
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "outbox.cli", "worker", "high"], env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (addresses := _listening_on(port)) and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-2000:]
            time.sleep(0.2)
        assert addresses == {"127.0.0.1"}, log.read_text()[-2000:]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
