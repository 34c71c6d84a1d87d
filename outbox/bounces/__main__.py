"""``python -m outbox.bounces classify FILE [FILE ...]``."""

from __future__ import annotations

import sys

from outbox.bounces.command import main

sys.exit(main())
