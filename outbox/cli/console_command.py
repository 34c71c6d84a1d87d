"""``outbox console hash-password``: a console user's password hash, for OUTBOX_CONSOLE_USERS."""

from __future__ import annotations

import argparse
import sys

from outbox.cli.output import Printer, Result, Said
from outbox.config import Settings
from outbox.web.console_auth import hash_password


def console(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    """The argon2 hash of the password on stdin."""
    # From stdin, so the password is in no shell history or process list.
    password = sys.stdin.readline().rstrip("\r\n")
    return Said(hash_password(password))
