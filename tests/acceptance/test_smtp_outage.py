"""Scenario 5: the SMTP relay down for a while, then back.

Part one: nothing listens on the relay's port (connection refused). Every
attempt is refused, rows go back to ``pending`` with backoff, the backlog
grows; then the SMTP server starts on that port and the backlog must drain,
nothing lost.

Part two: full jitter should spread the retry wave that hits a relay coming
back. The relay stays up but refuses every message with a 4yz (a queue that
cannot take mail), so that failures are cheap and the whole backlog is in its
backoff; then it accepts again. The same outage runs twice, first with
``OUTBOX_RETRY_JITTER=none`` (the whole backoff window every time) as the
baseline, then with full jitter, and the peak sends per second after recovery
are compared.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import psycopg

from outbox.config import Settings
from outbox.testing.sink import ACCEPT, Behaviour
from tests.acceptance.checks import (
    add_emails,
    assert_no_loss,
    peak_rate,
    report,
    statuses,
    timeline,
    wait_final,
    wait_until,
)
from tests.acceptance.conftest import Rig, child_env, scaled, timeout
from tests.acceptance.servers import free_port

OUTAGE = 4.0
REFUSE = Behaviour(rcpt_reply="451 4.3.0 Error: queue file write error")


def _attempts(settings: Settings) -> int:
    with psycopg.connect(settings.database_url) as conn:
        row = conn.execute("SELECT count(*) FROM email_attempt").fetchone()
    return int(row[0]) if row else 0


def _clear(settings: Settings) -> None:
    with psycopg.connect(settings.database_url) as conn:
        conn.execute(
            "TRUNCATE email_outbox, email_attempt, email_event, outbox_process, outbox_breaker"
            " RESTART IDENTITY"
        )


def _settings(fault_settings: Settings) -> Settings:
    return dataclasses.replace(
        fault_settings,
        retry_base_seconds=2.0,
        retry_cap_seconds=6.0,
        max_attempts=100,
        stuck_seconds=5.0,
        smtp_connect_timeout=1.0,
        max_in_flight=2000,
        claim_batch=500,
    )


def test_smtp_relay_refusing_connections_then_back_backlog_drains(
    fault_settings: Settings, rig: Rig
) -> None:
    settings = _settings(fault_settings)
    n = scaled(200)
    add_emails(settings, n, prefix="c")
    sink = rig.sink(port=free_port(), start=False)  # nothing listens: connection refused
    p = rig.pipeline(child_env(settings, sink.url), high=(0, 0), bulk=(1, 8))
    wait_until(lambda: _attempts(settings) > 0, timeout(30), "first refusal")
    started = time.monotonic()
    max_pending = 0
    while time.monotonic() - started < OUTAGE:
        max_pending = max(max_pending, statuses(settings).get("pending", 0))
        time.sleep(0.2)
    refused = _attempts(settings)
    assert not statuses(settings).get("sent"), "sent while the relay was down?"
    sink.start()
    recovered = time.monotonic()
    drained = wait_final(settings, n, timeout=timeout(60))
    p.stop()
    figures = assert_no_loss(settings, sink)
    times = [m.at for m in sink.messages]
    report(
        "5a SMTP relay down (connection refused), then back",
        figures=figures,
        outage_s=OUTAGE,
        max_pending=max_pending,
        refused_attempts=refused,
        refused_attempts_per_s=refused / (recovered - started),
        first_send_after_s=min(times) - recovered,
        drain_after_recovery_s=drained,
        sends_per_s=timeline(times, recovered),
    )
    assert max_pending > 0


def _wave(settings: Settings, rig: Rig, *, jitter: str, n: int) -> dict[str, Any]:
    add_emails(settings, n, prefix=jitter)
    down = True
    sink = rig.sink(lambda _a: REFUSE if down else ACCEPT)
    env = child_env(dataclasses.replace(settings, retry_jitter=jitter), sink.url)
    p = rig.pipeline(env, high=(0, 0), bulk=(1, 8))
    # The outage counts from the moment every row has been refused once.
    wait_until(lambda: _attempts(settings) >= n, timeout(60), "every row refused once")
    time.sleep(OUTAGE)
    refused = _attempts(settings)
    down = False
    recovered = time.monotonic()
    drained = wait_final(settings, n, timeout=timeout(60))
    p.stop()
    figures = assert_no_loss(settings, sink)
    times = [m.at for m in sink.messages]
    return {
        "figures": figures,
        "jitter": jitter,
        "refused_attempts": refused,
        "peak_sends_per_s": peak_rate(times, 1.0),
        "peak_sends_per_250ms": peak_rate(times, 0.25) / 4,
        "drain_after_recovery_s": drained,
        "sends_per_s": timeline(times, recovered),
    }


def test_full_jitter_spreads_the_retry_wave_after_an_outage(
    fault_settings: Settings, rig: Rig
) -> None:
    settings = _settings(fault_settings)
    n = scaled(400)
    baseline = _wave(settings, rig, jitter="none", n=n)
    _clear(settings)
    jittered = _wave(settings, rig, jitter="full", n=n)
    report("5b retry wave after a 4yz outage, no jitter (baseline)", **baseline)
    report(
        "5b retry wave after a 4yz outage, full jitter",
        **jittered,
        peak_vs_baseline=jittered["peak_sends_per_s"] / baseline["peak_sends_per_s"],
    )
    # The point of jitter: the relay coming back is not hit by the whole wave at once.
    assert jittered["peak_sends_per_s"] < baseline["peak_sends_per_s"]
