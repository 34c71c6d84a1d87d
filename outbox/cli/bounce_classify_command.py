"""``outbox bounces classify``: what each bounce file says, parsed and nothing stored.

A module of its own, which loads no database driver: it starts at once.
"""

from __future__ import annotations

import argparse
import io
from dataclasses import dataclass

from outbox.bounce_parsing.command import classify_command
from outbox.cli.output import Printer, Redaction, Result
from outbox.config import Settings


@dataclass(frozen=True, slots=True)
class Classified(Result):
    lines: str  # one JSON object a recipient, as classify_command writes them
    code: int  # 1: a file could not be read (said on stderr)
    reveal: bool

    def text(self) -> str:
        return self.lines.removesuffix("\n")

    def exit_code(self) -> int:
        return self.code

    def redaction(self) -> Redaction:
        # Each line names a bounced recipient: tagged, like every other output.
        return Redaction.NONE if self.reveal else Redaction.ADDRESSES


def classify(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    found = io.StringIO()
    code = classify_command(args.files or ["-"], found)
    return Classified(found.getvalue(), code, reveal=args.reveal)
