"""Private Redis and Postgres servers on loopback, for the scenarios that restart them.

The machine's shared servers are never restarted: a scenario that needs to
take a server away starts its own on a free port, in a temporary directory
that is removed afterwards.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import redis

from outbox.testing.private_servers import PostgresServer, free_port, wait_ready

__all__ = ["PostgresServer", "RedisServer", "free_port"]


class RedisServer:
    """``redis-server`` without persistence on its own port: a restart empties it."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server", path="/usr/bin:/usr/local/bin") or shutil.which(
            "redis-server"
        )
        if binary is None:
            pytest.fail(
                "redis-server is not installed: the Redis restart scenario starts a private "
                "one (`apt-get install redis-server`)"
            )
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        log = (self.workdir / "redis.log").open("ab")
        with log:
            command = [
                self.binary,
                "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--daemonize", "no",
                "--dir", str(self.workdir),
            ]  # fmt: skip
            self.proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        try:
            wait_ready(client.ping, 10, f"redis-server on port {self.port}")
        finally:
            client.close()
        return self

    def stop(self) -> None:
        """SIGKILL: whatever it held is gone, as after a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_connect_timeout=2)
