"""A RabbitMQ cluster of three nodes with quorum queues: the queues' leader killed mid-drain.

``OUTBOX_BROKER_URL`` lists the three nodes; the relay and the workers connect
to the first that answers, so they all sit on the node that leads the queues.
That node is SIGKILLed while newsletters drain and login codes arrive. The
queues elect a leader among the two nodes left, which hold every message the
relay was told was stored (publisher confirms from a majority). Every process
must reconnect to another node by itself: no email lost, every duplicate
carrying its row's Message-ID, the backlog drained, no process restarted.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from outbox.broker import make_broker
from outbox.config import Settings
from outbox.rabbitmq_queues import wire_name
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
from tests.acceptance.rabbitmq_cluster import RabbitCluster

RECOVERY = 60.0  # seconds after the kill by which sending must be under way again


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RabbitCluster]:
    group = RabbitCluster(tmp_path / "rabbitmq")
    try:
        yield group.start()
    finally:
        group.close()


@pytest.mark.slow
@pytest.mark.rabbitmq
def test_the_queue_leader_killed_mid_drain_loses_nothing(
    cluster: RabbitCluster, fault_settings: Settings, rig: Rig
) -> None:
    settings = dataclasses.replace(
        fault_settings,
        broker_url=cluster.url,
        rabbitmq_queue_type="quorum",
        # No sweep of silent workers: what is sent comes through the cluster.
        stuck_seconds=3600.0,
        max_in_flight=400,
        claim_batch=200,
        bulk_batch=2,
    )
    total = scaled(1500) + scaled(100) + 10
    add_emails(settings, scaled(1500), prefix="nl")
    add_emails(settings, scaled(100), prefix="hi", priority="high")
    # The queues declared first (on the first node, as the processes will), so
    # that their leader is known before the drain: asking takes seconds.
    broker = make_broker(settings)
    try:
        for queue in ("email_high", "email_bulk"):
            broker.declare_queue(queue, ensure=True)  # type: ignore[call-arg]
    finally:
        broker.close()
    leader = cluster.leader_of(wire_name(settings.namespace, "email_bulk"))
    high_leader = cluster.leader_of(wire_name(settings.namespace, "email_high"))
    sink = rig.sink(lambda _a: Behaviour(delay=0.002))
    p = rig.pipeline(child_env(settings, sink.url), high=(1, 2), bulk=(1, 4))
    wait_until(lambda: len(sink.messages) >= 100, timeout(90), "sending under way")
    processes = process_tree([proc.pid for proc in p.procs.values()])

    cluster.kill(leader)
    killed = time.monotonic()
    sent_at_kill = len(sink.messages)
    add_emails(settings, 10, prefix="down", priority="high")
    try:
        recovery = wait_until(
            lambda: len(sink.messages) >= min(sent_at_kill + 100, total),
            timeout(RECOVERY),
            "sending under way again after the kill",
            0.1,
        )
        drained = wait_final(settings, total, timeout=timeout(180))
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {unfinished(settings)}") from None
    figures = assert_no_loss(settings, sink)
    swept = query(settings, "SELECT count(*) FROM email_event WHERE reason LIKE 'swept%%'")[0][0]
    new_leader = cluster.leader_of(wire_name(settings.namespace, "email_bulk"))
    still_running = {name: proc.poll() is None for name, proc in p.procs.items()}
    after = process_tree([proc.pid for proc in p.procs.values()])
    outage_lines = {log.stem: broker_outage_lines(log) for log in sorted(rig.log_dir.glob("*.log"))}
    report(
        "RabbitMQ cluster: the queues' leader killed",
        figures=figures,
        killed=leader.name.rpartition("-")[2],
        high_queue_led_by_it=high_leader is leader,
        new_leader=new_leader.name.rpartition("-")[2],
        sent_at_kill=sent_at_kill,
        recovery_s=recovery,
        drain_after_kill_s=time.monotonic() - killed,
        drain_s=drained,
        rows_swept_back=swept,
        sends_per_s_after_kill=timeline([m.at for m in sink.messages], killed),
        outage_lines=outage_lines,
    )
    assert new_leader is not leader
    assert swept == 0, "rows came back through a sweep: the cluster lost their messages"
    assert all(still_running.values()), f"a process exited: {still_running}"
    assert processes <= after, "a process of the pipeline was replaced"
    for name, (down, back, retries) in outage_lines.items():
        if name.startswith(("relay", "email_")):
            assert down <= 1, (name, down, back, retries)
            assert back == down, (name, down, back, retries)
            assert retries == 0, (name, down, back, retries)
