"""``python -m outbox.bounce_parsing classify FILE [FILE ...]``."""

from __future__ import annotations

import sys

from outbox.bounce_parsing.command import main

sys.exit(main())
