"""What every fault scenario checks, from the SMTP server's own record and the database.

The promise under test: no email is lost, and none is sent twice with a
different Message-ID, whatever fails. A second copy at the SMTP server is
allowed only with the first copy's Message-ID and only when the row's history
explains it (an ``uncertain`` attempt: a worker lost after the relay may have
accepted, or a connection lost after the end-of-data dot).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import psycopg

from outbox import enqueue_many
from outbox.config import Settings
from outbox.testing.sink import SmtpSink

FINAL = frozenset({"sent", "failed", "dead", "held", "suppressed"})
IN_FLIGHT = frozenset({"pending", "queued", "sending"})

NEWS = {"name": "R", "title": "News", "intro": "Hi", "url": "https://x.example"}
LOGIN = {"name": "Alice", "code": "123456", "product": "Shop", "minutes": 10}

# Figures of every scenario of this run, for the summary at the end.
RESULTS: list[tuple[str, dict[str, Any]]] = []


class CoreBug(AssertionError):
    """A broken promise of the core, as opposed to a broken test set-up."""


def query(settings: Settings, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.database_url, connect_timeout=5) as conn:
        return conn.execute(sql.encode(), args or None).fetchall()


def statuses(settings: Settings) -> dict[str, int]:
    return dict(query(settings, "SELECT status, count(*) FROM email_outbox GROUP BY 1"))


def add_emails(
    settings: Settings,
    n: int,
    *,
    prefix: str = "nl",
    priority: str = "bulk",
    domain: str = "example.com",
) -> list[str]:
    """``n`` emails with one recipient each (``{prefix}{i}@{domain}``); their recipients."""
    template, params = ("login_code", LOGIN) if priority == "high" else ("newsletter", NEWS)
    recipients = [f"{prefix}{i}@{domain}" for i in range(n)]
    with psycopg.connect(settings.database_url) as conn:
        enqueue_many(
            conn,
            (
                {
                    "idempotency_key": f"{prefix}-{i}",
                    "to": to,
                    "template": template,
                    "params": params,
                    "priority": priority,
                }
                for i, to in enumerate(recipients)
            ),
            settings=settings,
        )
        conn.commit()
    return recipients


def wait_until(
    check: Callable[[], bool], timeout: float, what: str = "condition", interval: float = 0.1
) -> float:
    """Seconds it took; fails after ``timeout``."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what}: not met within {timeout}s")
        time.sleep(interval)
    return time.monotonic() - started


def wait_final(
    settings: Settings, total: int, timeout: float, final: Collection[str] = FINAL
) -> float:
    """Wait until all ``total`` rows are in a final status; seconds it took."""
    last: dict[str, int] = {}

    def done() -> bool:
        nonlocal last
        last = statuses(settings)
        return sum(n for s, n in last.items() if s in final) == total

    try:
        return wait_until(done, timeout, "all rows final", interval=0.2)
    except AssertionError:
        raise AssertionError(f"rows not final within {timeout}s: {unfinished(settings)}") from None


def unfinished(settings: Settings, limit: int = 10) -> str:
    """Rows not yet final, for a failure message."""
    rows = query(
        settings,
        "SELECT id, status, status_reason, attempts, locked_by,"
        " round(extract(epoch FROM now() - locked_at)::numeric, 1),"
        " round(extract(epoch FROM next_attempt_at - now())::numeric, 1)"
        " FROM email_outbox WHERE status IN ('pending', 'queued', 'sending') ORDER BY id LIMIT %s",
        limit,
    )
    heading = "first unfinished (id, status, reason, attempts, locked_by, locked s ago, due in s)"
    return f"{statuses(settings)}; {heading}: " + "; ".join(map(str, rows))


def peak_rate(times: Iterable[float], window: float = 1.0) -> float:
    """Most events in any ``window`` seconds, per second."""
    ordered = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(ordered):
        while t - ordered[start] > window:
            start += 1
        best = max(best, end - start + 1)
    return best / window


def timeline(times: Iterable[float], start: float, bucket: float = 1.0) -> list[int]:
    """Events per ``bucket`` seconds from ``start`` on."""
    counts: list[int] = []
    for t in times:
        if t < start:
            continue
        index = int((t - start) / bucket)
        counts += [0] * (index + 1 - len(counts))
        counts[index] += 1
    return counts


