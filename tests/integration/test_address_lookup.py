"""An address's rows, found by the keyed hash of the address (migration 0026): the
console's search, `outbox show --to`, `outbox forget` and the soft-bounce streak."""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg
import pytest

from outbox.config import Settings
from outbox.db.sql import Queries
from outbox.db.store import bounce_reports, console_reads, data_retention, lookups
from outbox.redact import recipient_tag
from tests.integration.console_run import OPERATOR, console_settings, csrf_of, signed_in, web
from tests.integration.helpers import add_login, pool, query
from tests.integration.test_cli import outbox

CAROL = "Carol.Customer@Example.com"
# Near misses: another domain, a longer local part, another case of nothing.
OTHERS = ("carol.customer@example.org", "xcarol.customer@example.com", "dave@example.com")
STATUSES = ("pending", "queued", "sending", "sent", "failed", "dead", "held", "suppressed",
            "cancelled")  # fmt: skip
NO_CURSOR = 2**63 - 1


def _in_every_status(settings: Settings, to: str, prefix: str) -> dict[str, int]:
    """One email to ``to`` in each status: status -> row id."""
    ids = {status: add_login(settings, f"{prefix}-{status}", to) for status in STATUSES}
    for status, outbox_id in ids.items():
        query(
            settings,
            "UPDATE email_outbox SET status = %s WHERE id = %s RETURNING id",
            status,
            outbox_id,
        )
    return ids


def _scans(
    conn: psycopg.Connection[Any], queries: Queries, name: str, args: dict[str, Any]
) -> list[str]:
    """How query ``name`` reads email_outbox: "Seq Scan", or the index of each scan."""
    sql = b"EXPLAIN (FORMAT JSON) " + queries[name].encode()
    row = conn.execute(sql, args, prepare=False).fetchone()
    assert row is not None
    found: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if "Index Name" in node:  # a bitmap index scan names no relation
            found.append(node["Index Name"])
        elif node.get("Relation Name") == "email_outbox" and "Scan" in node["Node Type"]:
            found.append(node["Node Type"])
        for child in node.get("Plans", ()):
            walk(child)

    walk(row[0][0]["Plan"])
    return found


def test_the_hash_is_keyed_case_blind_and_sixteen_bytes(settings: Settings) -> None:
    (upper, lower, other, volatility) = query(
        settings,
        "SELECT email_recipient_hash(%s), email_recipient_hash(%s), email_recipient_hash(%s),"
        " (SELECT provolatile FROM pg_proc WHERE oid = 'email_recipient_hash(text)'::regprocedure)",
        CAROL,
        CAROL.lower(),
        OTHERS[0],
    )[0]
    assert upper == lower
    assert len(upper) == 16
    assert upper != other
    assert volatility == "i"  # IMMUTABLE: an index may be built on it
    # Keyed: not a plain hash of the address, and the key is the database's own.
    plain = query(
        settings, "SELECT substring(sha256(convert_to(%s, 'UTF8')) FOR 16)", CAROL.lower()
    )
    assert upper != plain[0][0]
    source = "SELECT prosrc FROM pg_proc WHERE oid = %s::regprocedure"
    (body,) = query(settings, source, "email_recipient_hash(text)")[0]
    (key_body,) = query(settings, source, "email_address_hash(text)")[0]
    key = re.search(r"x([0-9a-f]{64})'", key_body)
    assert key is not None
    assert key.group(1) in body


def test_each_lookup_finds_the_address_in_every_status_and_no_other(settings: Settings) -> None:
    carol = _in_every_status(settings, CAROL, "carol")
    for n, other in enumerate(OTHERS):
        _in_every_status(settings, other, f"other{n}")
    with pool(settings) as p, p.connection() as conn:
        for asked in (CAROL, CAROL.lower(), CAROL.upper()):
            found = console_reads.console_find_to(conn, asked, before=None, limit=50)
            assert sorted(r["id"] for r in found) == sorted(carol.values()), asked
            assert {r["status"] for r in found} == set(STATUSES)
            shown = lookups.find_messages_to(conn, asked, limit=50)
            assert sorted(r["id"] for r in shown) == sorted(carol.values()), asked
            # The soft-bounce streak reads sent rows only.
            assert len(bounce_reports.recent_sends_to(conn, asked, 10)) == 1
        # Newest first, a page at a time below the cursor.
        page = console_reads.console_find_to(conn, CAROL, before=carol["dead"], limit=3)
        assert [r["id"] for r in page] == sorted(
            (i for i in carol.values() if i < carol["dead"]), reverse=True
        )[:3]
        assert (
            console_reads.console_find_to(conn, "nobody@example.com", before=None, limit=50) == []
        )


