"""The ``outbox`` command, run as a child process like an operator would."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import psycopg

from outbox import enqueue
from outbox.bounce_receiving.ingest import ingest
from outbox.config import Settings
from tests.integration.helpers import LOGIN, add_newsletter, query, statuses
from tests.integration.test_bounces import dsn


def outbox(
    settings: Settings, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "outbox.cli", *args],
        env={**settings.to_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_migrate_is_idempotent(settings: Settings) -> None:
    result = outbox(settings, "migrate")
    assert result.returncode == 0
    assert "schema is up to date" in result.stdout


def test_migrate_status_lists_applied_migrations(settings: Settings) -> None:
    result = outbox(settings, "migrate", "--status", "--json")
    assert result.returncode == 0, result.stderr
    states = json.loads(result.stdout)
    assert states[0]["version"] == 1
    assert states[0]["name"] == "outbox"
    assert all(s["applied_at"] for s in states)
    human = outbox(settings, "migrate", "--status")
    assert "0007_unsent_age" in human.stdout
    assert human.stdout.strip().endswith("schema is up to date")


def test_status_json(settings: Settings) -> None:
    add_newsletter(settings, 3)
    query(settings, "UPDATE email_outbox SET status = 'dead' WHERE id = 1 RETURNING id")
    result = outbox(settings, "status", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    counts = {(c["status"], c["priority"]): c["count"] for c in report["counts"]}
    assert counts == {("dead", "bulk"): 1, ("pending", "bulk"): 2}
    assert report["oldest_unsent_seconds"]["bulk"] >= 0
    assert report["paced_pending"] == {}
    human = outbox(settings, "status")
    assert "pending" in human.stdout
    assert "oldest unsent bulk" in human.stdout


def test_status_shows_the_health_of_each_part(settings: Settings) -> None:
    add_newsletter(settings, 2)
    query(
        settings,
        "INSERT INTO outbox_breaker (transport, state, failures, opened_at, last_error)"
        " VALUES ('smtp', 'open', 4, now() - interval '5 minutes',"
        " 'connection refused at connect') RETURNING transport",
    )
    query(
        settings,
        "INSERT INTO outbox_process (name, kind, detail, beat_at) VALUES"
        " ('relay:h:1', 'relay', '{\"priorities\": [\"high\"]}', now()),"
        ' (\'h:2\', \'worker\', \'{"queues": ["email_bulk"], "pool": {"pool_size": 4,'
        ' "pool_available": 1, "requests_waiting": 0}}\', now() - interval \'1 hour\')'
        " RETURNING name",
    )
    result = outbox(settings, "status", "--json")
    assert result.returncode == 1, result.stderr  # something is down
    health = json.loads(result.stdout)["health"]
    assert health["ok"] is False
    assert health["postgres"]["up"] is True
    assert health["broker"]["up"] is True
    assert health["broker"]["messages"] == {"email_high": 0, "email_bulk": 0}
    (transport,) = health["transports"]
    assert transport["state"] == "open"
    assert transport["last_error"] == "connection refused at connect"
    silent = {p["name"]: p["silent"] for p in health["processes"]}
    assert silent == {"relay:h:1": False, "h:2": True}
    human = outbox(settings, "status").stdout
    assert "transport  smtp DOWN since" in human
    assert "relay:h:1 high alive" in human
    assert "h:2 email_bulk SILENT" in human
    assert "pool 1/4 free, 0 waiting" in human
    query(settings, "UPDATE outbox_breaker SET state = 'closed' RETURNING transport")
    query(settings, "DELETE FROM outbox_process WHERE name = 'h:2' RETURNING name")
    healthy = outbox(settings, "status")
    assert healthy.returncode == 0
    assert "transport  smtp up" in healthy.stdout


def test_status_counts_rows_waiting_for_a_receivers_rate(settings: Settings) -> None:
    add_newsletter(settings, 5)
    query(
        settings,
        "UPDATE email_outbox SET status_reason = 'paced: gmail.com at 20/1s'"
        " WHERE id <= 3 RETURNING id",
    )
    query(
        settings,
        "UPDATE email_outbox SET status_reason = 'paced: yahoo.com at 5/1s',"
        " status = 'sent' WHERE id = 4 RETURNING id",
    )  # no longer waiting
    report = json.loads(outbox(settings, "status", "--json").stdout)
    assert report["paced_pending"] == {"gmail.com": 3}
    assert "pending for gmail.com's rate: 3" in outbox(settings, "status").stdout


def test_show_hides_the_recipient(settings: Settings) -> None:
    with psycopg.connect(settings.database_url) as conn:
        result = enqueue(
            conn,
            idempotency_key="order-1234-confirmation",
            to="alice@example.com",
            template="login_code",
            params=LOGIN,
            settings=settings,
        )
        conn.commit()
    query(
        settings,
        "UPDATE email_outbox SET status = 'failed', status_reason = '550 5.1.1 unknown'"
        " RETURNING id",
    )
    for ref in ("order-1234-confirmation", result.message_id):
        shown = outbox(settings, "show", ref)
        assert shown.returncode == 0, shown.stderr
        assert result.message_id in shown.stdout
        assert "alice@" not in shown.stdout
        assert "@example.com" in shown.stdout
        assert "pending -> failed (550 5.1.1 unknown)" in shown.stdout
    as_json = json.loads(outbox(settings, "show", "order-1234-confirmation", "--json").stdout)
    assert as_json["email"]["status"] == "failed"
    assert as_json["events"][0]["to_status"] == "failed"
    missing = outbox(settings, "show", "nope")
    assert missing.returncode == 1
    assert "no email" in missing.stderr


def test_show_lists_the_bounce_reports(settings: Settings) -> None:
    with psycopg.connect(settings.database_url) as conn:
        result = enqueue(
            conn,
            idempotency_key="order-77-confirmation",
            to="gone@example.net",
            template="login_code",
            params=LOGIN,
            settings=settings,
        )
        conn.execute("UPDATE email_outbox SET status = 'sent', sent_at = now()")
        conn.commit()
        ingest(conn, dsn("gone@example.net", result.message_id), settings)
    shown = outbox(settings, "show", "order-77-confirmation")
    assert shown.returncode == 0, shown.stderr
    assert "bounce reports:" in shown.stdout
    assert "mail linked by message_id: hard 5.1.1 user_unknown" in shown.stdout
    assert "gone@" not in shown.stdout
    as_json = json.loads(outbox(settings, "show", "order-77-confirmation", "--json").stdout)
    (report,) = as_json["bounces"]
    assert report["results"] == [{"class": "hard", "status": "5.1.1", "reason": "user_unknown"}]


def test_requeue(settings: Settings) -> None:
    add_newsletter(settings, 4)
    query(
        settings, "UPDATE email_outbox SET status = 'dead', attempts = 8 WHERE id <= 2 RETURNING id"
    )
    query(settings, "UPDATE email_outbox SET status = 'held' WHERE id = 3 RETURNING id")
    one = outbox(settings, "requeue", "nl-0")
    assert one.returncode == 0, one.stderr
    assert "requeued 1" in one.stdout
    assert outbox(settings, "requeue", "--dead").stdout.strip() == "requeued 1 emails (1 bulk)"
    assert outbox(settings, "requeue", "--held").stdout.strip() == "requeued 1 emails (1 bulk)"
    assert statuses(settings) == {"pending": 4}
    assert query(settings, "SELECT max(attempts) FROM email_outbox")[0][0] == 0
    reasons = {
        r[0] for r in query(settings, "SELECT reason FROM email_event WHERE to_status = 'pending'")
    }
    assert reasons == {"requeued by operator"}
    nothing = outbox(settings, "requeue", "nl-3")  # pending: nothing to requeue
    assert nothing.returncode == 1


def test_sweep(settings: Settings) -> None:
    add_newsletter(settings, 2)
    query(
        settings,
        "UPDATE email_outbox SET status = 'queued', locked_at = now() - interval '1 hour'"
        " RETURNING id",
    )
    result = outbox(settings, "sweep")
    assert result.returncode == 0, result.stderr
    assert "requeued 2 queued rows" in result.stdout
    assert statuses(settings) == {"pending": 2}


def _sending_of(settings: Settings, worker: str, beat_ago: str) -> None:
    """Every row taken by ``worker``'s process, whose last beat was ``beat_ago``."""
    query(
        settings,
        "INSERT INTO outbox_process (name, kind, beat_at)"
        " VALUES (%s, 'worker', now() - %s::interval) RETURNING name",
        worker,
        beat_ago,
    )
    query(
        settings,
        "UPDATE email_outbox SET status = 'sending', attempts = 1, locked_by = %s,"
        " locked_at = now() - interval '1 hour' RETURNING id",
        f"{worker}:thread-1",
    )


