"""Pacing inside delivery: real Postgres, Redis and SMTP server, one process."""

from __future__ import annotations

import dataclasses
import threading
import time

from outbox.config import Settings
from outbox.pacing.pacer import pacer_for
from outbox.testing.sink import ACCEPT, Behaviour
from tests.integration.helpers import (
    add_login,
    add_newsletter,
    harness,
    most_in_one_second,
    query,
    statuses,
)


def paced(settings: Settings, **changes: object) -> Settings:
    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]


def test_a_receiver_rate_holds_and_pacing_costs_no_attempt(settings: Settings) -> None:
    settings = paced(settings, rate_limits="gmail.com=10/s", pace_wait_bulk=0.05)
    add_newsletter(settings, 30, domain="googlemail.com")
    add_newsletter(settings, 30, prefix="other", domain="example.org")
    with harness(settings) as (h, sink):
        h.run(timeout=30)
    assert statuses(settings) == {"sent": 60}
    to_google = [m.at for m in sink.messages if m.recipients[0].endswith("@googlemail.com")]
    to_other = [m.at for m in sink.messages if m.recipients[0].endswith("@example.org")]
    assert most_in_one_second(to_google) <= 11  # 10/s, and the edges of a window
    assert max(to_google) - min(to_google) >= 2.5  # 30 sends at 10/s: about 2.9 s
    assert max(to_other) - min(to_other) < 2.0  # the unlimited receiver is not held up
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


def test_a_login_code_is_not_starved_by_a_newsletter_to_the_same_receiver(
    settings: Settings,
) -> None:
    settings = paced(settings, rate_limits="gmail.com=5/s", pace_wait_bulk=0.1)
    add_newsletter(settings, 40, domain="gmail.com")  # 8 s of the receiver's budget
    finished = threading.Event()
    committed: list[float] = []

    def login_later() -> None:
        time.sleep(1.5)  # the newsletter has used the budget and booked the next seconds
        add_login(settings, "login-paced", "alice@gmail.com")
        committed.append(time.monotonic())
        finished.set()

    with harness(settings) as (h, sink):
        thread = threading.Thread(target=login_later)
        thread.start()
        h.run(timeout=30)
        thread.join()
    assert statuses(settings) == {"sent": 41}
    login = next(m for m in sink.messages if m.recipients == ["alice@gmail.com"])
    newsletter_times = [m.at for m in sink.messages if m is not login]
    assert login.at - committed[0] < 1.0  # bulk waits at most 0.1 s + one interval ahead of it
    assert max(newsletter_times) > login.at + 3  # while most of the newsletter still waited
    assert most_in_one_second([m.at for m in sink.messages]) <= 6


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
        h.run(timeout=30)
        pacer = h.delivery.pacer
        assert pacer is not None
        factor = pacer.factor("gmail.com")
    assert statuses(settings) == {"sent": 10}
    assert len(refused) == 3
    assert 0.4 < factor < 0.6  # halved once: the three 421s came within the cool-down
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
