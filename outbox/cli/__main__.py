"""``python -m outbox.cli``: the ``outbox`` command, without its console script."""

from outbox.cli import main

raise SystemExit(main())
