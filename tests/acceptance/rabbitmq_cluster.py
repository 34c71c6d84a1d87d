"""A three-node RabbitMQ cluster on loopback, for the node-failure scenario.

Each node has its own name, AMQP and distribution ports, data and log
directories, and no plugin; the three share an Erlang cookie through the
``HOME`` they run with. Erlang nodes are heavy for a small machine: one
scheduler each, no busy waiting. :meth:`RabbitCluster.close` kills every node
whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from outbox.testing.private_servers import free_port

RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")
# One scheduler per node, none spinning while idle, the distribution on loopback.
ERL_ARGS = (
    "+S 1:1 +SDio 1 +A 2 +sbwt none +sbwtdcpu none +sbwtdio none"
    " -kernel inet_dist_use_interface {127,0,0,1}"
)


class Node:
    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.port = free_port()
        self.dist_port = free_port()
        self.base = root / name.partition("@")[0]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"


class RabbitCluster:
    def __init__(self, root: Path) -> None:
        if not (RABBITMQ_BIN / "rabbitmq-server").exists():
            pytest.fail(
                "rabbitmq-server is not installed: the cluster scenario starts three private"
                " nodes (`apt-get install rabbitmq-server`)"
            )
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True)
        cookie = self.home / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(20))
        cookie.chmod(0o400)
        (root / "enabled_plugins").write_text("[].\n")
        (root / "rabbitmq-env.conf").write_text("")
        tag = secrets.token_hex(3)  # several runs at once on one host: names of their own
        self.nodes = [Node(root, f"outbox-{tag}-{n}@localhost") for n in "abc"]

    @property
    def url(self) -> str:
        """The nodes' URLs, comma-separated, as OUTBOX_BROKER_URL takes them."""
        return ",".join(node.url for node in self.nodes)

    def start(self) -> RabbitCluster:
        for node in self.nodes:
            self._boot(node)
        for node in self.nodes:
            self._await(node)
        first = self.nodes[0]
        for node in self.nodes[1:]:
            self.ctl(node, "stop_app")
            self.ctl(node, "join_cluster", first.name)
            self.ctl(node, "start_app", timeout=180)
        status = self.ctl(first, "cluster_status", "--formatter", "json")
        running = status.count("outbox-")
        if any(node.name not in status for node in self.nodes) or running < 3:
            raise AssertionError(f"the cluster did not form: {status}")
        return self

    def ctl(self, node: Node, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [str(RABBITMQ_BIN / "rabbitmqctl"), "-q", "-n", node.name, *args],
            env=self._env(node),
            capture_output=True,
            timeout=timeout,
            check=False,
            text=True,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"rabbitmqctl -n {node.name} {' '.join(args)}: {done.stdout}{done.stderr}"
            )
        return done.stdout

    def _await(self, node: Node, timeout: float = 240) -> None:
        """Until the node runs RabbitMQ (it registers with epmd a moment after it starts)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.ctl(node, "await_startup", "--timeout", "120", timeout=150)
                return
            except AssertionError:
                if time.monotonic() > deadline or (node.proc and node.proc.poll() is not None):
                    log = node.base / "log" / "node.log"
                    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                    raise AssertionError(
                        f"RabbitMQ node {node.name} did not start: {tail}"
                    ) from None
                time.sleep(1)

    def leader_of(self, queue: str, *, asked: Node | None = None) -> Node:
        """The node that leads ``queue`` (a quorum queue) now."""
        asked = asked or next(n for n in self.nodes if n.proc is not None)
        out = self.ctl(asked, "list_queues", "name", "leader", "--no-table-headers")
        for line in out.splitlines():
            name, _, leader = line.partition("\t")
            if name == queue:
                return next(n for n in self.nodes if n.name == leader.strip())
        raise AssertionError(f"{queue} is not declared: {out}")

    def kill(self, node: Node) -> None:
        """SIGKILL to the node's processes: it stops without a word to its peers."""
        if node.proc is not None and node.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.proc.pid, signal.SIGKILL)
            node.proc.wait(timeout=30)
        node.proc = None

    def close(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                self.kill(node)
        shutil.rmtree(self.root, ignore_errors=True)

    def _env(self, node: Node) -> dict[str, Any]:
        return {
            **os.environ,
            "HOME": str(self.home),
            "RABBITMQ_CONF_ENV_FILE": str(self.root / "rabbitmq-env.conf"),
            "RABBITMQ_NODENAME": node.name,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(node.port),
            "RABBITMQ_DIST_PORT": str(node.dist_port),
            "RABBITMQ_MNESIA_BASE": str(node.base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(node.base / "log"),
            "RABBITMQ_LOGS": str(node.base / "log" / "node.log"),
            "RABBITMQ_PID_FILE": str(node.base / "pid"),
            "RABBITMQ_CONFIG_FILE": str(node.base / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.root / "enabled_plugins"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": ERL_ARGS,
        }

    def _boot(self, node: Node) -> None:
        (node.base / "log").mkdir(parents=True)
        (node.base / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{node.port}\n"
            "disk_free_limit.absolute = 50MB\n"
            "vm_memory_high_watermark.relative = 0.2\n"
        )
        with (node.base / "stdout.log").open("ab") as out:
            node.proc = subprocess.Popen(
                [str(RABBITMQ_BIN / "rabbitmq-server")],
                env=self._env(node),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
