"""The console over plain HTTP against a real `outbox web` and the test database:
sign-in, roles, CSRF, actions and their audit rows."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from outbox import enqueue
from outbox.config import Settings
from outbox.db.store import domain_checks, suppressions, webhook_rows
from outbox.domain_auth.findings import Finding, State
from outbox.errors import ConfigError
from outbox.redact import recipient_tag
from outbox.testing.sink import ACCEPT, Behaviour
from outbox.web.server import make_server
from tests.integration.console_run import (
    OPERATOR,
    VIEWER,
    Running,
    console_settings,
    csrf_of,
    signed_in,
    sso_settings,
    web,
)
from tests.integration.helpers import LOGIN, add_login, harness, pool, query
from tests.keys import OTHER_SECRET, SECRET

CAROL = "carol.customer@example.com"
DAVE = "dave.dead@example.com"


@pytest.fixture
def console(settings: Settings) -> Settings:
    return console_settings(settings, max_attempts=1)


@pytest.fixture
def running(console: Settings) -> Iterator[Running]:
    with web(console) as r:
        yield r


def make_dead(settings: Settings, key: str, to: str) -> int:
    """One login code that the relay refuses until its last attempt: dead."""
    outbox_id = add_login(settings, key, to)
    with harness(settings, lambda _: Behaviour(rcpt_reply="451 4.3.0 try again later")) as (h, _):
        h.run()
    assert query(settings, "SELECT status FROM email_outbox WHERE id = %s", outbox_id) == [
        ("dead",)
    ]
    return outbox_id


def audit(settings: Settings) -> list[tuple[object, ...]]:
    return query(
        settings, "SELECT actor, role, action, target, reason FROM console_audit ORDER BY id"
    )


def test_signing_in_needs_the_right_password_and_sets_a_strict_cookie(
    console: Settings, running: Running
) -> None:
    client = running.client()
    login = client.get("/console/login")
    token = csrf_of(login.text)
    wrong = client.post(
        "/console/login", data={"csrf": token, "name": "olga", "password": "not-it"}
    )
    assert wrong.status_code == 401
    assert client.get("/console/").status_code == 303  # still signed out
    unknown = client.post("/console/login", data={"csrf": token, "name": "x", "password": "y"})
    assert unknown.status_code == 401
    right = client.post(
        "/console/login", data={"csrf": token, "name": OPERATOR[0], "password": OPERATOR[1]}
    )
    assert right.status_code == 303
    cookie = right.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert "Path=/" in cookie
    assert client.get("/console/").status_code == 200
    assert audit(console) == [("olga", "operator", "sign-in", None, "password")]


def test_a_secure_console_marks_its_cookie_secure_with_the_host_prefix(settings: Settings) -> None:
    secure = console_settings(settings, console_secure_cookie="on")
    with web(secure) as r:
        login = httpx.get(f"{r.url}/console/login")
    cookie = login.headers["set-cookie"]
    assert cookie.startswith("__Host-outbox-console=")
    assert "; Secure" in cookie


def test_signed_out_pages_redirect_and_forms_are_refused(running: Running) -> None:
    for path in ("/console", "/console/", "/console/emails", "/console/audit"):
        answer = httpx.get(f"{running.url}{path}")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/console/login"
    answer = httpx.post(f"{running.url}/console/emails/1/requeue", data={"reason": "x"})
    assert answer.status_code == 403


def test_the_console_answers_only_when_configured(settings: Settings) -> None:
    plain = dataclasses.replace(settings, secret=SECRET)
    with web(plain) as r:
        answer = httpx.get(f"{r.url}/console/login")
    # Only the unsubscribe links answer there: no sign-in form.
    assert answer.status_code == 400
    assert "Link not valid" in answer.text
    assert "password" not in answer.text


def test_a_forged_or_missing_csrf_token_changes_nothing(
    console: Settings, running: Running
) -> None:
    outbox_id = make_dead(console, "dead-1", DAVE)
    client = signed_in(running, OPERATOR)
    other = signed_in(running, OPERATOR)
    before = audit(console)
    for data in (
        {"reason": "try again"},
        {"reason": "try again", "csrf": "0" * 32},
        {"reason": "try again", "csrf": ""},
    ):
        answer = client.post(f"/console/emails/{outbox_id}/requeue", data=data)
        assert answer.status_code == 403
    # Another session's token is no better.
    other_token = csrf_of(other.get("/console/").text)
    answer = client.post(
        f"/console/emails/{outbox_id}/requeue", data={"reason": "x", "csrf": other_token}
    )
    assert answer.status_code == 403
    assert query(console, "SELECT status FROM email_outbox WHERE id = %s", outbox_id) == [("dead",)]
    assert audit(console) == before


def test_an_operator_requeues_a_dead_email_and_it_is_audited(
    console: Settings, running: Running
) -> None:
    outbox_id = make_dead(console, "dead-2", DAVE)
    client = signed_in(running, OPERATOR)
    page = client.get(f"/console/emails/{outbox_id}")
    assert page.status_code == 200
    assert "451 4.3.0 try again later" in page.text  # the attempt, on the page
    answer = client.post(
        f"/console/emails/{outbox_id}/requeue",
        data={"csrf": csrf_of(page.text), "reason": "relay fixed"},
    )
    assert answer.status_code == 200
    assert "Requeued" in answer.text
    assert query(console, "SELECT status FROM email_outbox WHERE id = %s", outbox_id) == [
        ("pending",)
    ]
    actor, role, action, target, reason = audit(console)[-1]
    assert (actor, role, action, reason) == ("olga", "operator", "requeue", "relay fixed")
    assert target == f"email {outbox_id} (dead-2)"
    # The row's own history says the same: one status change, by operator.
    events = query(
        console,
        "SELECT from_status, to_status, reason FROM email_event WHERE outbox_id = %s ORDER BY id",
        outbox_id,
    )
    assert events[-1] == ("dead", "pending", "requeued by operator")


def test_an_action_without_a_reason_is_refused(console: Settings, running: Running) -> None:
    outbox_id = make_dead(console, "dead-3", DAVE)
    client = signed_in(running, OPERATOR)
    token = csrf_of(client.get("/console/").text)
    answer = client.post(
        f"/console/emails/{outbox_id}/requeue", data={"csrf": token, "reason": "  "}
    )
    assert answer.status_code == 400
    assert query(console, "SELECT status FROM email_outbox WHERE id = %s", outbox_id) == [("dead",)]


def test_a_viewer_may_look_but_not_act_and_never_sees_an_address(
    console: Settings, running: Running
) -> None:
    outbox_id = make_dead(console, "dead-4", DAVE)
    add_login(console, "login-1", CAROL)
    with pool(console) as p, p.connection() as conn:
        suppressions.suppress(conn, "sue.suppressed@example.com", reason="manual")
    client = signed_in(running, VIEWER)
    token = csrf_of(client.get("/console/").text)
    pages = [
        client.get(path).text
        for path in (
            "/console/",
            "/console/emails",
            f"/console/emails/{outbox_id}",
            "/console/emails/2",
            "/console/emails?status=dead",
            "/console/suppressions",
            "/console/audit",
        )
    ]
    pages.append(client.post("/console/emails", data={"csrf": token, "q": CAROL}).text)
    pages.append(client.post("/console/emails", data={"csrf": token, "q": DAVE}).text)
    pages.append(
        client.post(
            "/console/suppressions", data={"csrf": token, "address": "sue.suppressed@example.com"}
        ).text
    )
    for address in (CAROL, DAVE, "sue.suppressed@example.com"):
        for page in pages:
            assert address not in page
            assert address.split("@")[0] not in page
    tag = recipient_tag(DAVE, secret=SECRET)
    assert tag in pages[2]  # the row's page names the recipient by its tag
    assert "dead-4" in pages[-2]  # the address search found Dave's email
    for path, data in (
        (f"/console/emails/{outbox_id}/requeue", {"reason": "x"}),
        (f"/console/emails/{outbox_id}/reveal", {"reason": "x"}),
        ("/console/suppressions/add", {"reason": "x", "address": CAROL}),
        ("/console/requeue", {"reason": "x", "status": "dead", "confirm": "yes"}),
    ):
        answer = client.post(path, data={**data, "csrf": token})
        assert answer.status_code == 403
    assert query(console, "SELECT status FROM email_outbox WHERE id = %s", outbox_id) == [("dead",)]
    assert [a[2] for a in audit(console)] == ["sign-in"]


def test_an_operator_reveals_an_address_only_by_an_audited_action(
    console: Settings, running: Running
) -> None:
    outbox_id = add_login(console, "login-2", CAROL)
    client = signed_in(running, OPERATOR)
    page = client.get(f"/console/emails/{outbox_id}")
    assert CAROL not in page.text
    revealed = client.post(
        f"/console/emails/{outbox_id}/reveal",
        data={"csrf": csrf_of(page.text), "reason": "customer on the phone, ticket 881"},
    )
    assert revealed.status_code == 200
    assert CAROL in revealed.text
    entry = audit(console)[-1]
    assert entry == (
        "olga",
        "operator",
        "reveal",
        f"email {outbox_id} (login-2)",
        "customer on the phone, ticket 881",
    )
    assert CAROL not in str(audit(console))
    assert CAROL not in client.get(f"/console/emails/{outbox_id}").text  # once only


def test_search_finds_an_email_by_each_of_its_names(console: Settings, running: Running) -> None:
    outbox_id = add_login(console, "order-77-login", CAROL)
    other = add_login(console, "order-78-login", "zed@example.org")
    query(
        console,
        "UPDATE email_outbox SET provider_message_id = 'pm-abc-123' WHERE id = %s RETURNING id",
        outbox_id,
    )
    (message_id,) = query(console, "SELECT message_id FROM email_outbox WHERE id = %s", outbox_id)[
        0
    ]
    client = signed_in(running, OPERATOR)
    token = csrf_of(client.get("/console/").text)
    link = f'href="/console/emails/{outbox_id}"'
    for ref in (
        "order-77-login",
        str(message_id),
        str(message_id).strip("<>"),
        str(outbox_id),
        "pm-abc-123",
        CAROL,
        CAROL.upper(),
    ):
        page = client.post("/console/emails", data={"csrf": token, "q": ref}).text
        assert link in page, ref
        assert f'href="/console/emails/{other}"' not in page, ref
    nothing = client.post("/console/emails", data={"csrf": token, "q": "no-such-key"}).text
    assert "No email matches" in nothing
    # Filters narrow the list; a bad one is a 400 that looks nothing up.
    dead = client.get("/console/emails", params={"status": "dead"}).text
    assert link not in dead
    pending = client.get("/console/emails", params={"status": "pending", "priority": "high"})
    assert link in pending.text
    assert client.get("/console/emails", params={"status": "lost"}).status_code == 400
    assert client.get("/console/emails", params={"since": "yesterday"}).status_code == 400


def test_the_email_list_pages_by_keyset(console: Settings, running: Running) -> None:
    ids = [add_login(console, f"page-{i}", f"p{i}@example.com") for i in range(55)]
    client = signed_in(running, OPERATOR)
    first = client.get("/console/emails").text
    shown = [int(i) for i in re.findall(r'href="/console/emails/(\d+)">\d+<', first)]
    assert shown == sorted(ids, reverse=True)[:50]
    older = re.search(r'href="/console/emails\?([^"]+)" rel="next"', first)
    assert older is not None
    second = client.get("/console/emails?" + older.group(1).replace("&amp;", "&")).text
    rest = [int(i) for i in re.findall(r'href="/console/emails/(\d+)">\d+<', second)]
    assert rest == sorted(ids, reverse=True)[50:]


def test_requeue_of_a_filtered_set_asks_first_then_requeues_and_audits(
    console: Settings, running: Running
) -> None:
    dead = [make_dead(console, f"set-{i}", f"s{i}@example.com") for i in range(3)]
    client = signed_in(running, OPERATOR)
    token = csrf_of(client.get("/console/").text)
    ask = client.post(
        "/console/requeue", data={"csrf": token, "status": "dead", "reason": "outage over"}
    )
    assert ask.status_code == 200
    assert "Requeue 3 emails?" in ask.text
    assert query(console, "SELECT count(*) FROM email_outbox WHERE status = 'dead'") == [(3,)]
    done = client.post(
        "/console/requeue",
        data={"csrf": token, "status": "dead", "reason": "outage over", "confirm": "yes"},
    )
    assert done.status_code == 303
    statuses = query(console, "SELECT status FROM email_outbox WHERE id = ANY(%s)", dead)
    assert statuses == [("pending",)] * 3
    actor, _, action, target, reason = audit(console)[-1]
    assert (actor, action, target, reason) == ("olga", "requeue-set", "status=dead", "outage over")
    # A status that cannot be requeued is refused.
    refused = client.post(
        "/console/requeue", data={"csrf": token, "status": "sent", "reason": "x", "confirm": "yes"}
    )
    assert refused.status_code == 400


def test_an_operator_suppresses_and_unsuppresses_with_tags_in_the_audit(
    console: Settings, running: Running
) -> None:
    client = signed_in(running, OPERATOR)
    token = csrf_of(client.get("/console/suppressions").text)
    added = client.post(
        "/console/suppressions/add",
        data={"csrf": token, "address": "Mallory@Example.com", "scope": "all", "reason": "abuse"},
    )
    assert added.status_code == 200
    with pool(console) as p, p.connection() as conn:
        found = suppressions.find_suppression(conn, "mallory@example.com")
    assert found is not None
    assert (found.reason, found.scope, found.detail) == ("manual", "all", "abuse")
    listed = client.get("/console/suppressions").text
    assert "mallory@example.com" not in listed.lower()
    tag = recipient_tag("mallory@example.com", secret=SECRET)
    assert tag in listed
    sealed = re.search(r'name="sealed" value="([^"]+)"', listed)
    assert sealed is not None
    removed = client.post(
        "/console/suppressions/remove",
        data={"csrf": token, "sealed": sealed.group(1), "reason": "cleared by support"},
    )
    assert removed.status_code == 200
    with pool(console) as p, p.connection() as conn:
        assert suppressions.find_suppression(conn, "mallory@example.com") is None
    actions = [(a[2], a[3], a[4]) for a in audit(console)[1:]]
    assert actions == [
        ("suppression-add", tag, "abuse"),
        ("suppression-remove", tag, "cleared by support"),
    ]
    assert "mallory" not in str(audit(console)).lower()
    page = client.get("/console/audit").text
    assert "suppression-remove" in page
    assert "cleared by support" in page


def test_a_session_signed_with_another_secret_is_refused(
    console: Settings, running: Running
) -> None:
    client = signed_in(running, OPERATOR)
    cookie = next(iter(client.cookies.jar))
    body, _ = cookie.value.split(".") if cookie.value else ("", "")
    with web(dataclasses.replace(console, secret=OTHER_SECRET)) as other:
        forged = httpx.get(
            f"{other.url}/console/", cookies={cookie.name: cookie.value}, follow_redirects=False
        )
    assert forged.status_code == 303
    tampered = httpx.get(f"{running.url}/console/", cookies={cookie.name: body + ".00"})
    assert tampered.status_code == 303


def test_single_sign_on_believes_the_header_only_from_a_trusted_proxy(
    settings: Settings,
) -> None:
    trusting = sso_settings(settings)
    with web(trusting) as r:
        viewer = httpx.get(f"{r.url}/console/", headers={"X-Forwarded-User": "vera"})
        assert viewer.status_code == 200
        assert "vera (viewer)" in viewer.text
        operator = r.client(headers={"X-Forwarded-User": "olga"})
        page = operator.get("/console/")
        assert "olga (operator)" in page.text
        assert page.headers["set-cookie"]
        # The proxy's user must match the session's: olga's cookie with vera's header is vera's.
        swapped = operator.get("/console/", headers={"X-Forwarded-User": "vera"})
        assert "vera (viewer)" in swapped.text
        # No header: no sign-in, and an entry without a hash cannot sign in by password.
        assert httpx.get(f"{r.url}/console/").status_code == 303
        login = r.client()
        token = csrf_of(login.get("/console/login").text)
        answer = login.post("/console/login", data={"csrf": token, "name": "olga", "password": ""})
        assert answer.status_code == 401
    elsewhere = dataclasses.replace(trusting, console_trusted_proxies="10.9.9.9")
    with web(elsewhere) as r:
        assert (
            httpx.get(f"{r.url}/console/", headers={"X-Forwarded-User": "olga"}).status_code == 303
        )


def test_a_console_with_a_broken_setting_does_not_start(settings: Settings) -> None:
    with pool(settings) as p, pytest.raises(ConfigError, match="OUTBOX_CONSOLE_USERS"):
        make_server(
            console_settings(settings, console_users="olga:root:$argon2id$x"),
            p,
            "127.0.0.1",
            0,
        )


def test_dead_email_sent_after_requeue_through_the_console(
    console: Settings, running: Running
) -> None:
    """The whole loop over HTTP: dead, requeued by an operator, delivered by a worker."""
    outbox_id = make_dead(console, "loop-1", DAVE)
    client = signed_in(running, OPERATOR)
    page = client.get(f"/console/emails/{outbox_id}")
    client.post(
        f"/console/emails/{outbox_id}/requeue",
        data={"csrf": csrf_of(page.text), "reason": "relay back"},
    )
    with harness(console, lambda _: ACCEPT) as (h, sink):
        h.run()
    assert [m.recipients for m in sink.messages] == [[DAVE]]
    after = client.get(f"/console/emails/{outbox_id}").text
    assert 'status-sent">sent<' in after
    assert "attempt #2 (try 1 after a requeue): sent" in after  # numbered across requeues


def test_a_time_filter_lists_the_emails_enqueued_in_it(console: Settings, running: Running) -> None:
    ids = [add_login(console, f"timed-{i}", f"t{i}@example.com") for i in range(6)]
    # Enqueued a day apart, oldest first; the last one's transaction began half
    # an hour before the one enqueued just before it committed.
    days = [5, 4, 3, 2, 1, 1]
    for outbox_id, day in zip(ids, days, strict=True):
        query(
            console,
            "UPDATE email_outbox SET created_at = date_trunc('hour', now())"
            " - %s * interval '1 day' - CASE WHEN id = %s THEN interval '30 minutes'"
            " ELSE interval '0' END WHERE id = %s RETURNING id",
            day,
            ids[-1],
            outbox_id,
        )
    client = signed_in(running, OPERATOR)
    (start,) = query(console, "SELECT created_at FROM email_outbox WHERE id = %s", ids[2])[0]
    (end,) = query(console, "SELECT created_at FROM email_outbox WHERE id = %s", ids[4])[0]
    page = client.get(
        "/console/emails",
        params={"since": start.isoformat(), "until": end.isoformat()},
    ).text
    shown = [int(i) for i in re.findall(r'href="/console/emails/(\d+)">\d+<', page)]
    # ids[2] (3 days ago), ids[3] (2 days) and ids[5] (1 day and 30 minutes ago).
    assert shown == [ids[5], ids[3], ids[2]]


def test_the_tag_filter_lists_only_the_emails_enqueued_with_that_tag(
    console: Settings, running: Running
) -> None:
    plain = add_login(console, "untagged", "u@example.com")
    tagged = []
    with psycopg.connect(console.database_url) as conn:
        for i, tags in enumerate((["receipt"], ["receipt", "eu"], ["invoice"])):
            tagged.append(
                enqueue(
                    conn,
                    idempotency_key=f"tagged-{i}",
                    to=f"t{i}@example.com",
                    template="login_code",
                    params=LOGIN,
                    tags=tags,
                    settings=console,
                ).id
            )
        conn.commit()
    client = signed_in(running, OPERATOR)
    page = client.get("/console/emails", params={"tag": "receipt"}).text
    shown = [int(i) for i in re.findall(r'href="/console/emails/(\d+)">\d+<', page)]
    assert shown == [tagged[1], tagged[0]]
    assert plain not in shown
    # With a search, the tag narrows what the reference found.
    token = csrf_of(client.get("/console/").text)
    found = client.post(
        "/console/emails", data={"csrf": token, "q": "tagged-2", "tag": "receipt"}
    ).text
    assert f'href="/console/emails/{tagged[2]}"' not in found
    refused = client.get("/console/emails", params={"tag": "no spaces"})
    assert refused.status_code == 400


def test_the_trace_id_links_to_jaeger(console: Settings, running: Running) -> None:
    outbox_id = add_login(console, "traced-1", CAROL)
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    query(
        console,
        "UPDATE email_outbox SET trace_context = %s WHERE id = %s RETURNING id",
        f"00-{trace}-00f067aa0ba902b7-01",
        outbox_id,
    )
    client = signed_in(running, VIEWER)
    page = client.get(f"/console/emails/{outbox_id}").text
    assert f'href="http://jaeger.test:16686/trace/{trace}"' in page
    assert 'href="http://jaeger.test:16686"' in client.get("/console/").text


def test_an_address_search_pages_on_without_the_address_in_any_url(
    console: Settings, running: Running
) -> None:
    ids = [add_login(console, f"many-{i}", CAROL) for i in range(55)]
    query(console, "UPDATE email_outbox SET status = 'sent' RETURNING id")
    client = signed_in(running, OPERATOR)
    token = csrf_of(client.get("/console/").text)
    first = client.post("/console/emails", data={"csrf": token, "q": CAROL}).text
    shown = [int(i) for i in re.findall(r'href="/console/emails/(\d+)">\d+<', first)]
    assert shown == sorted(ids, reverse=True)[:50]
    form = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]+)">', first))
    assert set(form) >= {"csrf", "before", "sealed_q"}
    assert "carol" not in form["sealed_q"]
    second = client.post("/console/emails", data=form).text
    rest = [int(i) for i in re.findall(r'href="/console/emails/(\d+)">\d+<', second)]
    assert rest == sorted(ids, reverse=True)[50:]
    assert "carol" not in "".join(re.findall(r'href="([^"]*)"', first + second))


@pytest.mark.slow
def test_after_ten_failed_sign_ins_even_the_right_password_waits(running: Running) -> None:
    client = running.client()
    token = csrf_of(client.get("/console/login").text)
    for _ in range(10):
        wrong = client.post(
            "/console/login", data={"csrf": token, "name": "olga", "password": "guess"}
        )
        assert wrong.status_code == 401
    right = client.post(
        "/console/login", data={"csrf": token, "name": OPERATOR[0], "password": OPERATOR[1]}
    )
    assert right.status_code == 429
    assert "Too many failed sign-ins" in right.text
    assert client.get("/console/").status_code == 303


def test_the_overview_shows_each_sending_domains_last_check(
    console: Settings, running: Running
) -> None:
    client = signed_in(running, VIEWER)
    assert "Not checked yet: run `outbox domain check`" in client.get("/console/").text
    with pool(console) as p, p.connection() as conn:
        domain_checks.save_domain_checks(
            conn,
            [
                Finding("shop.example", "spf", State.OK, '"v=spf1 -all" (0 lookups)'),
                Finding(
                    "shop.example",
                    "dmarc",
                    State.WARNING,
                    "_dmarc.shop.example: p=none; rua=mailto:dmarc@shop.example",
                    "at _dmarc.shop.example, move to p=quarantine",
                ),
            ],
        )
    page = client.get("/console/").text
    assert '<span class="status status-held">warning</span>' in page
    assert "fix:</strong> at _dmarc.shop.example, move to p=quarantine" in page
    assert "dmarc@shop.example" not in page  # addresses are tagged, as everywhere here


def test_the_overview_shows_a_paused_webhook_endpoint_and_why(
    console: Settings, running: Running
) -> None:
    with pool(console) as p, p.connection() as conn:
        endpoint = webhook_rows.create_endpoint(
            conn,
            url="https://hooks.example.com/outbox?token=s3cr3t",
            types=None,
            addresses=False,
            sealed="sealed",
        )
        webhook_rows.set_state(conn, endpoint, "paused", "evt_7 failed 8 times, last: HTTP 503")
    page = signed_in(running, VIEWER).get("/console/").text
    assert "Webhook endpoints" in page
    assert "https://hooks.example.com/outbox?…" in page
    assert "s3cr3t" not in page
    assert "paused: evt_7 failed 8 times, last: HTTP 503" in page
