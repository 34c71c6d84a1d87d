"""Every email shown whole, in the console and in `outbox show`: free-form content
previewed, every field it was enqueued with, attempts numbered across requeues,
the reason in every list, a key's own words kept with its address tagged."""

from __future__ import annotations

import datetime as dt
import html
import json
import re
from collections.abc import Iterator

import psycopg
import pytest

from outbox import enqueue
from outbox.config import Settings
from outbox.redact import recipient_tag
from outbox.testing.sink import ACCEPT
from tests.integration.console_run import (
    OPERATOR,
    VIEWER,
    Running,
    console_settings,
    signed_in,
    web,
)
from tests.integration.helpers import NEWS, harness, query
from tests.integration.test_cli import outbox
from tests.integration.test_console import make_dead
from tests.keys import SECRET

ALICE = "alice.invoice@example.com"
SEND_AT = dt.datetime(2099, 1, 1, 9, 0, tzinfo=dt.UTC)


@pytest.fixture
def console(settings: Settings) -> Settings:
    return console_settings(settings, max_attempts=1)


@pytest.fixture
def running(console: Settings) -> Iterator[Running]:
    with web(console) as r:
        yield r


def tag(address: str) -> str:
    return recipient_tag(address, secret=SECRET)


def add_invoice(settings: Settings) -> int:
    """An email with no template: its content stored with it, every field set."""
    with psycopg.connect(settings.database_url) as conn:
        done = enqueue(
            conn,
            idempotency_key=f"invoice-{ALICE}",
            to=ALICE,
            template=None,
            subject="Your invoice 7",
            html="<p>Total: <b>7 EUR</b></p>",
            text="Total: 7 EUR",
            sender="Billing <billing@outbox.localhost>",
            reply_to=["help@example.net"],
            cc=["erin@example.com"],
            bcc="audit@example.com",
            headers={"X-Campaign": "spring"},
            tags=["invoice", "eu"],
            metadata={"order": 7, "paid": True},
            send_at=SEND_AT,
            attachments=[{"filename": "invoice.txt", "content": b"total: 7"}],
            settings=settings,
        )
    return done.id


def field(page: str, name: str) -> str:
    found = re.search(rf'<dd[^>]*id="{name}">(.*?)</dd>', page, re.S)
    assert found, f"no field {name}"
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip()


def test_an_email_without_a_template_shows_whole(console: Settings, running: Running) -> None:
    outbox_id = add_invoice(console)
    page = signed_in(running, VIEWER).get(f"/console/emails/{outbox_id}").text
    assert "Cannot compose it here" not in page
    assert "from the content stored with the email" in page
    assert field(page, "subject") == "Your invoice 7"
    assert "Total: 7 EUR" in page.split('id="text-part"')[1]
    assert "&lt;b&gt;7 EUR&lt;/b&gt;" in page  # the HTML part, in the sandboxed frame
    assert field(page, "recipient") == tag(ALICE)
    # The key keeps its own words; only the address in it is tagged, as the recipient is.
    assert field(page, "key") == f"invoice-{tag(ALICE)}"
    assert field(page, "sender").endswith("@outbox.localhost>")
    assert field(page, "cc") == tag("erin@example.com")
    assert field(page, "bcc").startswith(tag("audit@example.com"))
    assert field(page, "reply-to") == tag("help@example.net")
    assert field(page, "own-headers") == "X-Campaign: spring"
    assert field(page, "tags") == "invoice eu"
    assert json.loads(field(page, "metadata")) == {"order": 7, "paid": True}
    assert field(page, "files") == "invoice.txt (text/plain, 8 bytes)"
    assert 'scheduled for</dt><dd class="time">2099-01-01 09:00:00 UTC' in page
    for clear in (ALICE, "erin@example.com", "audit@example.com", "help@example.net"):
        assert clear not in page
    # An operator's audited reveal shows them in clear.
    operator = signed_in(running, OPERATOR)
    shown = operator.get(f"/console/emails/{outbox_id}").text
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', shown)
    assert csrf
    revealed = operator.post(
        f"/console/emails/{outbox_id}/reveal", data={"csrf": csrf.group(1), "reason": "ticket 9"}
    ).text
    assert field(revealed, "key") == f"invoice-{ALICE}"
    assert field(revealed, "cc") == "erin@example.com"


def test_a_templated_email_shows_its_locale_and_the_list_its_reason(
    console: Settings, running: Running
) -> None:
    with psycopg.connect(console.database_url) as conn:
        news = enqueue(
            conn, idempotency_key="nl-1", to="r1@example.com", template="newsletter",
            params=NEWS, tags=["nl"], settings=console,
        )  # fmt: skip
    # As enqueue stores the variant a locale picked (the shipped templates have none).
    query(console, "UPDATE email_outbox SET locale = 'de' RETURNING id")
    dead = make_dead(console, f"pw-{ALICE}", ALICE)
    client = signed_in(running, VIEWER)
    page = client.get(f"/console/emails/{news.id}").text
    assert "locale de" in page
    assert "from the row's template version" in page
    listed = client.get("/console/emails?status=dead").text
    row = re.search(rf'<tr><td><a href="/console/emails/{dead}">.*?</tr>', listed, re.S)
    assert row, listed
    assert "gave up after 1 attempts" in row.group()  # the reason, in the dead list
    assert f"pw-{tag(ALICE)}" in row.group()
    assert ALICE not in listed


def test_attempts_are_numbered_across_requeues(console: Settings, running: Running) -> None:
    dead = make_dead(console, "code-1", ALICE)
    assert outbox(console, "requeue", "code-1").returncode == 0
    with harness(console, lambda _: ACCEPT) as (h, _):
        h.run()
    page = signed_in(running, VIEWER).get(f"/console/emails/{dead}").text
    attempts = page.split('id="attempts"')[1].split("</table>")[0]
    labels = re.findall(r'<td class="time">(#[^<]+)</td>', attempts)
    assert labels == ["#1", "#2 (try 1 after a requeue)"]


def test_outbox_show_tags_each_address_alike_and_keeps_the_key_readable(
    console: Settings,
) -> None:
    add_invoice(console)
    query(console, "UPDATE email_outbox SET send_at = NULL, next_attempt_at = now() RETURNING id")
    with harness(console, lambda _: ACCEPT) as (h, _):
        h.run()
    shown = outbox(console, "show", f"invoice-{ALICE}")
    assert shown.returncode == 0, shown.stderr
    lines = {
        name.strip(): value.strip()
        for name, _, value in (line.partition(": ") for line in shown.stdout.splitlines())
    }
    assert lines["idempotency_key"] == f"invoice-{tag(ALICE)}"
    assert lines["cc"] == tag("erin@example.com")  # no list quoting around it
    assert lines["bcc"] == tag("audit@example.com")
    assert lines["headers"] == "X-Campaign: spring"
    assert lines["tags"] == "invoice; eu"
    assert json.loads(lines["metadata"]) == {"order": 7, "paid": True}
    assert lines["subject"] == "Your invoice 7"
    # The attempts section names each recipient with the same tag.
    assert f"cc  {tag('erin@example.com')}:" in shown.stdout
    for clear in (ALICE, "erin@example.com", "audit@example.com"):
        assert clear not in shown.stdout
    as_json = json.loads(outbox(console, "show", f"invoice-{ALICE}", "--json").stdout)
    assert as_json["email"]["idempotency_key"] == f"invoice-{tag(ALICE)}"
    assert as_json["email"]["cc"] == [tag("erin@example.com")]