def test_the_console_search_finds_sent_parked_and_in_flight_rows(settings: Settings) -> None:
    console = console_settings(settings)
    carol = _in_every_status(console, CAROL, "carol")
    others = _in_every_status(console, OTHERS[1], "other")
    with web(console) as running:
        client = signed_in(running, OPERATOR)
        token = csrf_of(client.get("/console/").text)
        page = client.post("/console/emails", data={"csrf": token, "q": CAROL.upper()}).text
    shown = {int(i) for i in re.findall(r'href="/console/emails/(\d+)">\d+<', page)}
    assert shown == set(carol.values())
    assert not shown & set(others.values())
    assert CAROL.lower() not in page.lower()
    assert recipient_tag(CAROL, secret=console.secret) in page


def test_the_lookups_read_the_hash_index_at_size(settings: Settings) -> None:
    # 60,000 rows over 20,000 addresses, mostly sent: an index scan is the plan.
    query(
        settings,
        "INSERT INTO email_outbox (idempotency_key, recipient, template, params, content_hash,"
        " message_id, priority, status)"
        " SELECT 'k' || g, 'user' || g % 20000 || '@example.com', 'login_code', '{}', 'h',"
        " '<' || g || '@t.example>', 'high',"
        " CASE WHEN g % 100 = 0 THEN 'dead' WHEN g % 100 = 1 THEN 'pending' ELSE 'sent' END"
        " FROM generate_series(1, 60000) g RETURNING 1",
    )
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        conn.execute("ANALYZE email_outbox")
        indexes = conn.execute(
            "SELECT i.indexrelid::regclass::text, i.indisvalid FROM pg_index i"
            " WHERE i.indrelid = 'email_outbox'::regclass"
            " AND pg_get_indexdef(i.indexrelid) ~ 'recipient'"
        ).fetchall()
        # One index of an address's rows; the lower(recipient) ones are gone.
        assert indexes == [("email_outbox_recipient_hash", True)]
        address = {"address": "User77@Example.com"}
        cases = {
            "console_find_to": (
                console_reads.queries,
                {"address": "user77@example.com", "before": NO_CURSOR, "limit": 50},
            ),
            "find_messages_to": (lookups.queries, {**address, "limit": 20}),
            "recent_sends_to": (bounce_reports.queries, {**address, "limit": 5}),
            "forget_rows": (data_retention.queries, {**address, "pattern": "user77@example\\.com"}),
        }
        for name, (queries, args) in cases.items():
            scans = _scans(conn, queries, name, args)
            assert "email_outbox_recipient_hash" in scans, (name, scans)
            assert "Seq Scan" not in scans, (name, scans)
        # And it is the index the search really reads.
        before = _index_scans(conn)
        rows = console_reads.console_find_to(conn, "USER77@example.com", before=None, limit=50)
        assert len(rows) == 3
        conn.execute("SELECT pg_stat_force_next_flush()")
    with psycopg.connect(settings.database_url) as conn:
        assert _index_scans(conn) > before


def _index_scans(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT idx_scan FROM pg_stat_user_indexes"
        " WHERE indexrelname = 'email_outbox_recipient_hash'"
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("asked", [CAROL, CAROL.upper()])
def test_forget_leaves_nothing_findable_by_the_address(settings: Settings, asked: str) -> None:
    carol = _in_every_status(settings, CAROL, "carol")
    other = _in_every_status(settings, OTHERS[0], "other")
    result = outbox(settings, "forget", asked, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["emails"] == len(STATUSES)
    assert "carol" not in result.stdout.lower()
    with pool(settings) as p, p.connection() as conn:
        for address in (CAROL, CAROL.lower()):
            assert console_reads.console_find_to(conn, address, before=None, limit=50) == []
            assert lookups.find_messages_to(conn, address, limit=50) == []
            assert bounce_reports.recent_sends_to(conn, address, 10) == []
        kept = console_reads.console_find_to(conn, OTHERS[0], before=None, limit=50)
        assert sorted(r["id"] for r in kept) == sorted(other.values())
    (left,) = query(
        settings,
        "SELECT count(*) FROM email_outbox WHERE lower(recipient) = lower(%s) OR id = ANY(%s)"
        " AND recipient <> 'erased@erased.invalid'",
        CAROL,
        list(carol.values()),
    )[0]
    assert left == 0
    shown = outbox(settings, "show", "--to", CAROL)
    assert shown.returncode == 1
    assert "carol" not in (shown.stdout + shown.stderr).lower()
