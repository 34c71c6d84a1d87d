"""``python -m outbox.cli``: the ``outbox`` command, without its console script."""

from outbox.cli.command_line import main

raise SystemExit(main())
