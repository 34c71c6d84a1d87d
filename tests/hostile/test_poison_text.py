"""Finding 2: NUL and invalid UTF-8 wherever text from outside reaches Postgres.

Postgres refuses NUL in text and ``\\u0000`` in jsonb; one such value used to
stop the bounce server for good. Every path that stores outside text is fed
them here: relay replies, bounce reports (tests/integration/test_bounces.py
has the server itself), webhooks and enqueue.
"""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

import outbox
from outbox.config import Settings
from outbox.db.store import texts
from outbox.errors import InvalidMessage
from outbox.testing.sink import Behaviour
from tests.integration.helpers import LOGIN, add_login, harness, query

HOSTILE_TEXT = ["\x00", "a\x00b", "\udcff", "\ud800x", "é\x00\udc80", "\ufffd", "\x00" * 5]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_storable_text_keeps_everything_readable(text: str) -> None:
    stored = texts.storable_text(text)
    assert stored is not None
    assert "\x00" not in stored
    stored.encode("utf-8")  # no lone surrogate left
    assert texts.storable(["x", {text: text}]) == ["x", {stored: stored}]


@given(st.text())
def test_storable_text_is_identity_for_clean_text(text: str) -> None:
    if "\x00" not in text:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return
        assert texts.storable_text(text) == text


def test_regression_relay_reply_with_a_nul_byte_is_recorded(settings: Settings) -> None:
    reply = "550 5.1.1 no such\x00user"
    add_login(settings, "login-1", "nobody@example.com")
    with harness(settings, lambda a: Behaviour(rcpt_reply=reply)) as (h, _):
        h.run()
    [(status, last_error)] = query(settings, "SELECT status, last_error FROM email_outbox")
    assert status == "failed"
    assert "\x00" not in last_error
    assert "no such" in last_error
    [(text,)] = query(settings, "SELECT reply_text FROM email_attempt")
    assert "\ufffd" in text


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    key=st.text(max_size=40),
    to=st.sampled_from(["alice@example.com", "a\x00@example.com", "\udcff@example.com"])
    | st.text(max_size=40),
    template=st.sampled_from(["login_code", "login_code\x00", "../login_code", "\udcff"])
    | st.text(max_size=20),
    value=st.text(max_size=40),
)
def test_enqueue_refuses_or_stores_any_text(
    conn: psycopg.Connection[tuple[object, ...]],
    settings: Settings,
    key: str,
    to: str,
    template: str,
    value: str,
) -> None:
    """Arbitrary text, NUL and lone surrogates included, in every field: either a
    clean InvalidMessage with nothing written, or a row."""
    params = {**LOGIN, "name": value}
    before = query(settings, "SELECT count(*) FROM email_outbox")[0][0]
    try:
        outbox.enqueue(
            conn,
            idempotency_key=key or "k",
            to=to,
            template=template,
            params=params,
            settings=settings,
        )
    except InvalidMessage:
        conn.rollback()
        assert query(settings, "SELECT count(*) FROM email_outbox")[0][0] == before
        return
    conn.commit()
    assert query(settings, "SELECT count(*) FROM email_outbox")[0][0] >= before


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    diagnostic=st.text(max_size=80),
    recipient=st.text(max_size=40) | st.just("victim@example.net"),
    noise=st.binary(max_size=200),
    envelope_to=st.none() | st.text(max_size=60),
)
def test_any_bounce_is_processed_or_set_aside_and_suppresses_nobody(
    settings: Settings, diagnostic: str, recipient: str, noise: bytes, envelope_to: str | None
) -> None:
    """Hostile reports through the bounce path: none raises, none is left
    unprocessed, none suppresses without a VERP token."""
    from outbox.bounce_receiving.ingest import ingest, process_pending  # noqa: PLC0415
    from tests.integration.test_bounces import dsn  # noqa: PLC0415

    raw = dsn(
        recipient.replace("\r", "").replace("\n", ""),
        "<x@elsewhere.example>",
        diagnostic=diagnostic.replace("{", "").replace("}", ""),
    )
    raw = raw.replace(b"Reporting-MTA", noise + b"\r\nReporting-MTA", 1)
    with psycopg.connect(settings.database_url) as conn:
        done = ingest(conn, raw, settings, envelope_to)
        assert done.suppressed == []
        assert process_pending(conn, settings) == 0
    assert query(settings, "SELECT count(*) FROM email_suppression")[0][0] == 0
