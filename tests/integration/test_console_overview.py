"""The overview tells the truth: its counts agree with `outbox status --json` and
the database, hard bounces refused at RCPT TO count, health is what `outbox
status` says, and the last day is charted per template and tag."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator

import psycopg
import pytest

from outbox import cancel, enqueue
from outbox.config import Settings
from outbox.db.store import overview_reads
from outbox.testing.sink import ACCEPT, Behaviour
from outbox.web.console_overview import rates
from tests.integration.console_run import VIEWER, Running, console_settings, signed_in, web
from tests.integration.helpers import LOGIN, NEWS, harness, query
from tests.integration.test_cli import outbox


@pytest.fixture
def console(settings: Settings) -> Settings:
    return console_settings(settings, max_attempts=1)


@pytest.fixture
def running(console: Settings) -> Iterator[Running]:
    with web(console) as r:
        yield r


def fill(settings: Settings) -> None:
    """Emails in most statuses: sent, failed (a 550 5.1.1 at RCPT TO), cancelled,
    scheduled, pending, suppressed."""
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    with psycopg.connect(settings.database_url) as conn:
        codes = [(f"code-{i}", f"c{i}@example.com") for i in range(3)]
        for key, to in [*codes, ("gone-1", "gone@example.com")]:
            enqueue(conn, idempotency_key=key, to=to, template="login_code", params=LOGIN,
                    tags=["login"], settings=settings)  # fmt: skip
        for i in range(2):
            enqueue(conn, idempotency_key=f"nl-{i}", to=f"r{i}@example.com", params=NEWS,
                    template="newsletter", tags=["nl", "spring"], settings=settings)  # fmt: skip
        conn.commit()

    def behaviour(recipient: str) -> Behaviour:
        if recipient.startswith("gone@"):
            return Behaviour(rcpt_reply="550 5.1.1 no such user")
        return ACCEPT

    with harness(settings, behaviour) as (h, _):
        h.run()
    with psycopg.connect(settings.database_url) as conn:
        enqueue(conn, idempotency_key="later-1", to="l1@example.com", template="login_code",
                params=LOGIN, send_at=later, settings=settings)  # fmt: skip
        enqueue(conn, idempotency_key="later-2", to="l2@example.com", template="login_code",
                params=LOGIN, send_at=later, settings=settings)  # fmt: skip
        enqueue(conn, idempotency_key="now-1", to="n1@example.com", template="newsletter",
                params=NEWS, settings=settings)  # fmt: skip
        enqueue(conn, idempotency_key="again", to="gone@example.com", template="newsletter",
                params=NEWS, settings=settings)  # fmt: skip  # suppressed at enqueue
        assert cancel(conn, "later-2")
        conn.commit()


def shown(page: str, cell: str) -> int:
    found = re.search(rf'id="{cell}"[^>]*>([0-9]+)', page)
    assert found, f"no {cell} on the overview"
    return int(found.group(1))


def test_the_overview_agrees_with_outbox_status_and_the_database(
    console: Settings, running: Running
) -> None:
    fill(console)
    page = signed_in(running, VIEWER).get("/console/").text
    status = json.loads(outbox(console, "status", "--json").stdout)
    from_status: dict[tuple[str, str], int] = {
        (c["status"], c["priority"]): c["count"] for c in status["counts"]
    }
    in_database = {
        (s, p): n
        for s, p, n in query(
            console,
            "SELECT CASE WHEN status = 'pending' AND send_at > now() THEN 'scheduled'"
            " ELSE status END, priority, count(*) FROM email_outbox GROUP BY 1, 2",
        )
    }
    assert from_status == in_database
    assert {s for s, _ in in_database} >= {"sent", "failed", "cancelled", "scheduled", "pending"}
    for status_name in ("scheduled", "pending", "queued", "sending", "sent", "failed", "dead",
                        "held", "suppressed", "cancelled"):  # fmt: skip
        for priority in ("high", "bulk"):
            cell = f"count-{status_name}-{priority}"
            assert shown(page, cell) == in_database.get((status_name, priority), 0), cell
    assert "Every count is exact." in page
    # The 550 5.1.1 at RCPT TO made a hard_bounce suppression: one hard bounce.
    assert query(console, "SELECT reason FROM email_suppression") == [("hard_bounce",)]
    assert shown(page, "rate-hard-bounces") == 1
    assert shown(page, "sent-24h") == in_database[("sent", "high")] + in_database[("sent", "bulk")]
    # Health as `outbox status` has it: the transport's last send, not "no send seen yet".
    assert "no send seen yet" not in page
    assert re.search(r"transport smtp</td><td>up; last sent [0-9.]+ s ago", page)
    text = outbox(console, "status").stdout
    assert re.search(r"transport  smtp up \(last sent [0-9.]+s ago\)", text), text
    # The last day, per template and per tag.
    day = page.split('id="day"')[1]
    assert re.search(r"<td class=\"time\">login_code</td><td class=\"num\">3</td>"
                     r"<td class=\"num\">1</td>", day)  # fmt: skip
    assert re.search(r"<td class=\"time\">spring</td><td class=\"num\">2</td>", day)
    assert day.count("<svg") >= 5


def test_a_large_history_is_an_estimate_and_said_so(console: Settings) -> None:
    fill(console)
    with psycopg.connect(console.database_url) as conn:
        conn.execute("ANALYZE email_outbox")
        exact = overview_reads.status_counts(conn)
        estimated = overview_reads.status_counts(conn, exact_up_to=0)
    assert exact.settled_exact
    assert not exact.estimates
    assert not estimated.settled_exact
    sent = sum(exact.counts["sent"].values())
    assert estimated.estimates["sent"] == sent  # ANALYZE read every row of so small a table
    assert "sent" not in estimated.counts
    assert estimated.counts["failed"] == exact.counts["failed"]  # the live outbox stays exact


@pytest.mark.parametrize(
    ("feedback", "sent", "states"),
    [
        ({}, 0, ["ok", "ok"]),
        ({"hard": 1}, 100, ["ok", "ok"]),
        ({"hard": 2}, 100, ["over", "ok"]),
        ({"complaint": 1}, 1000, ["ok", "warn"]),
        ({"complaint": 3}, 1000, ["ok", "over"]),
        ({"complaint": 1}, 0, ["ok", "over"]),
    ],
)
def test_rates_are_measured_against_the_providers_lines(
    feedback: dict[str, int], sent: int, states: list[str]
) -> None:
    assert [r.state for r in rates(feedback, sent)] == states
