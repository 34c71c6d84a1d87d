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


# Two hours of outage at 1/600 of real time, under the shipped retry policy scaled
# the same way (30 s base, 6 h cap, 8 attempts, 24 h age): counted as attempts,
# refusals would have left every row dead within the first ~13 s.
SCALE = 600
LONG_OUTAGE = 2 * 3600 / SCALE


def _breaker(settings: Settings) -> str | None:
    with psycopg.connect(settings.database_url) as conn:
        row = conn.execute("SELECT state FROM outbox_breaker").fetchone()
    return str(row[0]) if row else None


def _lines(rig: Rig) -> dict[str, int]:
    return {
        log.name: len(log.read_text(errors="replace").splitlines())
        for log in rig.log_dir.glob("*.log")
    }


def test_smtp_relay_refusing_connections_then_back_backlog_drains(
    fault_settings: Settings, rig: Rig
) -> None:
    settings = dataclasses.replace(
        fault_settings,
        retry_base_seconds=30 / SCALE,
        retry_cap_seconds=6 * 3600 / SCALE,
        max_attempts=8,
        max_age_seconds=24 * 3600 / SCALE,
        outage_probe_seconds=0.5,
        smtp_connect_timeout=1.0,
        max_in_flight=2000,
        claim_batch=500,
    )
    n, codes = scaled(300), scaled(20)
    add_emails(settings, n, prefix="c")
    add_emails(settings, codes, prefix="hi", priority="high")
    sink = rig.sink(port=free_port(), start=False)  # nothing listens: connection refused
    p = rig.pipeline(child_env(settings, sink.url), high=(1, 4), bulk=(1, 8))
    processes = dict(p.procs)
    wait_until(lambda: _breaker(settings) == "open", timeout(30), "the breaker opens")
    started = time.monotonic()
    lines_before = _lines(rig)
    max_pending = 0
    while time.monotonic() - started < LONG_OUTAGE:
        max_pending = max(max_pending, statuses(settings).get("pending", 0))
        time.sleep(0.2)
    lines_during = {k: v - lines_before.get(k, 0) for k, v in _lines(rig).items()}
    outage = time.monotonic() - started  # LONG_OUTAGE, or more on a loaded machine
    refused = _attempts(settings)
    assert not statuses(settings).get("sent"), "sent while the relay was down?"
    assert not statuses(settings).get("dead"), "dead during the outage"
    sink.start()
    recovered = time.monotonic()
    drained = wait_final(settings, n + codes, timeout=timeout(60))
    figures = assert_no_loss(settings, sink)
    with psycopg.connect(settings.database_url) as conn:
        down = conn.execute(
            "SELECT count(*) FROM email_event WHERE reason LIKE 'transport smtp down%%'"
            " OR reason LIKE 'not an attempt%%'"
        ).fetchone()
    exited = {name: proc.poll() for name, proc in processes.items() if proc.poll() is not None}
    logs = {log.name: log.read_text(errors="replace") for log in rig.log_dir.glob("*.log")}
    p.stop()
    times = [m.at for m in sink.messages]
    lines_per_s = max(lines_during.values()) / outage
    report(
        "5a SMTP relay refusing connections for 2 h (at 1/600), then back",
        figures=figures,
        outage_s=outage,
        max_pending=max_pending,
        attempts_during_outage=refused,
        returns_without_attempt=down[0] if down else 0,
        log_lines_during_outage=lines_during,
        log_lines_per_s_per_process_max=lines_per_s,
        first_send_after_s=min(times) - recovered,
        drain_after_recovery_s=drained,
        sends_per_s=timeline(times, recovered),
    )
    assert figures.statuses == {"sent": n + codes}, "every email sent, none dead"
    assert refused == 0, "refused connections were counted as attempts"
    assert max_pending > 0
    assert not exited, f"processes exited: {exited}"
    assert lines_per_s <= 1, f"log lines during the outage: {lines_during}"
    # Told once that it is down and once that it is back, by one of the processes.
    told_down = sum(text.count("transport smtp is down") for text in logs.values())
    told_back = sum(text.count("transport smtp is back") for text in logs.values())
    assert (told_down, told_back) == (1, 1), (told_down, told_back)


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
