"""What the console's overview reads: exact counts of the live outbox, the settled
history counted or estimated (and said which), the last day's feedback, and
sent, failed and bounced per hour per template and tag."""

from __future__ import annotations

from dataclasses import dataclass, field

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors

queries = load_queries(__name__)

# Up to this many rows (by the planner's count) the settled history is counted
# exactly: a read of the whole table that takes well under a second.
EXACT_UP_TO = 200_000
SETTLED = ("sent", "cancelled")


@dataclass(frozen=True, slots=True)
class StatusCounts:
    counts: dict[str, dict[str, int]]  # status -> priority -> rows
    settled_exact: bool  # False: sent and cancelled are the planner's estimate (no priority)
    estimates: dict[str, int] = field(default_factory=dict)  # status -> rows, when not exact


@dataclass(frozen=True, slots=True)
class Hourly:
    """One count: of ``kind`` (sent, failed, bounced) in one hour, for a template
    and the set of tags its emails carry."""

    hour: int  # unix hours
    kind: str
    template: str
    tags: tuple[str, ...]
    count: int


def status_counts(conn: Conn, *, exact_up_to: int = EXACT_UP_TO) -> StatusCounts:
    """Every status's rows; sent and cancelled exactly while the table is small."""
    counts: dict[str, dict[str, int]] = {}
    with translate_errors():
        rows = conn.execute(queries["overview_live_counts"]).fetchall()
        size_row = conn.execute(queries["overview_table_size"]).fetchone()
        size = int(size_row[0]) if size_row else -1
        # Never analysed (-1) or small: read it whole.
        exact = size <= exact_up_to
        if exact:
            rows += conn.execute(queries["overview_settled_counts"]).fetchall()
            shares = []
        else:
            shares = conn.execute(queries["overview_status_shares"]).fetchall()
    for status, priority, n in rows:
        counts.setdefault(str(status), {})[str(priority)] = int(n)
    estimates = {}
    if not exact:
        share = {str(s): float(f) for s, f in shares}
        estimates = {s: round(size * share.get(s, 0.0)) for s in SETTLED}
    return StatusCounts(counts, exact, estimates)


def feedback_24h(conn: Conn) -> tuple[dict[str, int], int]:
    """Addresses that bounced (hard, soft) or complained in the last 24 hours, and
    the rows sent in them."""
    with translate_errors():
        kinds = conn.execute(queries["overview_feedback_24h"]).fetchall()
        sent = conn.execute(queries["overview_sent_24h"]).fetchone()
    return {str(k): int(n) for k, n in kinds if k}, int(sent[0]) if sent else 0


def hourly(conn: Conn) -> list[Hourly]:
    with translate_errors():
        rows = conn.execute(queries["overview_hourly"]).fetchall()
    return [Hourly(int(h), str(k), str(t), tuple(g), int(n)) for h, k, t, g, n in rows]