QUICK = {"OUTBOX_STUCK_SECONDS": "6"}  # heartbeats every second


def test_sweep_returns_the_rows_of_a_silent_worker_while_others_beat(settings: Settings) -> None:
    add_newsletter(settings, 2)
    _sending_of(settings, "gone:1", "1 hour")
    query(
        settings,
        "INSERT INTO outbox_process (name, kind) VALUES ('live:2', 'worker') RETURNING name",
    )
    result = outbox(settings, "sweep", env=QUICK)
    assert result.returncode == 0, result.stderr
    assert "rows of silent worker processes: {'pending': 2}" in result.stdout
    assert statuses(settings) == {"pending": 2}
    verdicts = query(settings, "SELECT verdict, worker FROM email_attempt")
    assert verdicts == [("uncertain", "sweeper"), ("uncertain", "sweeper")]


def test_sweep_leaves_sending_rows_when_every_process_fell_silent_at_once(
    settings: Settings,
) -> None:
    # After an outage between the workers and Postgres, every heartbeat is old:
    # the rows may be live sends, so a one-off sweep must not send them again.
    add_newsletter(settings, 2)
    _sending_of(settings, "w:1", "30 seconds")
    refused = outbox(settings, "sweep", env=QUICK)
    assert refused.returncode == 0, refused.stderr
    # 30 s ago when the beat was written; a loaded machine takes a moment to start the CLI.
    assert re.search(
        r"sending rows left alone: no relay or worker has beaten for 3\d s", refused.stderr
    )
    assert "--force" in refused.stderr
    assert "rows of silent worker processes: 0" in refused.stdout
    assert statuses(settings) == {"sending": 2}
    forced = outbox(settings, "sweep", "--force", env=QUICK)
    assert forced.returncode == 0, forced.stderr
    assert "(--force)" in forced.stderr
    assert statuses(settings) == {"pending": 2}


