"""The small profile's Postgres connections, as docs/operations.md states them once.

The sum is made here from the settings' defaults and the per-process rules of
the connections table: a change of a default that leaves the stated figure
behind fails.
"""

from __future__ import annotations

import re
from pathlib import Path

from outbox.config import Settings

ROOT = Path(__file__).resolve().parents[2]
RELAY = 2 + 1  # its pool, and its LISTEN session
POOL_SESSIONS = 2  # a worker pool's result committer and heartbeat, beside its database pool
SMALL_THREADS = 2  # each pool of the small profile (OUTBOX_HIGH_THREADS, OUTBOX_BULK_THREADS)
WEBHOOKS = 1  # the webhook deliverer's one session


def small_profile() -> tuple[int, int]:
    """(the worker process's connections, web's) with the defaults."""
    pool = SMALL_THREADS + 2 + POOL_SESSIONS
    return (
        RELAY + 2 * pool + WEBHOOKS,
        Settings().web_pool_size + 1,
    )  # + 1: /metrics with METRICS_AUTH


def test_operations_states_the_small_profiles_connections_as_they_add_up() -> None:
    worker, web = small_profile()
    text = " ".join((ROOT / "docs" / "operations.md").read_text(encoding="utf-8").split())
    assert f"with the defaults: {worker + web} at most" in text
    assert (
        f"3 + 2 \u00d7 ({SMALL_THREADS + 2} + 2) + 1 = {worker}" in text
    )  # the multiplication sign
    assert f"Together {worker} + {web} = {worker + web}" in text
    assert f"The small profile takes {worker + web} with its defaults" in text


def test_the_readme_leaves_the_figure_to_operations() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    small = readme[readme.index("**Small apps**") : readme.index("**Containers**")]
    assert not re.search(r"\d+\s+connections", small), small
    assert "operations.md#one-process-for-small-apps" in small