@dataclass
class Figures:
    emails: int
    statuses: dict[str, int]
    delivered: int  # rows sent
    copies: int  # messages at the SMTP server for these rows
    duplicates: int  # copies beyond a row's first
    duplicate_rows: int
    duplicates_same_id: int  # duplicates carrying their first copy's Message-ID
    lost: int
    attempts: int
    uncertain: int  # attempts recorded as uncertain
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "emails": self.emails,
            "delivered": self.delivered,
            "duplicates": self.duplicates,
            "dup_same_msgid": self.duplicates_same_id,
            "lost": self.lost,
            "attempts": self.attempts,
            "uncertain": self.uncertain,
            "statuses": dict(sorted(self.statuses.items())),
        }


def check_history(settings: Settings) -> list[str]:
    """Every row's attempts and status changes tell one consistent story.

    - status changes chain (each starts where the previous ended, the last
      ends at the row's status); at most one change to ``sent``, none after it;
    - every attempt charged to a finished row has a record;
    - a second ``sent`` attempt, or any attempt after a ``sent`` one, only for
      a row with an ``uncertain`` attempt (the sweeper or a lost connection
      said the outcome was unknown).
    """
    problems: list[str] = []
    rows = {
        r[0]: (r[1], r[2]) for r in query(settings, "SELECT id, status, attempts FROM email_outbox")
    }
    events: dict[int, list[tuple[str | None, str]]] = defaultdict(list)
    for outbox_id, from_status, to_status in query(
        settings, "SELECT outbox_id, from_status, to_status FROM email_event ORDER BY id"
    ):
        events[outbox_id].append((from_status, to_status))
    attempts: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for outbox_id, number, verdict in query(
        settings, "SELECT outbox_id, attempt, verdict FROM email_attempt ORDER BY id"
    ):
        attempts[outbox_id].append((number, verdict))
    for outbox_id, (status, charged) in rows.items():
        chain = events.get(outbox_id, [])
        previous = "pending"
        for from_status, to_status in chain:
            if from_status != previous:
                problems.append(
                    f"row {outbox_id}: change {from_status}->{to_status} after {previous}"
                )
            previous = to_status
        if previous != status:
            problems.append(f"row {outbox_id}: history ends at {previous}, row is {status}")
        to_sent = [i for i, (_, to_status) in enumerate(chain) if to_status == "sent"]
        if len(to_sent) > 1 or (to_sent and to_sent[0] != len(chain) - 1):
            problems.append(f"row {outbox_id}: changes after sent: {chain}")
        tried = attempts.get(outbox_id, [])
        verdicts = [v for _, v in tried]
        numbers = sorted({n for n, _ in tried})
        if status in FINAL and numbers != list(range(1, charged + 1)):
            problems.append(f"row {outbox_id}: {charged} attempts charged, records for {numbers}")
        if "sent" in verdicts and "uncertain" not in verdicts:
            first_sent = verdicts.index("sent")
            if verdicts.count("sent") > 1 or first_sent != len(verdicts) - 1:
                problems.append(f"row {outbox_id}: attempts after a sent one: {verdicts}")
    return problems


