"""Redis under Sentinel: the master killed mid-drain, a replica promoted.

A master, a replica and three sentinels run on loopback; every process of the
pipeline has ``REDIS_URL=redis+sentinel://…``. Shortly before the kill the
replica stops receiving (replication is asynchronous: what the master accepted
and had not passed on is lost with it), so the new master lacks messages the
relay published; those rows are ``queued`` in Postgres and the relay's sweep
must return them. Then the master is SIGKILLed while newsletters drain and
login codes arrive. Every process must follow the new master by itself: no
email lost, every duplicate carrying its row's Message-ID, the login codes
sent within 15 s of the election, no process restarted, and one line per
process when it loses the broker and one when it is back.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from outbox.config import Settings
from outbox.testing.sink import Behaviour
from tests.acceptance.checks import (
    add_emails,
    assert_no_loss,
    broker_outage_lines,
    process_tree,
    query,
    report,
    timeline,
    unfinished,
    wait_final,
    wait_until,
)
from tests.acceptance.conftest import Rig, child_env, scaled, timeout
from tests.acceptance.sentinels import SentinelGroup, wait_for_election

CODES_WITHIN = 15.0  # seconds after the election by which every waiting login code is sent
HOLD = 1.0  # seconds the master accepts writes its replica never receives


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelGroup]:
    workdir = tmp_path / "sentinel"
    workdir.mkdir()
    group = SentinelGroup(workdir)
    try:
        yield group.start()
    finally:
        group.close()


def _message_ids(group: SentinelGroup, port: int, namespace: str) -> set[bytes]:
    client = group.client(port)
    try:
        return {
            key
            for queue in ("email_high", "email_bulk")
            for key in client.hkeys(f"{namespace}-dramatiq:{queue}.msgs")
        }
    finally:
        client.close()


@pytest.mark.slow
def test_a_sentinel_failover_mid_drain_loses_nothing(
    sentinels: SentinelGroup, fault_settings: Settings, rig: Rig
) -> None:
    settings = dataclasses.replace(
        fault_settings,
        redis_url=sentinels.url,
        # A threshold no run reaches: a row that comes back came back through the
        # broker watch, not because a worker went silent.
        stuck_seconds=3600.0,
        max_in_flight=400,
        claim_batch=200,
        bulk_batch=2,
    )
    total = scaled(1500) + scaled(100) + 20
    add_emails(settings, scaled(1500), prefix="nl")
    add_emails(settings, scaled(100), prefix="hi", priority="high")
    sink = rig.sink(lambda _a: Behaviour(delay=0.002))
    p = rig.pipeline(child_env(settings, sink.url), high=(1, 2), bulk=(1, 4))
    wait_until(lambda: len(sink.messages) >= 100, timeout(60), "sending under way")
    processes = process_tree([proc.pid for proc in p.procs.values()])

    assert sentinels.link is not None
    sentinels.link.hold()
    time.sleep(HOLD)  # the relay keeps publishing to the master alone
    add_emails(settings, 10, prefix="held", priority="high")
    time.sleep(0.5)
    on_master = _message_ids(sentinels, sentinels.master_port, settings.namespace)
    on_replica = _message_ids(sentinels, sentinels.replica_port, settings.namespace)
    sentinels.kill_master()
    killed = time.monotonic()
    add_emails(settings, 10, prefix="down", priority="high")  # while no master answers
    elected = wait_for_election(sentinels, timeout(60))
    codes_waiting = {
        r[0]
        for r in query(
            settings,
            "SELECT recipient FROM email_outbox WHERE priority = 'high' AND status <> 'sent'",
        )
    }

    def codes_sent() -> bool:
        rows = query(
            settings,
            "SELECT count(*) FROM email_outbox WHERE recipient = ANY(%s) AND status <> 'sent'",
            sorted(codes_waiting),
        )
        return rows[0][0] == 0

    try:
        wait_until(codes_sent, timeout(60), "the waiting login codes sent", 0.1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {unfinished(settings)}") from None
    last_code = max(
        (m.at - elected for m in sink.messages if codes_waiting & set(m.recipients)), default=0.0
    )
    drained = wait_final(settings, total, timeout=timeout(120))
    figures = assert_no_loss(settings, sink)
    swept = query(
        settings,
        "SELECT count(DISTINCT outbox_id) FROM email_event"
        " WHERE reason = 'swept: queued, the broker lost its message'",
    )[0][0]
    still_running = {name: proc.poll() is None for name, proc in p.procs.items()}
    after = process_tree([proc.pid for proc in p.procs.values()])
    outage_lines = {log.stem: broker_outage_lines(log) for log in sorted(rig.log_dir.glob("*.log"))}
    report(
        "Redis Sentinel failover",
        figures=figures,
        messages_only_on_the_old_master=len(on_master - on_replica),
        rows_swept_back=swept,
        election_after_kill_s=elected - killed,
        login_codes_waiting=len(codes_waiting),
        last_login_code_after_election_s=last_code,
        drain_after_election_s=time.monotonic() - elected,
        drain_s=drained,
        sends_per_s_after_kill=timeline([m.at for m in sink.messages], killed),
        outage_lines=outage_lines,
    )
    assert on_master - on_replica, "the replica lacked nothing: the loss was not staged"
    assert swept > 0, "no queued row came back: the sweep did not notice the lost messages"
    assert codes_waiting, "no login code was waiting at the failover"
    assert last_code <= CODES_WITHIN, f"the last login code went {last_code:.1f}s after election"
    assert all(still_running.values()), f"a process exited: {still_running}"
    assert processes <= after, "a process of the pipeline was replaced"
    # One process each (the pools run one worker process): one line down, one back.
    for name, (down, back, retries) in outage_lines.items():
        if name.startswith(("relay", "email_")):
            assert down <= 1, (name, down, back, retries)
            assert back == down, (name, down, back, retries)
            assert retries == 0, (name, down, back, retries)
