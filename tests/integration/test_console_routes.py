"""The console's router over plain HTTP: what a path or method the console does
not have gets, before and after sign-in, and the same page with or without a
trailing slash."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from outbox.config import Settings
from outbox.web.console import CSP
from tests.integration.console_run import (
    OPERATOR,
    VIEWER,
    Running,
    console_settings,
    csrf_of,
    signed_in,
    web,
)
from tests.integration.helpers import add_login

CAROL = "carol.customer@example.com"


@pytest.fixture
def running(settings: Settings) -> Iterator[Running]:
    with web(console_settings(settings)) as r:
        yield r


def test_a_signed_out_client_learns_nothing_of_which_pages_exist(running: Running) -> None:
    for path in ("/console/nope", "/console/emails/1/reveal", "/console/logout"):
        answer = httpx.get(f"{running.url}{path}")
        assert (answer.status_code, answer.headers["location"]) == (303, "/console/login")
    for path in ("/console/nope", "/console/audit", "/console/emails/x/y/z"):
        answer = httpx.post(f"{running.url}{path}", data={"reason": "x"})
        assert answer.status_code == 403
        assert "Sign in first." in answer.text


def test_a_path_or_method_the_console_does_not_have_is_not_found_once_signed_in(
    running: Running,
) -> None:
    client = signed_in(running, VIEWER)
    for path in ("/console/nope", "/console/logout", "/console/requeue", "/console/sessions/1"):
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert "No such page." in answer.text
        assert answer.headers["content-security-policy"] == CSP
    token = csrf_of(client.get("/console/").text)
    for path in ("/console/", "/console/audit", "/console/emails/1", "/console/sessions/1/end"):
        assert client.post(path, data={"csrf": token}).status_code == 404, path
    assert client.get("/console/emails/abc").status_code == 400  # a page, with a bad id


def test_an_operator_check_comes_before_the_action_is_looked_up(
    settings: Settings, running: Running
) -> None:
    outbox_id = add_login(settings, "login-1", CAROL)
    viewer = signed_in(running, VIEWER)
    token = csrf_of(viewer.get("/console/").text)
    refused = viewer.post(f"/console/emails/{outbox_id}/destroy", data={"csrf": token})
    assert refused.status_code == 403
    assert viewer.post("/console/suppressions/purge", data={"csrf": token}).status_code == 403
    operator = signed_in(running, OPERATOR)
    token = csrf_of(operator.get("/console/").text)
    unknown = operator.post(f"/console/emails/{outbox_id}/destroy", data={"csrf": token})
    assert unknown.status_code == 404
    assert "No such action." in unknown.text
    bad_id = operator.post("/console/emails/abc/reveal", data={"csrf": token, "reason": "x"})
    assert bad_id.status_code == 400


def test_a_trailing_slash_names_the_same_page(settings: Settings, running: Running) -> None:
    outbox_id = add_login(settings, "login-2", CAROL)
    client = signed_in(running, OPERATOR)
    for path in ("/console/emails", "/console/audit", f"/console/emails/{outbox_id}"):
        plain, slashed = client.get(path), client.get(path + "/")
        assert plain.status_code == slashed.status_code == 200
        assert _title(plain.text) == _title(slashed.text)
    token = csrf_of(client.get("/console").text)
    revealed = client.post(
        f"/console/emails/{outbox_id}/reveal/", data={"csrf": token, "reason": "ticket 12"}
    )
    assert revealed.status_code == 200
    assert CAROL in revealed.text


def test_head_put_and_a_large_body(running: Running) -> None:
    client = signed_in(running, VIEWER)
    head = client.head("/console/emails")
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-security-policy"] == CSP
    put = client.put("/console/emails", content=b"x")
    assert (put.status_code, put.text) == (405, "GET or POST\n")
    token = csrf_of(client.get("/console/").text)
    large = client.post("/console/emails", data={"csrf": token, "q": "x" * 300_000})
    assert (large.status_code, large.text) == (413, "body too large\n")


def _title(page: str) -> str:
    return page.split("<title>", 1)[1].split("</title>", 1)[0]
