"""Operator commands: what they find, what they change, and what they say when they cannot."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from outbox import enqueue, enqueue_many
from outbox.config import Settings
from tests.conftest import ADMIN_URL, _with_database
from tests.integration.helpers import LOGIN, NEWS, query, statuses
from tests.integration.test_cli import outbox


def _one_line_error(result: object) -> str:
    err = result.stderr  # type: ignore[attr-defined]
    assert result.returncode == 2, (result.stdout, err)  # type: ignore[attr-defined]
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_version(settings: Settings) -> None:
    result = outbox(settings, "--version")
    assert result.returncode == 0
    assert re.fullmatch(r"outbox \d+\.\d+\.\d+\S*\n", result.stdout)


@pytest.fixture
def empty_database() -> Iterator[str]:
    name = f"outbox_empty_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield _with_database(ADMIN_URL, name)
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("command", [["show", "k"], ["requeue", "--dead"], ["status"],
                                     ["suppress", "list"], ["migrate", "--status"]])  # fmt: skip
def test_an_unmigrated_database_says_run_outbox_migrate(
    settings: Settings, empty_database: str, command: list[str]
) -> None:
    result = outbox(settings, *command, env={"DATABASE_URL": empty_database})
    if command == ["migrate", "--status"]:  # lists what migrate would apply
        assert result.returncode == 0
        assert "pending: run `outbox migrate`" in result.stdout
        return
    assert "run `outbox migrate`" in _one_line_error(result)


def test_a_missing_database_says_how_to_create_it(settings: Settings) -> None:
    url = _with_database(ADMIN_URL, "outbox_never_created")
    line = _one_line_error(outbox(settings, "show", "k", env={"DATABASE_URL": url}))
    assert 'database "outbox_never_created" does not exist' in line
    assert "createdb outbox_never_created" in line
    assert "outbox migrate" in line


@pytest.mark.parametrize(
    "url",
    ["garbage", "postgresql://app:s3cret-pw@[db.example/app", "mysql://db.example/app",
     "host=db port=5432 password=s3cret-pw sslmode"],
)  # fmt: skip
def test_a_malformed_database_url_is_one_line_without_its_secret(
    settings: Settings, url: str
) -> None:
    line = _one_line_error(outbox(settings, "requeue", "--dead", env={"DATABASE_URL": url}))
    assert "DATABASE_URL" in line
    assert "s3cret-pw" not in line


def _enqueue_login(settings: Settings, key: str, to: str = "alice@example.com") -> str:
    with psycopg.connect(settings.database_url) as conn:
        done = enqueue(
            conn, idempotency_key=key, to=to, template="login_code", params=LOGIN, settings=settings
        )
        conn.commit()
    return done.message_id


def test_suppress_add_takes_a_reason_in_free_text(settings: Settings) -> None:
    empty = outbox(settings, "suppress", "list")
    assert empty.stdout.strip() == "no address is suppressed"
    assert json.loads(outbox(settings, "suppress", "list", "--json").stdout) == []
    added = outbox(
        settings, "suppress", "add", "Bob@Example.com", "--reason", "asked by phone, ticket 4411"
    )
    assert added.returncode == 0, added.stderr
    check = json.loads(outbox(settings, "suppress", "check", "bob@example.com", "--json").stdout)
    assert check["reason"] == "asked by phone, ticket 4411"
    assert "bob@" not in check["address"]
    _enqueue_login(settings, "after-suppression", to="bob@example.com")
    assert query(settings, "SELECT status, status_reason FROM email_outbox") == [
        ("suppressed", "recipient suppressed: asked by phone, ticket 4411")
    ]
    refused = outbox(settings, "suppress", "add", "carol@example.com", "--reason", "\x07")
    assert refused.returncode == 2
    assert "control characters" in refused.stderr
    assert query(settings, "SELECT count(*) FROM email_suppression") == [(1,)]


def _parked_emails(settings: Settings) -> None:
    """10 dead newsletters (half to example.org), 4 failed login codes, 3 held, 3 pending."""
    emails = [
        {"idempotency_key": f"nl-{i}", "to": f"r{i}@example.{'org' if i % 2 else 'com'}",
         "template": "newsletter", "params": NEWS}
        for i in range(16)
    ] + [
        {"idempotency_key": f"code-{i}", "to": f"c{i}@example.com", "template": "login_code",
         "params": LOGIN, "priority": "high"}
        for i in range(4)
    ]  # fmt: skip
    with psycopg.connect(settings.database_url) as conn:
        enqueue_many(conn, emails, settings=settings)
        conn.execute("UPDATE email_outbox SET status = 'dead', attempts = 8 WHERE id <= 10")
        conn.execute("UPDATE email_outbox SET status = 'held' WHERE id BETWEEN 11 AND 13")
        conn.execute("UPDATE email_outbox SET status = 'failed' WHERE template = 'login_code'")
        # Two dead ones are old: --since leaves them out.
        conn.execute(
            "UPDATE email_outbox SET created_at = now() - interval '3 days' WHERE id IN (1, 2)"
        )
        conn.commit()


def test_requeue_dry_run_counts_and_changes_nothing(settings: Settings) -> None:
    _parked_emails(settings)
    before = statuses(settings)
    dry = outbox(settings, "requeue", "--dead", "--failed", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        "would requeue 10 dead bulk emails",
        "would requeue 4 failed high emails",
    ]
    as_json = json.loads(outbox(settings, "requeue", "--dead", "--dry-run", "--json").stdout)
    assert as_json == {
        "would_requeue": [{"status": "dead", "priority": "bulk", "count": 10}],
        "dry_run": True,
    }
    assert statuses(settings) == before


def test_requeue_filters_narrow_the_set(settings: Settings) -> None:
    _parked_emails(settings)
    result = outbox(
        settings, "requeue", "--dead", "--to-domain", "example.org", "--since", "1d", "--json"
    )
    assert result.returncode == 0, result.stderr
    # Dead ones to example.org are ids 4, 6, 8, 10 (id 2 is three days old).
    assert json.loads(result.stdout) == {"requeued": {"bulk": 4}, "dry_run": False}
    assert [r[0] for r in query(settings, "SELECT id FROM email_outbox WHERE status = 'pending'"
                                " AND template = 'newsletter' AND id <= 10 ORDER BY id")] == [
        4, 6, 8, 10
    ]  # fmt: skip
    codes = outbox(settings, "requeue", "--failed", "--template", "login_code")
    assert codes.stdout.strip() == "requeued 4 emails (4 high)"
    none = outbox(settings, "requeue", "--held", "--template", "login_code")
    assert none.returncode == 0
    assert none.stdout.strip() == "no email matches: nothing to requeue"
    reasons = query(settings, "SELECT DISTINCT reason FROM email_event WHERE to_status = 'pending'")
    assert reasons == [("requeued by operator",)]


def test_requeue_works_in_batches_and_shows_progress(settings: Settings) -> None:
    _parked_emails(settings)
    result = outbox(settings, "requeue", "--dead", "--held", "--batch", "4")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "requeued 13 emails (13 bulk)"
    assert result.stderr.splitlines() == [
        "requeued 4/13", "requeued 8/13", "requeued 12/13", "requeued 13/13"
    ]  # fmt: skip
    assert statuses(settings) == {"pending": 16, "failed": 4}
    assert query(settings, "SELECT max(attempts) FROM email_outbox WHERE priority = 'bulk'") == [
        (0,)
    ]


def test_requeue_refuses_a_reference_with_filters(settings: Settings) -> None:
    result = outbox(settings, "requeue", "nl-1", "--dead")
    assert result.returncode == 2
    refused = outbox(settings, "requeue", "--dead", "--since", "soon")
    assert refused.returncode == 2
    assert "--since 'soon'" in refused.stderr


def test_show_finds_an_email_by_every_reference(settings: Settings) -> None:
    message_id = _enqueue_login(settings, "order-9-code")
    query(settings, "UPDATE email_outbox SET provider_message_id = 'pm-77' RETURNING id")
    (row_id,) = query(settings, "SELECT id FROM email_outbox")[0]
    for ref in ("order-9-code", message_id, message_id.strip("<>"), str(row_id), "pm-77"):
        shown = outbox(settings, "show", ref, "--json")
        assert shown.returncode == 0, (ref, shown.stderr)
        assert json.loads(shown.stdout)["email"]["message_id"] == message_id
    missing = outbox(settings, "show", "12345")
    assert missing.returncode == 1
    assert "no email with key, Message-ID, id or provider id '12345'" in missing.stderr


def test_show_numbers_attempts_across_requeues_to_the_millisecond(settings: Settings) -> None:
    _enqueue_login(settings, "order-10-code")
    for attempt, verdict in ((1, "retry"), (2, "failed"), (1, "sent")):  # a requeue between
        query(
            settings,
            "INSERT INTO email_attempt (outbox_id, attempt, verdict, reply_code, reply_text)"
            " VALUES (1, %s, %s, 250, 'ok') RETURNING id",
            attempt,
            verdict,
        )
    text = outbox(settings, "show", "order-10-code").stdout
    assert re.search(r"  #1 \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} retry ", text)
    assert re.search(r"  #2 \S+ \S+ failed ", text)
    assert re.search(r"  #3 \(try 1 after a requeue\) \S+ \S+ sent ", text)
    assert re.search(r"created_at: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\n", text)
    as_json = json.loads(outbox(settings, "show", "order-10-code", "--json").stdout)
    assert [(a["number"], a["attempt"]) for a in as_json["attempts"]] == [(1, 1), (2, 2), (3, 1)]
    assert re.fullmatch(r"\S+T\d\d:\d\d:\d\d\.\d{3}\+00:00", as_json["email"]["created_at"])
    fresh = outbox(settings, "show", "order-10-code")
    assert "attempts:" in fresh.stdout


@pytest.mark.parametrize(
    ("command", "key"),
    [(["migrate"], "applied"), (["sweep"], "requeued_lost"), (["bounces", "reprocess"],
     "processed")],
)  # fmt: skip
def test_commands_that_print_data_speak_json(
    settings: Settings, command: list[str], key: str
) -> None:
    result = outbox(settings, *command, "--json")
    assert result.returncode == 0, result.stderr
    assert key in json.loads(result.stdout)


def test_templates_check_speaks_json(settings: Settings) -> None:
    result = outbox(settings, "templates", "check", "--json")
    assert result.returncode == 0, result.stderr
    names = {t["name"]: t["problem"] for t in json.loads(result.stdout)}
    assert names["login_code"] is None


def test_an_empty_outbox_says_so(settings: Settings) -> None:
    assert "no email in the outbox yet" in outbox(settings, "status").stdout
