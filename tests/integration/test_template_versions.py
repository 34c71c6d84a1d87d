"""A row renders the template version it was enqueued with, whatever the directory holds now."""

from __future__ import annotations

import dataclasses
import email
import email.policy
import shutil
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from outbox import enqueue
from outbox.config import PACKAGE_TEMPLATES, Settings
from outbox.message.compose import composer
from outbox.message.render import template_set
from tests.integration.helpers import LOGIN, query, statuses
from tests.integration.test_delivery import harness


def restart() -> None:
    """What a redeployed worker sees: the directory read afresh."""
    template_set.cache_clear()
    composer.cache_clear()


@pytest.fixture
def local(settings: Settings, tmp_path: Path) -> Iterator[Settings]:
    shutil.copytree(PACKAGE_TEMPLATES, tmp_path / "templates")
    restart()
    yield dataclasses.replace(settings, templates=tmp_path / "templates")
    restart()


def add(settings: Settings, key: str, conn: psycopg.Connection[tuple[object, ...]]) -> int:
    return enqueue(
        conn,
        idempotency_key=key,
        to="alice@example.com",
        template="login_code",
        params=LOGIN,
        settings=settings,
    ).id


def subjects(sink_messages: list[bytes]) -> list[str]:
    return sorted(
        str(email.message_from_bytes(d, policy=email.policy.default)["Subject"])
        for d in sink_messages
    )


def test_a_changed_template_does_not_change_rows_already_enqueued(local: Settings) -> None:
    with psycopg.connect(local.database_url) as conn:
        add(local, "before", conn)
        conn.commit()
    old_version = template_set(local.templates).get("login_code").version
    assert query(local, "SELECT template_version FROM email_outbox")[0][0] == old_version
    stored = query(
        local,
        "SELECT name, files ? 'body.mjml' FROM email_template_version WHERE hash = %s",
        old_version,
    )
    assert stored == [("login_code", True)]

    (local.templates / "login_code" / "subject.txt").write_text("New code: {{ code }}")
    restart()
    with psycopg.connect(local.database_url) as conn:
        add(local, "after", conn)
        conn.commit()
    with harness(local) as (h, sink):
        h.run()
    assert statuses(local) == {"sent": 2}
    assert subjects([m.data for m in sink.messages]) == [
        "123456 is your Shop login code",  # as it was when enqueued
        "New code: 123456",
    ]


def test_a_version_rolled_back_with_its_row_is_stored_again(local: Settings) -> None:
    (local.templates / "login_code" / "subject.txt").write_text("Rolled back {{ code }}")
    restart()
    version = template_set(local.templates).get("login_code").version
    with psycopg.connect(local.database_url) as conn:
        add(local, "gone", conn)
        conn.rollback()
        # Stored in the rolled-back transaction, so not remembered: the next row stores it.
        add(local, "kept", conn)
        conn.commit()
    assert query(local, "SELECT count(*) FROM email_template_version WHERE hash = %s", version) == [
        (1,)
    ]
    (local.templates / "login_code" / "subject.txt").write_text("Changed again {{ code }}")
    restart()
    with harness(local) as (h, sink):
        h.run()
    assert subjects([m.data for m in sink.messages]) == ["Rolled back 123456"]


def test_rows_without_a_version_render_the_current_one(local: Settings) -> None:
    with psycopg.connect(local.database_url) as conn:
        add(local, "legacy", conn)
        conn.commit()
    query(local, "UPDATE email_outbox SET template_version = NULL RETURNING id")
    with harness(local) as (h, sink):
        h.run()
    assert subjects([m.data for m in sink.messages]) == ["123456 is your Shop login code"]


def test_an_unknown_version_is_retried_not_sent(local: Settings) -> None:
    with psycopg.connect(local.database_url) as conn:
        add(local, "lost", conn)
        conn.commit()
    query(local, "UPDATE email_outbox SET template_version = repeat('0', 32) RETURNING id")
    local = dataclasses.replace(local, max_attempts=1)
    with harness(local) as (h, sink):
        h.run()
    assert sink.messages == []
    (error,) = query(local, "SELECT last_error FROM email_outbox")[0]
    assert "is not stored" in error


def test_the_template_decides_the_default_priority(settings: Settings) -> None:
    with psycopg.connect(settings.database_url) as conn:
        code = add(settings, "code", conn)
        news = enqueue(
            conn,
            idempotency_key="news",
            to="a@example.com",
            template="newsletter",
            params={"name": "A", "title": "T", "intro": "I", "url": "https://x.example"},
            settings=settings,
        ).id
        explicit = enqueue(
            conn,
            idempotency_key="explicit",
            to="a@example.com",
            template="login_code",
            params=LOGIN,
            priority="bulk",
            settings=settings,
        ).id
        conn.commit()
    priorities = dict(query(settings, "SELECT id, priority FROM email_outbox"))
    assert priorities == {code: "high", news: "bulk", explicit: "bulk"}
