"""``outbox demo``: a login code and a newsletter sent through the whole pipeline."""

from __future__ import annotations

import argparse

from outbox.cli.output import Done, Printer, Result
from outbox.config import Settings
from outbox.testing.demo import run_demo


def demo(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    # The demo prints its own report as it goes.
    return Done(
        run_demo(settings, newsletter=args.newsletter, timeout=args.timeout, keep=args.keep)
    )
