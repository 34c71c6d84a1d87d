"""The ``outbox`` command: :func:`main`, and a module per command or group of commands.

A command returns a :class:`~outbox.cli.output.Result`; one printer shows it, as
text or with ``--json`` as JSON. :mod:`outbox.cli.command_line` imports a
command's module only when that command runs.
"""

from outbox.cli.command_line import main

__all__ = ["main"]
