"""Each long-running process's own word on whether it is alive, kept in a small file.

Every process (relay, worker pool process, bounce server, web, metrics) runs a
:class:`Reporter`: a thread that asks the process's own state every few seconds
(the relay's last loop, a pool's threads and heartbeat, an event loop that
answers) and writes the answer, with the time and its pid, to
``OUTBOX_STATE_DIR/NAME.PID.json``. ``outbox health --process NAME`` reads it:
an orchestrator's exec probe. A file rather than an HTTP endpoint: a worker
pool's processes have no server, the small profile runs several processes in
one container, and no further port can collide. A process that is wedged stops
writing (the file goes stale); one that is dead leaves a pid that no longer runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from outbox.config import Settings

log = logging.getLogger(__name__)

# A check answers None while the process is alive, else the reason it is not.
Check = Callable[[], str | None]
EVERY = 5.0  # seconds between two writes
STALE_AFTER = 4 * EVERY  # a file older than this: the process stopped writing it
NAMES = (
    "relay",
    "relay-high",
    "relay-bulk",
    "worker-high",
    "worker-bulk",
    "bounces",
    "web",
    "metrics",
    "webhooks",
)


def state_dir(settings: Settings) -> Path:
    """OUTBOX_STATE_DIR, else one directory per OUTBOX_NAMESPACE under the temporary one."""
    if settings.state_dir:
        return Path(settings.state_dir)
    return Path(tempfile.gettempdir()) / f"outbox-state-{settings.namespace}"


@dataclass(frozen=True)
class State:
    """What a process last wrote about itself."""

    name: str
    pid: int
    at: float  # wall-clock seconds
    stale_after: float  # seconds after ``at`` past which the process is presumed wedged
    why: str | None  # None: alive


def verdict(states: Iterable[State], name: str, now: float, running: Callable[[int], bool]) -> str:
    """An empty string when every ``name`` process here is alive, else one line why not."""
    found = list(states)
    if not found:
        return f"{name}: no process has reported here (is it running, with this OUTBOX_STATE_DIR?)"
    for state in found:
        label = f"{name} (pid {state.pid})"
        if not running(state.pid):
            return f"{label}: not running"
        age = now - state.at
        if age > state.stale_after:
            return f"{label}: no word for {age:.0f}s (limit {state.stale_after:.0f}s): stalled"
        if state.why:
            return f"{label}: {state.why}"
    return ""


def read(directory: Path, name: str) -> list[State]:
    states = []
    for path in sorted(directory.glob(f"{name}.*.json")):
        try:
            raw = json.loads(path.read_text())
            states.append(
                State(
                    name=name,
                    pid=int(raw["pid"]),
                    at=float(raw["at"]),
                    stale_after=float(raw["stale_after"]),
                    why=raw.get("why"),
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # removed or being replaced meanwhile: its next write counts
    return states


def pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    return True


class Reporter:
    """Writes ``check``'s answer for process ``name`` every :data:`EVERY` seconds."""

    def __init__(self, settings: Settings, name: str, check: Check, *, stale_after: float) -> None:
        self.directory = state_dir(settings)
        self.name = name
        self.check = check
        self.stale_after = stale_after
        self.path = self.directory / f"{name}.{os.getpid()}.json"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Reporter:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            forget_dead(self.directory, self.name)
        except OSError as exc:
            log.warning("liveness state not written to %s: %s", self.directory, exc.strerror)
            return self
        self.write()
        self._thread = threading.Thread(target=self._run, name="outbox-liveness", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.path.unlink(missing_ok=True)

    def _run(self) -> None:
        while not self._stop.wait(EVERY):
            self.write()

    def write(self) -> None:
        try:
            why = self.check()
        except Exception as exc:  # a check that fails is an answer, not the thread's end
            why = f"its liveness check failed: {type(exc).__name__}"
        document = {
            "pid": os.getpid(),
            "at": time.time(),
            "stale_after": self.stale_after,
            "why": why,
        }
        temporary = self.path.with_suffix(".tmp")
        try:
            temporary.write_text(json.dumps(document))
            temporary.replace(self.path)  # a reader never sees half a file
        except OSError as exc:
            log.debug("liveness state not written: %s", exc)


def forget_dead(directory: Path, name: str) -> None:
    """Remove the files of ``name`` processes that no longer run (a restart's leftovers)."""
    for state in read(directory, name):
        if not pid_running(state.pid) or state.pid == os.getpid():
            with contextlib.suppress(OSError):
                (directory / f"{name}.{state.pid}.json").unlink()


class LoopPulse:
    """Whether an asyncio event loop run by another thread still runs callbacks.

    Each :meth:`check` posts a callback that notes the time and answers from the
    last one that ran: a loop blocked for ``limit`` seconds has not run it.
    """

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.loop: asyncio.AbstractEventLoop | None = None
        self._answered = time.monotonic()

    def _answer(self) -> None:
        self._answered = time.monotonic()

    def check(self) -> str | None:
        if self.loop is None or self.loop.is_closed():
            return "its event loop is not running"
        with contextlib.suppress(RuntimeError):  # closed meanwhile: said at the next check
            self.loop.call_soon_threadsafe(self._answer)
        late = time.monotonic() - self._answered
        if late > self.limit:
            return f"its event loop has not run a callback for {late:.0f}s"
        return None


def thread_alive(thread: threading.Thread | None, what: str) -> str | None:
    if thread is None or not thread.is_alive():
        return f"{what} is not running"
    return None