def test_bad_configuration_is_a_clear_error(settings: Settings) -> None:
    result = outbox(settings, "status", env={"OUTBOX_MAX_ATTEMPTS": "lots"})
    assert result.returncode == 2
    assert "OUTBOX_MAX_ATTEMPTS='lots' is not a valid int" in result.stderr
    unreachable = outbox(settings, "status", env={"DATABASE_URL": "postgresql://127.0.0.1:1/x"})
    assert unreachable.returncode == 2
    assert "cannot reach Postgres" in unreachable.stderr
    assert "postgres   DOWN: cannot reach Postgres" in unreachable.stdout
    assert "broker     up" in unreachable.stdout


def test_config_shows_and_checks_the_worker_pools_settings(settings: Settings) -> None:
    shown = outbox(settings, "config", "--json", env={"OUTBOX_BULK_THREADS": "3"})
    assert shown.returncode == 0, shown.stderr
    by_name = {s["env"]: s for s in json.loads(shown.stdout)}
    assert by_name["OUTBOX_BULK_THREADS"]["value"] == "3"
    assert not by_name["OUTBOX_BULK_THREADS"]["default"]
    assert by_name["OUTBOX_HIGH_IDLE_POLL_MS"] == {
        "env": "OUTBOX_HIGH_IDLE_POLL_MS",
        "value": "5",
        "readers": ["worker"],
        "default": True,
    }
    same_ports = {"OUTBOX_HIGH_METRICS_PORT": "9300", "OUTBOX_BULK_METRICS_PORT": "9300"}
    checked = outbox(settings, "config", "check", env=same_ports)
    assert checked.returncode == 1
    assert "OUTBOX_HIGH_METRICS_PORT and OUTBOX_BULK_METRICS_PORT must differ" in checked.stdout
    relay_only = outbox(settings, "config", "check", "--process", "relay", env=same_ports)
    assert relay_only.returncode == 0, relay_only.stdout
