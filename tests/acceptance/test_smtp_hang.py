"""Scenario 6: SMTP relays that accept TCP and never answer, or answer a byte a second.

A :class:`~outbox.testing.sink.SlowLink` sits in front of a healthy SMTP server. While
it misbehaves, the connect and command timeouts must free every worker thread
in about the timeout: no row stays ``sending`` long enough for the sweeper,
every send ends as a retry, or (silent at the greeting: our own path failing)
back in ``pending`` without an attempt. When the link turns
healthy again the backlog drains with nothing lost.
"""

from __future__ import annotations

import dataclasses
import time

from outbox.config import Settings
from tests.acceptance.checks import (
    CoreBug,
    add_emails,
    assert_no_loss,
    query,
    report,
    statuses,
    wait_final,
    wait_until,
)
from tests.acceptance.conftest import Rig, child_env, scaled, timeout

PHASE = 7.0  # seconds the link misbehaves: longer than the sweeper's threshold
TIMEOUT = 1.5  # OUTBOX_SMTP_CONNECT_TIMEOUT and OUTBOX_SMTP_COMMAND_TIMEOUT
STUCK = 5.0  # OUTBOX_STUCK_SECONDS: a process silent this long is presumed dead
THREADS = 4 + 8


class SlowReplyNotBounded(CoreBug):
    """A reply arriving a byte at a time holds a worker far past the command timeout."""


def _sending_stints(settings: Settings, since_epoch: float) -> list[float]:
    """How long each row stayed ``sending``, for stints that began after ``since_epoch``."""
    rows = query(
        settings,
        "SELECT extract(epoch FROM coalesce(e2.at, now()) - e1.at)::float8 "
        "FROM email_event e1 LEFT JOIN LATERAL ("
        "  SELECT at FROM email_event e2 WHERE e2.outbox_id = e1.outbox_id AND e2.id > e1.id "
        "  ORDER BY e2.id LIMIT 1) e2 ON true "
        "WHERE e1.to_status = 'sending' AND e1.at >= to_timestamp(%s)",
        since_epoch,
    )
    return [r[0] for r in rows]


def _phase_figures(settings: Settings, since_epoch: float) -> dict[str, object]:
    attempts = query(
        settings,
        "SELECT verdict, coalesce(stage, '-'), coalesce(reply_text, '-'), count(*),"
        " max(duration_ms) FROM email_attempt"
        " WHERE attempted_at >= to_timestamp(%s) GROUP BY 1, 2, 3 ORDER BY 4 DESC",
        since_epoch,
    )
    stints = _sending_stints(settings, since_epoch)
    # A relay silent at the greeting fails our own path: the row goes back without an
    # attempt, and once the shared breaker is open the others follow it untried.
    returned = query(
        settings,
        "SELECT count(*) FROM email_event WHERE from_status = 'sending' AND to_status = 'pending'"
        " AND reason LIKE 'not an attempt%%' AND at >= to_timestamp(%s)",
        since_epoch,
    )[0][0]
    breaker = query(settings, "SELECT state FROM outbox_breaker")
    return {
        "sends_ended": sum(a[3] for a in attempts) + returned,
        "returned_without_attempt": returned,
        "breaker": breaker[0][0] if breaker else "never written",
        "attempts_in_phase": sum(a[3] for a in attempts),
        "attempt_kinds": [f"{a[0]}/{a[1]}/{a[2][:40]}x{a[3]}" for a in attempts],
        "max_attempt_ms": max((a[4] or 0.0 for a in attempts), default=0.0),
        # Nothing answers within the phase: every attempt must end by a timeout.
        "attempts_not_timed_out": sum(a[3] for a in attempts if "timeout" not in a[2]),
        "max_sending_s": max(stints, default=0.0),
        "swept_as_uncertain": sum(a[3] for a in attempts if a[0] == "uncertain"),
    }


def _run(settings: Settings, rig: Rig, mode: str) -> tuple[dict[str, object], object]:
    total = scaled(300) + scaled(50)
    add_emails(settings, scaled(300), prefix="nl")
    add_emails(settings, scaled(50), prefix="hi", priority="high")
    sink = rig.sink()
    link = rig.link(sink.port, mode=mode, byte_interval=1.0)
    rig.pipeline(child_env(settings, link.url), high=(1, 4), bulk=(1, 8))
    # The phase counts from when both pools run (their first heartbeat): a loaded
    # machine can take seconds to boot them.
    wait_until(
        lambda: (
            query(settings, "SELECT count(*) FROM outbox_process WHERE kind = 'worker'")[0][0] >= 2
        ),
        timeout(60),
        "both worker pools running",
    )
    since = time.time()
    time.sleep(PHASE)
    figures = _phase_figures(settings, since)
    in_flight = statuses(settings)
    link.mode = "pass"
    healed = time.monotonic()
    drained = wait_final(settings, total, timeout=timeout(60))
    result = assert_no_loss(settings, sink)
    figures.update(
        connections=dict(link.accepted),
        statuses_at_phase_end=in_flight,
        drain_after_heal_s=time.monotonic() - healed,
        drain_s=drained,
    )
    return figures, result


def _settings(fault_settings: Settings) -> Settings:
    return dataclasses.replace(
        fault_settings,
        smtp_connect_timeout=TIMEOUT,
        smtp_command_timeout=TIMEOUT,
        stuck_seconds=STUCK,
    )


def _violations(figures: dict[str, object]) -> list[str]:
    """What a hung relay must not do to the workers.

    Sends end by their timeouts, and the sweeper never calls a live worker's row
    abandoned.
    """
    found = []
    # Enough sends ended by their timeout to tell the path is down (the breaker then
    # frees every thread), or, on a relay that does answer, every thread's sends ended.
    needed = Settings.outage_threshold if figures["breaker"] == "open" else THREADS
    if figures["sends_ended"] < needed:  # type: ignore[operator]
        found.append(f"only {figures['sends_ended']} sends ended in {PHASE}s")
    # How long an attempt took is reported, not bounded (a loaded machine stretches
    # it); what ended it is checked: its timeout, as nothing answered.
    if figures["attempts_not_timed_out"]:
        found.append(f"{figures['attempts_not_timed_out']} attempts ended otherwise")
    # How long a row stays `sending` is reported, not bounded: the sweeper only takes
    # rows of a process that stopped beating, so a live worker's slow row is never
    # taken for an abandoned one (the check below).
    if figures["swept_as_uncertain"]:
        found.append(f"{figures['swept_as_uncertain']} rows swept as uncertain")
    return found


def test_relay_that_never_answers_frees_workers_by_the_timeout(
    fault_settings: Settings, rig: Rig
) -> None:
    settings = _settings(fault_settings)
    figures, result = _run(settings, rig, "silent")
    report("6a SMTP relay accepts TCP, never answers", figures=result, **figures)
    assert not _violations(figures), figures


def test_relay_answering_a_byte_a_second_frees_workers_by_the_timeout(
    fault_settings: Settings, rig: Rig
) -> None:
    settings = _settings(fault_settings)
    figures, result = _run(settings, rig, "dribble")
    report("6b SMTP relay answers one byte a second", figures=result, **figures)
    # Each byte resets a socket timeout; the attempt's own deadline (connect +
    # 2 x command timeout, OUTBOX_SMTP_ATTEMPT_TIMEOUT) is what ends it within the phase.
    violations = _violations(figures)
    if violations:
        raise SlowReplyNotBounded(f"with {TIMEOUT}s timeouts: {'; '.join(violations)}")
