"""Pacing inside delivery: real Postgres, Redis and SMTP server, one process."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from outbox.config import Settings
from outbox.pacing.pacer import pacer_for
from outbox.testing.sink import ACCEPT, Behaviour
from tests.integration.helpers import (
    add_login,
    add_newsletter,
    harness,
    median_gap,
    query,
    statuses,
)


def paced(settings: Settings, **changes: object) -> Settings:
    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_receiver_rate_holds_and_pacing_costs_no_attempt(settings: Settings) -> None:
    settings = paced(settings, rate_limits="gmail.com=10/s", pace_wait_bulk=0.05)
    add_newsletter(settings, 30, domain="googlemail.com")
    add_newsletter(settings, 30, prefix="other", domain="example.org")
    with harness(settings) as (h, sink):
        h.run(timeout=30)
    assert statuses(settings) == {"sent": 60}
    to_google = [m.at for m in sink.messages if m.recipients[0].endswith("@googlemail.com")]
    to_other = [m.at for m in sink.messages if m.recipients[0].endswith("@example.org")]
    assert max(to_google) - min(to_google) >= 2.5  # 30 sends at 10/s: about 2.9 s
    assert median_gap(to_google) >= 0.75 / 10  # most of them one interval apart
    assert len(to_other) == 30
    # The unlimited receiver is not held up: none of its rows went back for a slot.
    assert paced_back(settings, "%@example.org") == 0
    # Each row was sent on its first attempt: going back for the rate was not one.
    assert query(settings, "SELECT DISTINCT attempt FROM email_attempt") == [(1,)]
    assert query(settings, "SELECT DISTINCT attempts FROM email_outbox") == [(1,)]
    deferrals = query(
        settings,
        "SELECT count(*), count(DISTINCT outbox_id) FROM email_event"
        " WHERE reason = 'paced: gmail.com at 10/1s' AND to_status = 'pending'",
    )
    assert deferrals[0][0] > 0
    assert deferrals[0][1] <= 30


def paced_back(settings: Settings, recipients: str) -> int:
    """Times rows to recipients LIKE ``recipients`` went back to wait for their slot."""
    return query(
        settings,
        "SELECT count(*) FROM email_event e JOIN email_outbox o ON o.id = e.outbox_id"
        " WHERE o.recipient LIKE %s AND e.reason LIKE 'paced:%%'",
        recipients,
    )[0][0]


@pytest.mark.slow
def test_a_login_code_is_not_starved_by_a_newsletter_to_the_same_receiver(
    settings: Settings,
) -> None:
    settings = paced(settings, rate_limits="gmail.com=5/s", pace_wait_bulk=0.1)
    add_newsletter(settings, 40, domain="gmail.com")  # 8 s of the receiver's budget
    finished = threading.Event()

    def login_later() -> None:
        time.sleep(1.5)  # the newsletter has used the budget and booked the next seconds
        add_login(settings, "login-paced", "alice@gmail.com")
        finished.set()

    with harness(settings) as (h, sink):
        thread = threading.Thread(target=login_later)
        thread.start()
        h.run(timeout=30)
        thread.join()
    assert statuses(settings) == {"sent": 41}
    login = next(m for m in sink.messages if m.recipients == ["alice@gmail.com"])
    newsletter_times = [m.at for m in sink.messages if m is not login]
    # Bulk books at most 0.1 s ahead: the login code took the next slot, never went
    # back to wait, and most of the newsletter was still waiting behind it.
    assert paced_back(settings, "alice@gmail.com") == 0
    assert sum(1 for t in newsletter_times if t > login.at) >= 10
    assert median_gap([m.at for m in sink.messages]) >= 0.75 / 5


def test_throttling_replies_lower_the_pace_and_rows_still_go_out(settings: Settings) -> None:
    settings = paced(settings, rate_limits="gmail.com=50/s")
    refused: list[str] = []

    def behaviour(address: str) -> Behaviour:
        if len(refused) < 3:
            refused.append(address)
            return Behaviour(rcpt_reply="421 4.7.28 Unusual rate of mail from your IP")
        return ACCEPT

    add_newsletter(settings, 10, domain="gmail.com")
    with harness(settings, behaviour) as (h, sink):
        started = time.monotonic()
        h.run(timeout=30)
        pacer = h.delivery.pacer
        assert pacer is not None
        factor = pacer.factor("gmail.com")
        since_cut = time.monotonic() - started  # at most: the cut came during the run
    assert statuses(settings) == {"sent": 10}
    assert len(refused) == 3
    # Halved once (the three 421s came within the cool-down), then growing back over
    # OUTBOX_PACE_RECOVERY_SECONDS for as long as the run has lasted.
    recovered = 0.5 * since_cut / settings.pace_recovery_seconds
    assert 0.5 <= factor <= 0.5 + recovered + 1e-6
    assert len(sink.messages) == 10
    retried = query(settings, "SELECT count(*) FROM email_attempt WHERE reply_code = 421")
    assert retried == [(3,)]


def test_without_rates_nothing_is_paced(settings: Settings) -> None:
    assert pacer_for(settings) is None
    add_newsletter(settings, 20, domain="gmail.com")
    with harness(settings) as (h, _):
        assert h.delivery.pacer is None
        h.run()
    assert statuses(settings) == {"sent": 20}
    assert query(settings, "SELECT count(*) FROM email_event WHERE reason LIKE 'paced%%'") == [(0,)]
