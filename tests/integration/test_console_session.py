"""Console sessions held server side (``console_session``), over plain HTTP against a
real `outbox web`: sign-out and an operator's revoke end a session for every copy
of its cookie, a changed user list ends it, and expired rows go."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from outbox.config import Settings
from outbox.web.console_auth import Access, hash_password
from tests.integration.console_run import (
    OPERATOR,
    USERS,
    VIEWER,
    Running,
    console_settings,
    csrf_of,
    signed_in,
    sso_settings,
    web,
)
from tests.integration.helpers import query


@pytest.fixture
def console(settings: Settings) -> Settings:
    return console_settings(settings)


@pytest.fixture
def running(console: Settings) -> Iterator[Running]:
    with web(console) as r:
        yield r


def replay(running: Running, cookies: dict[str, str]) -> httpx.Response:
    """The overview fetched by another client with a copy of a browser's cookies."""
    return httpx.get(f"{running.url}/console/", cookies=cookies, follow_redirects=False)


def sessions(settings: Settings) -> list[tuple[object, ...]]:
    return query(
        settings,
        "SELECT user_name, role, revoked_at IS NOT NULL FROM console_session ORDER BY id",
    )


def audit(settings: Settings) -> list[tuple[object, ...]]:
    return query(settings, "SELECT actor, action, target, reason FROM console_audit ORDER BY id")


def test_a_copied_cookie_is_refused_once_its_session_signed_out(
    console: Settings, running: Running
) -> None:
    client = signed_in(running, OPERATOR)
    copied = dict(client.cookies)
    assert replay(running, copied).status_code == 200  # a copy works while signed in
    (cookie,) = client.cookies.values()
    session = Access.from_settings(console).session(cookie)
    assert session is not None
    # The table keeps the nonce's hash, never the nonce or the cookie.
    dump = str(query(console, "SELECT * FROM console_session"))
    assert session.nonce not in dump
    assert cookie not in dump
    token = csrf_of(client.get("/console/").text)
    out = client.post("/console/logout", data={"csrf": token})
    assert out.status_code == 303
    assert out.headers["location"] == "/console/login"
    assert not client.cookies  # the browser dropped it; the copy is still sent
    answer = replay(running, copied)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/login"
    posted = httpx.post(
        f"{running.url}/console/emails",
        data={"csrf": token, "q": "x"},
        cookies=copied,
    )
    assert posted.status_code == 403  # its CSRF token is no better
    assert sessions(console) == [("olga", "operator", True)]
    assert [a[1] for a in audit(console)] == ["sign-in", "sign-out"]


def test_an_operator_ends_another_users_session_and_it_is_audited(
    console: Settings, running: Running
) -> None:
    victor = signed_in(running, VIEWER)
    olga = signed_in(running, OPERATOR)
    page = olga.get("/console/audit").text
    listed = re.findall(r'action="/console/sessions/(\d+)/revoke"', page)
    assert len(listed) == 2
    (victor_id,) = [
        str(i)
        for (i,) in query(console, "SELECT id FROM console_session WHERE user_name = 'victor'")
    ]
    assert victor_id in listed
    assert "(this one)" in page
    # A viewer sees the list but may not end a session.
    viewer_page = victor.get("/console/audit").text
    assert 'id="sessions"' in viewer_page
    assert "/revoke" not in viewer_page
    refused = victor.post(
        f"/console/sessions/{victor_id}/revoke",
        data={"csrf": csrf_of(viewer_page), "reason": "mine"},
    )
    assert refused.status_code == 403
    # No reason, no revoke.
    token = csrf_of(page)
    assert (
        olga.post(f"/console/sessions/{victor_id}/revoke", data={"csrf": token}).status_code == 400
    )
    assert victor.get("/console/").status_code == 200
    done = olga.post(
        f"/console/sessions/{victor_id}/revoke",
        data={"csrf": token, "reason": "laptop lost, ticket 412"},
    )
    assert done.status_code == 200
    assert "ended" in done.text
    assert victor.get("/console/").status_code == 303
    assert olga.get("/console/").status_code == 200
    assert audit(console)[-1] == (
        "olga",
        "session-revoke",
        f"session {victor_id} (victor)",
        "laptop lost, ticket 412",
    )
    again = olga.post(
        f"/console/sessions/{victor_id}/revoke", data={"csrf": token, "reason": "twice"}
    )
    assert "had ended already" in again.text
    assert [a[1] for a in audit(console)].count("session-revoke") == 1