def assert_no_loss(
    settings: Settings,
    sinks: SmtpSink | Sequence[SmtpSink],
    *,
    expect: Collection[str] = ("sent",),
    allow_duplicates: bool = True,
) -> Figures:
    """Check the end state against the SMTP server's record; return the figures.

    ``expect`` holds the statuses a row may end in. A row ``sent`` must have
    reached the server, with its provider id the queue id of one of its copies.
    Every copy must carry the row's stored Message-ID; a duplicate must be
    explained by an ``uncertain`` attempt. Raises :class:`CoreBug` when the
    promise is broken.
    """
    sinks = [sinks] if isinstance(sinks, SmtpSink) else list(sinks)
    rows = query(
        settings,
        "SELECT id, recipient, message_id, status, provider_message_id FROM email_outbox",
    )
    by_recipient = {r[1].lower(): r for r in rows}
    copies: dict[int, list[tuple[str | None, str]]] = defaultdict(list)
    strays: list[str] = []
    for index, sink in enumerate(sinks):
        with sink._lock:
            received = list(sink.messages)
        for position, message in enumerate(received):
            queue_id = f"Q{position + 1:08d}"
            for recipient in message.recipients:
                row = by_recipient.get(recipient.lower())
                if row is None:
                    strays.append(recipient)
                    continue
                copies[row[0]].append((message.message_id, f"{index}:{queue_id}"))
    uncertain_rows = {
        r[0]
        for r in query(settings, "SELECT outbox_id FROM email_attempt WHERE verdict = 'uncertain'")
    }
    problems: list[str] = [f"stray message to {s}" for s in strays[:5]]
    lost = 0
    duplicates = same_id = duplicate_rows = 0
    for row_id, recipient, stored_id, status, provider_id in rows:
        got = copies.get(row_id, [])
        if status not in expect:
            lost += 1
            problems.append(f"row {row_id} ({recipient}) ended {status}, expected {sorted(expect)}")
        if status == "sent" and not got:
            lost += 1
            problems.append(f"row {row_id} ({recipient}) is sent but never reached the server")
        queue_ids = {q.split(":", 1)[1] for _, q in got}
        if status == "sent" and got and len(sinks) == 1 and provider_id not in queue_ids:
            problems.append(f"row {row_id}: provider id {provider_id} is none of its copies")
        for message_id, _ in got:
            if message_id != stored_id:
                problems.append(
                    f"row {row_id}: copy with Message-ID {message_id}, stored {stored_id}"
                )
        if len(got) > 1:
            duplicate_rows += 1
            duplicates += len(got) - 1
            same_id += sum(1 for m, _ in got[1:] if m == got[0][0])
            if row_id not in uncertain_rows:
                problems.append(
                    f"row {row_id}: {len(got)} copies, no uncertain attempt explains it"
                )
    if not allow_duplicates and duplicates:
        problems.append(f"{duplicates} duplicates where none may happen")
    problems += check_history(settings)
    counts = Counter(r[3] for r in rows)
    attempt_counts = dict(query(settings, "SELECT verdict, count(*) FROM email_attempt GROUP BY 1"))
    figures = Figures(
        emails=len(rows),
        statuses=dict(counts),
        delivered=counts.get("sent", 0),
        copies=sum(len(c) for c in copies.values()),
        duplicates=duplicates,
        duplicate_rows=duplicate_rows,
        duplicates_same_id=same_id,
        lost=lost,
        attempts=sum(attempt_counts.values()),
        uncertain=attempt_counts.get("uncertain", 0),
        problems=problems,
    )
    if problems:
        problems += _story_of_a_duplicate(settings, copies, uncertain_rows)
        shown = "\n  ".join(problems[:20] + problems[-3:])
        raise CoreBug(f"{len(problems)} broken promises ({figures.as_dict()}):\n  {shown}")
    return figures


def _story_of_a_duplicate(
    settings: Settings, copies: dict[int, list[tuple[str | None, str]]], explained: set[int]
) -> list[str]:
    """The attempts and status changes of one unexplained duplicate, for the failure message."""
    for row_id, got in sorted(copies.items()):
        if len(got) > 1 and row_id not in explained:
            attempts = query(
                settings,
                "SELECT attempt, verdict, stage, reply_code, worker, attempted_at::time"
                " FROM email_attempt WHERE outbox_id = %s ORDER BY id",
                row_id,
            )
            events = query(
                settings,
                "SELECT from_status, to_status, reason, actor, at::time FROM email_event"
                " WHERE outbox_id = %s ORDER BY id",
                row_id,
            )
            return [
                f"row {row_id} copies (message id, queue id): {got}",
                f"row {row_id} attempts: {attempts}",
                f"row {row_id} events: {events}",
            ]
    return []


def process_tree(pids: list[int]) -> set[int]:
    """The processes ``pids`` and all their descendants: a failover must leave
    the same ones running (no process restarted to get over it)."""
    found = set(pids)
    for pid in pids:
        found |= {child.pid for child in psutil.Process(pid).children(recursive=True)}
    return found


def broker_outage_lines(log: Path) -> tuple[int, int, int]:
    """Lines of a process's log saying the broker is down, back, and Dramatiq's
    own retry lines."""
    text = log.read_text(errors="replace")
    down = text.count("the broker is down")
    back = text.count("the broker is back")
    return down, back, text.count("Consumer encountered a connection error")


def report(scenario: str, **figures: Any) -> None:
    """Print a scenario's figures (seen with ``pytest -s``) and keep them for the summary."""
    flat: dict[str, Any] = {}
    for name, value in figures.items():
        if isinstance(value, Figures):
            flat.update(value.as_dict())
        elif isinstance(value, float):
            flat[name] = round(value, 2)
        else:
            flat[name] = value
    RESULTS.append((scenario, flat))
    print(f"\n[faults] {scenario}: " + ", ".join(f"{k}={v}" for k, v in flat.items()))
