"""Fixtures of the fault scenarios: real processes, real servers, everything cleaned up.

``OUTBOX_SOAK=1`` multiplies every scenario's email count (by
``OUTBOX_SOAK_FACTOR``, default 10) for a longer run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from outbox.config import Settings
from outbox.testing import pipeline as pipeline_module
from outbox.testing.pipeline import Pipeline, worker_command
from outbox.testing.sink import Behaviour, SlowLink, SmtpSink
from tests.acceptance.checks import RESULTS
from tests.acceptance.servers import RedisServer


def _initial_env(name: str) -> str | None:
    """A variable as the process started with it.

    tests/conftest.py removes every OUTBOX_* variable before this file is
    read (the developer's own settings must not leak into the tests), so the
    soak switch is read from the environment the process was started with.
    """
    if name in os.environ:
        return os.environ[name]
    with contextlib.suppress(OSError):
        for item in Path("/proc/self/environ").read_bytes().split(b"\0"):
            key, _, value = item.partition(b"=")
            if key.decode(errors="replace") == name:
                return value.decode(errors="replace")
    return None


SOAK = (_initial_env("OUTBOX_SOAK") or "").lower() in {"1", "true", "yes"}
SOAK_FACTOR = int(_initial_env("OUTBOX_SOAK_FACTOR") or "10") if SOAK else 1


def scaled(n: int) -> int:
    """An email count, multiplied in soak mode."""
    return n * SOAK_FACTOR


def timeout(seconds: float) -> float:
    """A wait, stretched in soak mode."""
    return seconds * SOAK_FACTOR


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of this directory is a fault scenario: marked ``faults``."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.faults)


@pytest.fixture
def fault_settings(settings: Settings) -> Settings:
    """Time compressed further: the sweeper returns rows after 3 s, looks twice a second."""
    return dataclasses.replace(
        settings,
        stuck_seconds=3.0,
        sweep_interval=0.5,
        smtp_connect_timeout=2.0,
        smtp_command_timeout=2.0,
        max_attempts=50,
        max_in_flight=300,
        claim_batch=100,
    )


@pytest.fixture
def private_redis(tmp_path: Path) -> RedisServer:
    """A redis-server of the test's own, without persistence, to restart or flush."""
    workdir = tmp_path / "redis"
    workdir.mkdir()
    server = RedisServer(workdir).start()
    try:
        yield server  # type: ignore[misc]
    finally:
        server.stop()


@pytest.fixture
def broker_settings(broker_of: Settings, fault_settings: Settings) -> Settings:
    """:func:`fault_settings` on each broker in turn: the same faults, the same guarantees."""
    return dataclasses.replace(fault_settings, broker_url=broker_of.broker_url)


def child_env(settings: Settings, smtp_url: str, **extra: str) -> dict[str, str]:
    return {
        **dataclasses.replace(settings, smtp_url=smtp_url).to_env(),
        "OUTBOX_LOG_LEVEL": "INFO",
        **extra,
    }


class Rig:
    """Starts SMTP servers and pipelines for one scenario; stops all of them at the end."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.sinks: list[SmtpSink] = []
        self.links: list[SlowLink] = []
        self.pipelines: list[Pipeline] = []
        self.cleanups: list[Callable[[], None]] = []

    def sink(
        self,
        behaviour: Callable[[str], Behaviour] | None = None,
        *,
        port: int = 0,
        start: bool = True,
    ) -> SmtpSink:
        sink = SmtpSink(behaviour, port=port)
        self.sinks.append(sink)
        return sink.start() if start else sink

    def link(self, upstream_port: int, **kwargs: Any) -> SlowLink:
        link = SlowLink(upstream_port, **kwargs)
        self.links.append(link)
        return link.start()

    def pipeline(
        self,
        env: Mapping[str, str],
        *,
        relays: int = 1,
        high: tuple[int, int] = (1, 4),
        bulk: tuple[int, int] = (1, 8),
        start: bool = True,
    ) -> Pipeline:
        p = Pipeline(env, relays=relays, high=high, bulk=bulk, log_dir=self.log_dir)
        self.pipelines.append(p)
        return p.start() if start else p

    def close(self) -> None:
        for p in reversed(self.pipelines):
            with contextlib.suppress(Exception):
                p.stop(timeout=10)
            for proc in p.procs.values():  # stop() gave up on it
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for link in self.links:
            with contextlib.suppress(Exception):
                link.stop()
        for sink in self.sinks:
            if sink._controller is not None:
                with contextlib.suppress(Exception):
                    sink.stop()
        for cleanup in reversed(self.cleanups):
            with contextlib.suppress(Exception):
                cleanup()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call":
        item.stash[_FAILED] = report.failed


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    print(f"\n[faults] process logs: {tmp_path}")
    try:
        yield r
    finally:
        r.close()
        if request.node.stash.get(_FAILED, False):
            for log in sorted(tmp_path.glob("*.log")):
                lines = log.read_text(errors="replace").splitlines()
                print(f"\n----- last lines of {log.name} -----")
                print("\n".join(line[:300] for line in lines[-40:]))


def spawn_workers(p: Pipeline, queue: str, processes: int, threads: int) -> None:
    """(Re)start one worker pool of a pipeline under the name Pipeline.start gives it."""
    command = worker_command(queue, processes, threads)
    extra = getattr(pipeline_module, "WORKER_ENV", {}).get(queue)
    if extra:
        p.spawn(queue, command, extra)  # type: ignore[call-arg]
    else:
        p.spawn(queue, command)


def spawn_relay(p: Pipeline, name: str) -> subprocess.Popen[bytes]:
    return p.spawn(name, [sys.executable, "-m", "outbox.cli", "relay"])


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not RESULTS:
        return
    terminalreporter.section("fault scenarios: figures")
    for scenario, figures in RESULTS:
        terminalreporter.write_line(f"{scenario}:")
        terminalreporter.write_line("    " + ", ".join(f"{k}={v}" for k, v in figures.items()))