def test_a_user_demoted_or_removed_from_the_list_loses_the_session(
    console: Settings,
) -> None:
    with web(console) as before:
        olga = signed_in(before, OPERATOR)
        victor = signed_in(before, VIEWER)
        cookies = {"olga": dict(olga.cookies), "victor": dict(victor.cookies)}
    # The list changes (read when `outbox web` starts): olga is a viewer now, victor gone.
    demoted = console_settings(console, console_users=f"olga:viewer:{hash_password(OPERATOR[1])}")
    with web(demoted) as after:
        for name in ("olga", "victor"):
            answer = httpx.get(f"{after.url}/console/", cookies=cookies[name])
            assert answer.status_code == 303, name
        assert sessions(console) == [("olga", "operator", True), ("victor", "viewer", True)]
        # Olga signs in again, as the viewer she now is.
        again = signed_in(after, OPERATOR)
        assert "olga (viewer)" in again.get("/console/").text
    # Put back as she was, the session of the viewer's sign-in ends in turn.
    with web(console_settings(console, console_users=USERS)) as restored:
        assert httpx.get(f"{restored.url}/console/", cookies=dict(again.cookies)).status_code == 303


def test_an_expired_session_is_refused_and_its_row_goes_at_a_sign_in(
    console: Settings, running: Running
) -> None:
    client = signed_in(running, OPERATOR)
    query(
        console,
        "UPDATE console_session SET expires_at = now() - interval '1 second' RETURNING id",
    )
    # The cookie's own expiry is hours away: the row decides.
    assert client.get("/console/").status_code == 303
    assert len(sessions(console)) == 1
    signed_in(running, VIEWER)
    assert sessions(console) == [("victor", "viewer", False)]


def test_a_cookie_signed_before_sessions_were_held_is_refused(
    console: Settings, running: Running
) -> None:
    # What every browser holds at the upgrade: a validly signed cookie without a row.
    access = Access.from_settings(console)
    cookie = access.cookie(access.new_session(OPERATOR[0]))
    answer = httpx.get(
        f"{running.url}/console/", cookies={access.cookie_name: cookie}, follow_redirects=False
    )
    assert answer.status_code == 303


def test_a_request_writes_the_session_row_at_most_once_a_minute(
    console: Settings, running: Running
) -> None:
    client = signed_in(running, OPERATOR)
    seen = "SELECT seen_at, xmin::text FROM console_session"
    first = query(console, seen)
    for _ in range(3):
        assert client.get("/console/").status_code == 200
    assert query(console, seen) == first  # not one new row version
    query(console, "UPDATE console_session SET seen_at = now() - interval '2 minutes' RETURNING 1")
    stale = query(console, seen)
    assert client.get("/console/").status_code == 200
    (at, _), (stale_at, _) = query(console, seen)[0], stale[0]
    assert at > stale_at


def test_single_sign_on_keeps_no_session_row(settings: Settings) -> None:
    trusting = sso_settings(settings)
    with web(trusting) as r:
        olga = r.client(headers={"X-Forwarded-User": "olga"})
        page = olga.get("/console/")
        assert "olga (operator)" in page.text
        assert olga.get("/console/audit").status_code == 200
        # Its CSRF token is the cookie's: a form posts.
        found = olga.post("/console/emails", data={"csrf": csrf_of(page.text), "q": "x"})
        assert found.status_code == 200
        # Without the proxy's header the cookie alone is nobody's.
        bare = httpx.get(f"{r.url}/console/", cookies=dict(olga.cookies))
        assert bare.status_code == 303
    assert sessions(trusting) == []
