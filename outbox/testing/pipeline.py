"""The Procfile's processes as child processes: for the demo, tests and benchmarks."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Pipeline:
    """A relay and one worker pool per queue, sharing ``env``."""

    env: Mapping[str, str]
    relays: int = 1
    high: tuple[int, int] = (1, 4)  # processes, threads
    bulk: tuple[int, int] = (1, 8)
    log_dir: Path | None = None
    split_relays: bool = False  # one relay for high, a niced one for bulk
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self) -> Pipeline:
        relay = [sys.executable, "-m", "outbox.cli", "relay"]
        for index in range(self.relays):
            if self.split_relays:
                # As the Procfile runs them: codes and newsletters relayed apart.
                self.spawn(f"relay{index}-high", [*relay, "--priority", "high"])
                self.spawn(f"relay{index}-bulk", ["nice", "-n", "10", *relay, "--priority", "bulk"])
            else:
                self.spawn(f"relay{index}", relay)
        for queue, (processes, threads) in (("email_high", self.high), ("email_bulk", self.bulk)):
            if processes:
                self.spawn(queue, worker_command(queue, processes, threads), WORKER_ENV[queue])
        return self

    def spawn(
        self, name: str, command: list[str], extra_env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        env = {**os.environ, **self.env, **(extra_env or {})}
        log_path = self.log_dir / f"{name}.log" if self.log_dir else Path(os.devnull)
        with log_path.open("ab") as out:  # the child keeps its own copy of the descriptor
            # Own process group: a signal to it reaches the dramatiq master and its children.
            proc = subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs[name] = proc
        return proc

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[name]
        os.killpg(proc.pid, sig)
        proc.wait(timeout=30)

    def stop(self, timeout: float = 30.0) -> dict[str, int | None]:
        """SIGTERM to every process group, SIGKILL after ``timeout``; exit codes."""
        for proc in self.procs.values():
            if proc.poll() is None:
                _signal_group(proc, signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                codes[name] = proc.wait()
        self.procs.clear()
        return codes

    def __enter__(self) -> Pipeline:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# An idle Dramatiq consumer polls Redis with a backoff that grows to this many
# milliseconds (default 1000): login codes must not wait that long.
WORKER_ENV = {
    "email_high": {"dramatiq_worker_timeout": "5"},
    "email_bulk": {"dramatiq_worker_timeout": "200"},
}


def worker_command(queue: str, processes: int, threads: int) -> list[str]:
    # Bulk workers yield the CPU to the relay and the login-code workers: on a
    # small machine a draining newsletter would otherwise delay every code.
    niceness = ["nice", "-n", "10"] if queue == "email_bulk" else []
    return [
        *niceness, sys.executable, "-m", "dramatiq", "outbox.worker",
        "-Q", queue, "-p", str(processes), "-t", str(threads),
        "--worker-shutdown-timeout", "25000",
    ]  # fmt: skip


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
