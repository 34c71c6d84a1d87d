"""Settings checked before a process does anything (stub, filled below)."""

from __future__ import annotations

import sys

from outbox.config import Settings
from outbox.errors import ConfigError


def settings_or_exit(process: str) -> Settings:
    try:
        return Settings.from_env()
    except ConfigError as exc:
        print(f"outbox {process}: cannot start: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
