"""``outbox health --process NAME [--ready]``: an orchestrator's exec probe.

Liveness is each process's own word (:mod:`outbox.telemetry.liveness`): the
state file it keeps fresh while its loop, threads or event loop run. Readiness
adds what the process needs to do its work: Postgres, and the broker for the
relays and the worker pools. Exit 0 when all is well, else 1 with one line why.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from outbox.cli.output import Printer, Redaction, Result
from outbox.config import Settings
from outbox.errors import OutboxError
from outbox.telemetry import liveness

# Readiness: seconds each dependency has to answer, well inside a probe's timeout.
_READY_TIMEOUT = 3


@dataclass(frozen=True, slots=True)
class Probed(Result):
    problem: str  # empty: healthy

    def text(self) -> str:
        return self.problem or "ok"

    def exit_code(self) -> int:
        return 1 if self.problem else 0

    def redaction(self) -> Redaction:
        return Redaction.SECRETS  # a broker's error may quote its URL


def health(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    unknown = [n for n in args.names if n not in liveness.NAMES]
    if unknown:
        return Probed(f"unknown process {unknown[0]!r} (one of {', '.join(liveness.NAMES)})")
    directory = liveness.state_dir(settings)
    for name in args.names:
        states = liveness.read(directory, name)
        problem = liveness.verdict(states, name, time.time(), liveness.pid_running)
        if problem:
            return Probed(problem)
    if args.ready:
        return Probed(_not_ready(settings, args.names))
    return Probed("")


def _not_ready(settings: Settings, names: list[str]) -> str:
    # Imported here: a liveness probe runs often and needs neither driver.
    from outbox.db.store import connections  # noqa: PLC0415
    from outbox.telemetry.health import broker_health  # noqa: PLC0415

    try:
        with connections.connect(settings.database_url, timeout=_READY_TIMEOUT) as conn:
            connections.ping(conn)
    except OutboxError as exc:
        return f"not ready: Postgres does not answer ({type(exc.__cause__ or exc).__name__})"
    if any(n.startswith(("relay", "worker")) for n in names):
        broker = broker_health(settings)
        if not broker.get("up"):
            return f"not ready: the broker does not answer ({broker.get('error', 'no answer')})"
    return ""
