"""``outbox config``: the effective settings, or every problem they have.

It loads no database driver: a deployment checks its settings before anything runs.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any, ClassVar

from outbox import preflight
from outbox.cli import worker_pools
from outbox.cli.output import JsonResult, Printer, Result
from outbox.config import Settings
from outbox.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Problems(Result):
    """``config check``: every problem of the processes checked."""

    processes: list[str]
    found: list[str]

    def text(self) -> str:
        if not self.found:
            return f"ok: {', '.join(self.processes)} can start with these settings"
        return "\n".join(f"problem: {line}" for line in self.found)

    def exit_code(self) -> int:
        return 1 if self.found else 0


@dataclass(frozen=True, slots=True)
class Effective(JsonResult):
    """``config show``: every setting as a process would see it, secrets masked."""

    shown: list[preflight.Shown]
    json_indent: ClassVar[int | None] = 2

    def json(self) -> Any:
        return [vars(s) for s in self.shown]

    def text(self) -> str:
        width = max(len(s.env) for s in self.shown)
        lines = [
            f"{' ' if s.default else '*'} {s.env:<{width}}  {s.value or '(empty)'}"
            f"   [{', '.join(s.readers)}]"
            for s in self.shown
        ]
        lines.append("* set in the environment; [..] the processes that read it")
        return "\n".join(lines)


def config(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    if args.action == "check":
        # The bounce server is optional: checked when asked for or configured.
        processes = args.only or [
            p for p in preflight.PROCESSES if p != "bounces" or settings.bounce_domain
        ]
        found = preflight.problems(settings, processes)
        if "worker" in processes:
            found += _pool_problems()
        return Problems(processes, found)
    pools = [
        preflight.Shown(n, v, ("worker",), d)
        for n, v, d in worker_pools.shown(os.environ, worker_pools.usable_cpus())
    ]
    return Effective(preflight.effective(settings) + pools)


def _pool_problems() -> list[str]:
    """The worker pools' settings (``outbox worker``), read from the environment."""
    try:
        worker_pools.check_all(os.environ)
    except ConfigError as exc:
        return [str(exc)]
    return []
