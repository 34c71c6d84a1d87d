"""Scenario 7: SIGTERM to a worker pool, as a platform stops a dyno.

Heroku-like platforms send SIGTERM to every process of a dyno at once, then
SIGKILL 30 s later. A worker told to stop must finish or hand back what it
holds within that grace period: no row left ``sending`` for the sweeper, no
resend, nothing lost. The pool is stopped three times: SIGTERM to the
Dramatiq master only (which forwards it to its worker processes); SIGTERM to
the whole process group at once, as the platform does; and SIGTERM to every
process with the worker processes a moment ahead of the master, which makes
the unlucky order of the platform's signals certain (with the group signal,
whether a worker process sees one SIGTERM or two depends on scheduling).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time

import psutil

from outbox.config import Settings
from outbox.testing.pipeline import Pipeline
from outbox.testing.sink import Behaviour
from tests.acceptance.checks import (
    CoreBug,
    add_emails,
    assert_no_loss,
    query,
    report,
    wait_final,
    wait_until,
)
from tests.acceptance.conftest import Rig, child_env, scaled, spawn_workers, timeout

CHILDREN_FIRST = ("children first", "children first again")
GRACE = 30.0  # seconds between the platform's SIGTERM and its SIGKILL
BULK = (1, 8)


def _stop_pool(p: Pipeline, queue: str, *, how: str) -> tuple[float, bool]:
    """SIGTERM, then SIGKILL after the grace period; seconds to exit, whether it was killed.

    ``how``: ``master`` (the Dramatiq master only; it forwards the signal),
    ``group`` (every process of the group at the same instant), or
    ``children first`` (every process, the worker processes a moment before the
    master: one of the orders in which a platform's SIGTERM to every process
    of a dyno can arrive).
    """
    proc = p.procs[queue]
    started = time.monotonic()
    if how == "group":
        os.killpg(proc.pid, signal.SIGTERM)
    elif how.startswith("children first"):
        for child in psutil.Process(proc.pid).children(recursive=True):
            os.kill(child.pid, signal.SIGTERM)
        # Long enough for the worker processes to handle the first signal, short
        # next to the once-a-second loop in which Dramatiq's worker notices it.
        time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=GRACE)
        killed = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed = True
    # The worker processes of the pool share its group; wait until every one is gone.
    wait_until(lambda: not _group_alive(proc.pid), 10, "worker processes gone")
    return time.monotonic() - started, killed


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _left_sending(settings: Settings, pids: set[int]) -> int:
    """Rows still ``sending`` under a worker of the given processes."""
    rows = query(
        settings,
        "SELECT split_part(locked_by, ':', 2) FROM email_outbox WHERE status = 'sending'",
    )
    return sum(1 for (pid,) in rows if pid.isdigit() and int(pid) in pids)


class DoubleSigterm(CoreBug):
    """A worker process given SIGTERM twice exits at once, abandoning its batch."""


def test_sigterm_to_a_worker_pool_hands_back_what_it_holds(
    broker_settings: Settings, rig: Rig
) -> None:
    # A threshold well above a batch's length: only a worker that abandons rows leaves them.
    settings = dataclasses.replace(broker_settings, stuck_seconds=8.0)
    total = scaled(1200)
    add_emails(settings, total, prefix="nl")
    sink = rig.sink(lambda _a: Behaviour(delay=0.02))
    p = rig.pipeline(child_env(settings, sink.url), high=(0, 0), bulk=BULK)
    stops = {}
    for label in ("master", "group", "children first", "children first again"):
        seen = len(sink.messages)
        wait_until(lambda seen=seen: len(sink.messages) >= seen + 150, timeout(30), "sending")
        master = psutil.Process(p.procs["email_bulk"].pid)
        pids = {master.pid, *(c.pid for c in master.children(recursive=True))}
        took, killed = _stop_pool(p, "email_bulk", how=label)
        left = _left_sending(settings, pids)
        stops[label] = (took, killed, left)
        spawn_workers(p, "email_bulk", *BULK)
    drained = wait_final(settings, total, timeout=timeout(120))
    figures = assert_no_loss(settings, sink)
    report(
        "7 SIGTERM to a worker pool",
        figures=figures,
        master_sigterm_exit_s=stops["master"][0],
        master_rows_left_sending=stops["master"][2],
        group_sigterm_exit_s=stops["group"][0],
        group_rows_left_sending=stops["group"][2],
        children_first_exit_s=[round(stops[k][0], 2) for k in CHILDREN_FIRST],
        children_first_rows_left_sending=[stops[k][2] for k in CHILDREN_FIRST],
        sigkilled_after_grace=[label for label, s in stops.items() if s[1]],
        drain_s=drained,
    )
    for label, (took, killed, left) in stops.items():
        if killed or left:
            raise DoubleSigterm(
                f"SIGTERM to the {label}: exited after {took:.1f}s "
                f"({'SIGKILLed' if killed else 'on its own'}), {left} rows left sending"
            )
