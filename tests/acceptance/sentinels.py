"""A Redis master, a replica and three sentinels on loopback, for the failover scenario.

The replica reaches its master through :class:`HeldLink`, a TCP relay the
scenario can stop: what the master accepts after that never reaches the
replica, as under asynchronous replication when the master dies with writes
its replica had not received yet. The sentinels talk to both servers directly.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis

from outbox.testing.private_servers import free_port, wait_ready

MASTER_NAME = "outbox"
# Sentinels decide a master is down after this long without an answer; loaded
# CI machines answer PING well inside it.
DOWN_AFTER_MS = 1500


def _redis_server() -> str:
    binary = shutil.which("redis-server", path="/usr/bin:/usr/local/bin") or shutil.which(
        "redis-server"
    )
    if binary is None:
        pytest.fail(
            "redis-server is not installed: the Sentinel scenario starts private servers and"
            " sentinels with it (`apt-get install redis-server`)"
        )
    return binary


class HeldLink:
    """Forwards one port to another both ways until :meth:`hold` stops it."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.flowing = threading.Event()
        self.flowing.set()
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.2)
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self) -> None:
        """No byte more either way: the replica falls behind from now on."""
        self.flowing.clear()

    def close(self) -> None:
        self._stop.set()
        self.flowing.set()
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                downstream, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                downstream.close()
                continue
            upstream.settimeout(None)
            self._sockets += [downstream, upstream]
            for source, sink in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = source.recv(65536)
                if not data:
                    break
                self.flowing.wait()
                if self._stop.is_set():
                    break
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class SentinelGroup:
    """The servers, the link between them and the sentinels; :meth:`close` ends all."""

    def __init__(self, workdir: Path) -> None:
        self.binary = _redis_server()
        self.workdir = workdir
        self.master_port = free_port()
        self.replica_port = free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.link: HeldLink | None = None

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{MASTER_NAME}/0"

    def start(self) -> SentinelGroup:
        self._server("master", self.master_port)
        self.link = HeldLink(self.master_port)
        self._server("replica", self.replica_port, "--replicaof", "127.0.0.1", str(self.link.port))
        wait_ready(self._replica_in_sync, 30, "the replica's first sync")
        for index, port in enumerate(self.sentinel_ports):
            self._sentinel(index, port)
        wait_ready(self._sentinels_agree, 60, "sentinels that know the replica and each other")
        return self

    def client(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_connect_timeout=2, socket_timeout=5)

    def master_port_now(self) -> int | None:
        """The master's port as the first sentinel that answers says it."""
        for port in self.sentinel_ports:
            client = self.client(port)
            try:
                address = client.sentinel_get_master_addr_by_name(MASTER_NAME)
                return int(address[1]) if address else None
            except (redis.RedisError, TypeError, IndexError):
                continue
            finally:
                client.close()
        return None

    def kill_master(self) -> None:
        """SIGKILL: what the master held and the replica had not received is gone."""
        proc = self.procs.pop("master")
        proc.kill()
        proc.wait(timeout=10)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
        self.procs.clear()
        if self.link is not None:
            self.link.close()

    def _spawn(self, name: str, command: list[str]) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        with log:
            self.procs[name] = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _server(self, name: str, port: int, *extra: str) -> None:
        directory = self.workdir / name
        directory.mkdir()
        self._spawn(
            name,
            [
                self.binary,
                "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--dir", str(directory), "--repl-diskless-sync-delay", "0",
                *extra,
            ],
        )  # fmt: skip
        client = self.client(port)
        try:
            wait_ready(client.ping, 10, f"redis-server {name} on port {port}")
        finally:
            client.close()

    def _sentinel(self, index: int, port: int) -> None:
        directory = self.workdir / f"sentinel{index}"
        directory.mkdir()
        config = directory / "sentinel.conf"  # sentinels rewrite their file: one each
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndaemonize no\ndir {directory}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.master_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} 10000\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
        )
        self._spawn(f"sentinel{index}", [self.binary, str(config), "--sentinel"])

    def _replica_in_sync(self) -> bool:
        client = self.client(self.replica_port)
        try:
            info = client.info("replication")
        finally:
            client.close()
        return info.get("master_link_status") == "up"

    def _sentinels_agree(self) -> bool:
        for port in self.sentinel_ports:
            client = self.client(port)
            try:
                state = client.sentinel_master(MASTER_NAME)
            finally:
                client.close()
            if int(state["num-other-sentinels"]) < 2 or int(state["num-slaves"]) < 1:
                return False
        return True


def wait_for_election(group: SentinelGroup, timeout: float) -> float:
    """The monotonic time the sentinels named the replica master."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if group.master_port_now() == group.replica_port:
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"no sentinel named the replica master within {timeout}s")
