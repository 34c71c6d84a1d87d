"""The ``outbox`` command: :func:`main`, and a module per command or group of commands.

A command returns a :class:`~outbox.cli.output.Result`; one printer shows it, as
text or with ``--json`` as JSON. :mod:`outbox.cli.command_line` imports a
command's module only when that command runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from outbox.cli import command_line
from outbox.cli.closed_pipe import quiet_when_closed


def main(argv: Sequence[str] | None = None) -> int:
    """The ``outbox`` command; a reader that stops reading ends it quietly."""
    return quiet_when_closed(command_line.main, argv)


__all__ = ["main"]
