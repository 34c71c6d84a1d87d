"""The HTTP API on a real `outbox web` on loopback, with real Postgres."""

from __future__ import annotations

import dataclasses
import datetime as dt
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from outbox.config import Settings
from outbox.db.store import api_key_rows, connections, data_retention
from outbox.redact import recipient_tag
from outbox.web import api_keys
from outbox.web.server import WebServer, make_server
from tests.integration.helpers import LOGIN, NEWS, query
from tests.keys import SECRET


@dataclasses.dataclass
class Api:
    url: str
    settings: Settings
    server: WebServer
    client: httpx.Client

    def key(self, *scopes: str) -> str:
        """A new key made the way `outbox api-keys create` makes one."""
        token = api_keys.new_token()
        with connections.connect(self.settings.database_url) as conn:
            api_key_rows.create_api_key(
                conn,
                name=f"test-{uuid.uuid4().hex[:8]}",
                token_hash=api_keys.token_hash(token),
                prefix=api_keys.shown_prefix(token),
                scopes=list(scopes or ["send"]),
            )
            conn.commit()
        return token

    def post(self, path: str, token: str, body: Any, key: str | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"}
        if key is not None:
            headers["Idempotency-Key"] = key
        return self.client.post(self.url + path, json=body, headers=headers)

    def get(self, path: str, token: str, **params: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"}
        return self.client.get(self.url + path, headers=headers, params=params)


def running(settings: Settings, **changes: Any) -> Iterator[Api]:
    settings = dataclasses.replace(settings, secret=SECRET, **changes)
    with connections.Pool(settings.database_url, name="test-api", max_size=8) as pool:
        server = make_server(settings, pool, "127.0.0.1", 0)
        server.app.api.key_cache_seconds = 0  # a revocation is seen by the next request
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            with httpx.Client(timeout=10) as client:
                yield Api(url, settings, server, client)
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=15)


@pytest.fixture
def api(settings: Settings) -> Iterator[Api]:
    yield from running(settings)


LOGIN_EMAIL = {"to": "alice@example.com", "template": "login_code", "params": LOGIN}
FREE_FORM = {"to": "alice@example.com", "subject": "Your order", "text": "Shipped."}


def count(settings: Settings) -> int:
    return int(query(settings, "SELECT count(*) FROM email_outbox")[0][0])


def test_post_enqueues_once_per_key(api: Api) -> None:
    token = api.key()
    first = api.post("/v1/emails", token, {**LOGIN_EMAIL, "priority": "high"}, key="login-1")
    assert first.status_code == 202
    body = first.json()
    assert set(body) == {"id", "message_id", "idempotency_key", "status"}
    assert body["status"] == "accepted"
    assert body["idempotency_key"] == "login-1"
    again = api.post("/v1/emails", token, {**LOGIN_EMAIL, "priority": "high"}, key="login-1")
    assert again.status_code == 200
    assert again.json() == body
    other = api.post("/v1/emails", token, {**LOGIN_EMAIL, "to": "bob@example.com"}, key="login-1")
    assert other.status_code == 409
    assert other.headers["content-type"] == "application/problem+json"
    assert other.json()["type"] == "/v1/problems/idempotency-conflict"
    assert count(api.settings) == 1
    stored = query(api.settings, "SELECT priority, status FROM email_outbox")
    assert stored == [("high", "pending")]


def test_a_purged_email_is_gone_but_its_key_answers_as_before(api: Api) -> None:
    token = api.key("send", "read")
    first = api.post("/v1/emails", token, {**LOGIN_EMAIL, "priority": "high"}, key="login-1")
    assert first.status_code == 202
    query(
        api.settings,
        "UPDATE email_outbox SET status = 'sent', sent_at = now() - interval '40 days',"
        " created_at = now() - interval '40 days' RETURNING id",
    )
    with connections.connect(api.settings.database_url) as conn:
        assert data_retention.purge(
            conn, before=dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
        ).emails
    assert api.get(f"/v1/emails/{first.json()['id']}", token).status_code == 404
    again = api.post("/v1/emails", token, {**LOGIN_EMAIL, "priority": "high"}, key="login-1")
    assert (again.status_code, again.json()) == (200, first.json())
    other = api.post("/v1/emails", token, {**LOGIN_EMAIL, "to": "bob@example.com"}, key="login-1")
    assert other.status_code == 409
    assert count(api.settings) == 0


@pytest.mark.parametrize(
    ("body", "key", "fields"),
    [
        ({}, "k", ["/to"]),
        ({**LOGIN_EMAIL, "to": 5, "priority": "urgent", "colour": "red"}, "k",
         ["/colour", "/priority", "/to"]),
        (LOGIN_EMAIL, None, ["Idempotency-Key"]),
        ({**LOGIN_EMAIL, "to": "not-an-address"}, "k", ["/to"]),
        ({**LOGIN_EMAIL, "template": "nope"}, "k", ["/template"]),
        ({**LOGIN_EMAIL, "params": {"name": "A"}}, "k", ["/params"]),
        (LOGIN_EMAIL, "x" * 300, ["Idempotency-Key"]),
        ([1, 2], "k", ["/"]),
        ({**FREE_FORM, "sender": "x@elsewhere.example"}, "k", ["/sender"]),
        ({**FREE_FORM, "cc": "not-an-address"}, "k", ["/cc"]),
        ({**FREE_FORM, "reply_to": ["a@example.com"] * 11}, "k", ["/reply_to"]),
        ({**FREE_FORM, "send_at": "2030-01-01T10:00:00"}, "k", ["/send_at"]),
        ({**FREE_FORM, "headers": {"X-A": "1\r\nBcc: x@example.com"}}, "k", ["/headers"]),
        ({**FREE_FORM, "tags": ["ok", ""]}, "k", ["/tags"]),
        ({**FREE_FORM, "metadata": {"k": [1]}}, "k", ["/metadata"]),
        ({**FREE_FORM, "subject": None}, "k", ["/subject"]),
        ({"to": "a@example.com", "subject": "s"}, "k", ["/text"]),
        ({**LOGIN_EMAIL, "subject": "s"}, "k", ["/template"]),
        ({**FREE_FORM, "locale": "de"}, "k", ["/locale"]),
        ({**FREE_FORM, "attachments": [{"filename": "a", "content": "%%"}]}, "k",
         ["/attachments/0/content"]),
        ({**FREE_FORM, "attachments": [{"filename": "../a", "content": "YQ=="}]}, "k",
         ["/attachments"]),
    ],
)  # fmt: skip
def test_invalid_requests_name_each_bad_field_and_write_nothing(
    api: Api, body: Any, key: str | None, fields: list[str]
) -> None:
    answer = api.post("/v1/emails", api.key(), body, key=key)
    assert answer.status_code == 422
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["status"] == 422
    assert problem["type"] == "/v1/problems/invalid-email"
    named = [e.get("pointer") or e.get("header") for e in problem["errors"]]
    assert named == fields
    assert all(e["detail"] for e in problem["errors"])
    assert count(api.settings) == 0


def test_a_body_that_is_not_json_is_a_400(api: Api) -> None:
    answer = api.client.post(
        api.url + "/v1/emails",
        content=b"{nope",
        headers={"Authorization": f"Bearer {api.key()}", "Idempotency-Key": "k"},
    )
    assert answer.status_code == 400
    assert count(api.settings) == 0


def test_batch_is_all_or_nothing(api: Api) -> None:
    token = api.key()
    emails = [
        {"idempotency_key": f"nl-{i}", "to": f"r{i}@example.com", "template": "newsletter",
         "params": NEWS}
        for i in range(50)
    ]  # fmt: skip
    broken = [dict(e) for e in emails]
    broken[17]["to"] = "broken@"
    answer = api.post("/v1/emails/batch", token, {"emails": broken})
    assert answer.status_code == 422
    assert [e["pointer"] for e in answer.json()["errors"]] == ["/emails/17/to"]
    assert count(api.settings) == 0
    shape = api.post("/v1/emails/batch", token, {"emails": [{"to": 1}, emails[0]]})
    assert [e["pointer"] for e in shape.json()["errors"]] == [
        "/emails/0/idempotency_key", "/emails/0/to"
    ]  # fmt: skip
    too_many = api.post("/v1/emails/batch", token, {"emails": emails * 21})
    assert too_many.status_code == 422
    done = api.post("/v1/emails/batch", token, {"emails": emails})
    assert done.status_code == 202
    assert [e["idempotency_key"] for e in done.json()["emails"]] == [f"nl-{i}" for i in range(50)]
    assert all(e["created"] for e in done.json()["emails"])
    again = api.post("/v1/emails/batch", token, {"emails": emails})
    assert again.status_code == 200
    assert [e["id"] for e in again.json()["emails"]] == [e["id"] for e in done.json()["emails"]]
    changed = [dict(e) for e in emails]
    changed[3]["params"] = {**NEWS, "title": "Changed"}
    assert api.post("/v1/emails/batch", token, {"emails": changed}).status_code == 409
    assert count(api.settings) == 50


def test_get_shows_status_and_events_with_the_recipient_redacted_unless_read(api: Api) -> None:
    sender = api.key("send")
    accepted = api.post("/v1/emails", sender, LOGIN_EMAIL, key="show-1").json()
    by_id = api.get(f"/v1/emails/{accepted['id']}", sender)
    assert by_id.status_code == 200
    email = by_id.json()
    assert email["recipient"] == recipient_tag("alice@example.com", secret=SECRET)
    assert email["status"] == "pending"
    assert email["attempts"] == 0
    assert email["message_id"] == accepted["message_id"]
    query(
        api.settings,
        "UPDATE email_outbox SET status = 'failed', status_reason = "
        "'550 5.1.1 <alice@example.com> unknown' RETURNING id",
    )
    email = api.get("/v1/emails", sender, idempotency_key="show-1").json()
    assert email["status"] == "failed"
    assert "alice@example.com" not in by_id.text + str(email)
    assert [(e["from"], e["to"]) for e in email["events"]][-1] == ("pending", "failed")
    reader = api.key("read")
    clear = api.get("/v1/emails", reader, idempotency_key="show-1").json()
    assert clear["recipient"] == "alice@example.com"
    assert "alice@example.com" in clear["status_reason"]
    assert api.get("/v1/emails/999999", sender).status_code == 404
    assert api.get("/v1/emails/abc", sender).status_code == 404
    assert api.get("/v1/emails", sender).status_code == 422


def test_keys_wrong_revoked_and_out_of_scope(api: Api) -> None:
    bare = api.client.post(
        api.url + "/v1/emails", json=LOGIN_EMAIL, headers={"Idempotency-Key": "k"}
    )
    assert bare.status_code == 401
    assert api.post("/v1/emails", "not-ours", LOGIN_EMAIL, key="k").status_code == 401
    wrong = api.post("/v1/emails", "obx_" + "A" * 43, LOGIN_EMAIL, key="k")
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"].startswith("Bearer")
    reader = api.key("read")
    assert api.post("/v1/emails", reader, LOGIN_EMAIL, key="k").status_code == 403
    token = api.key()
    assert api.post("/v1/emails", token, LOGIN_EMAIL, key="k").status_code == 202
    name = query(api.settings, "SELECT name FROM outbox_api_key ORDER BY id DESC LIMIT 1")[0][0]
    with connections.connect(api.settings.database_url) as conn:
        assert api_key_rows.revoke_api_key(conn, name)
        conn.commit()
    assert api.post("/v1/emails", token, LOGIN_EMAIL, key="k2").status_code == 401
    assert count(api.settings) == 1


def test_over_the_rate_is_a_429_with_retry_after(settings: Settings) -> None:
    # One token back every quarter of an hour: none during the test, however slow.
    for api in running(settings, api_rate=1 / 900, api_burst=3):
        token = api.key()
        codes = [api.get("/v1/emails/1", token).status_code for _ in range(4)]
        assert codes == [404, 404, 404, 429]
        limited = api.get("/v1/emails/1", token)
        assert limited.status_code == 429
        assert int(limited.headers["retry-after"]) >= 1
        assert api.get("/v1/emails/1", api.key()).status_code == 404  # per key


def test_openapi_document_is_served_without_a_key(api: Api) -> None:
    doc = api.client.get(api.url + "/v1/openapi.json")
    assert doc.status_code == 200
    assert doc.json()["openapi"] == "3.1.0"
    assert set(doc.json()["paths"]) == {
        "/v1/emails",
        "/v1/emails/batch",
        "/v1/emails/{id}",
        "/v1/events",
    }


def test_api_keys_command_creates_lists_and_revokes(settings: Settings) -> None:
    env = {"DATABASE_URL": settings.database_url, "PATH": "/usr/bin:/bin"}
    name = f"cli-{uuid.uuid4().hex[:6]}"

    def outbox(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "outbox.cli", "api-keys", *args],
            check=False, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    created = outbox("create", name, "--scope", "send", "--scope", "read")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("obx_")
    assert len(token) == 4 + 43
    stored = query(settings, "SELECT token_hash, scopes FROM outbox_api_key WHERE name = %s", name)
    assert stored == [(api_keys.token_hash(token), ["send", "read"])]
    listed = outbox("list")
    assert name in listed.stdout
    assert token not in listed.stdout
    assert api_keys.shown_prefix(token) in listed.stdout
    assert outbox("create", name).returncode == 2  # one live key per name
    assert outbox("revoke", name).stdout.strip() == "revoked"
    assert outbox("revoke", name).returncode == 1
    assert "revoked" in outbox("list").stdout


def test_too_large_wrong_method_and_unknown_route(api: Api) -> None:
    token = api.key()
    big = {**LOGIN_EMAIL, "params": {**LOGIN, "pad": "x" * 300_000}}
    too_large = api.post("/v1/emails", token, big, key="big")
    assert too_large.status_code == 413
    assert too_large.headers["content-type"] == "application/problem+json"
    headers = {"Authorization": f"Bearer {token}"}
    wrong = api.client.delete(api.url + "/v1/emails", headers=headers)
    assert wrong.status_code == 405
    assert wrong.headers["allow"] == "GET, POST"
    put = api.client.put(api.url + "/v1/emails/1", headers=headers)
    assert (put.status_code, put.headers["allow"]) == (405, "GET, DELETE")
    assert api.client.get(api.url + "/v1/nothing", headers=headers).status_code == 404
    assert count(api.settings) == 0


def test_every_field_of_enqueue_is_a_json_field(api: Api) -> None:
    body = {
        "to": "alice@example.com",
        "subject": "Your invoice",
        "html": "<p>Total: <b>7</b></p>",
        "sender": "Billing <billing@outbox.localhost>",
        "reply_to": "help@example.net",
        "cc": ["erin@example.com"],
        "bcc": "audit@example.com",
        "headers": {"X-Campaign": "spring"},
        "tags": ["invoice"],
        "metadata": {"order": 7},
        "send_at": "2099-01-01T09:00:00Z",
        "attachments": [{"filename": "invoice.txt", "content": "dG90YWw6IDc="}],
    }
    answer = api.post("/v1/emails", api.key(), body, key="invoice-7")
    assert answer.status_code == 202, answer.text
    (row,) = query(
        api.settings,
        "SELECT template, subject, body_html, body_text IS NOT NULL, sender, reply_to, cc, bcc,"
        " headers, tags, metadata, send_at = '2099-01-01T09:00:00Z', next_attempt_at = send_at,"
        " attachments->0->>'filename', attachments->0->>'content_type' FROM email_outbox",
    )
    assert row == (
        "(inline)", "Your invoice", "<p>Total: <b>7</b></p>", True,
        "Billing <billing@outbox.localhost>", ["help@example.net"], ["erin@example.com"],
        ["audit@example.com"], [["X-Campaign", "spring"]], ["invoice"], {"order": 7}, True,
        True, "invoice.txt", "text/plain",
    )  # fmt: skip
    stored = query(api.settings, "SELECT content FROM email_attachment_blob")
    assert [bytes(c) for (c,) in stored] == [b"total: 7"]
    again = api.post("/v1/emails", api.key(), body, key="invoice-7")
    assert again.status_code == 200  # the same content, the send_at parsed to the same instant
    changed = api.post("/v1/emails", api.key(), {**body, "tags": ["other"]}, key="invoice-7")
    assert changed.status_code == 409


def test_a_batch_carries_the_fields_and_names_a_bad_one_by_index(api: Api) -> None:
    token = api.key()
    emails = [
        {**FREE_FORM, "idempotency_key": "b-1", "cc": "erin@example.com"},
        {**FREE_FORM, "idempotency_key": "b-2", "send_at": "2099-01-01T09:00:00+01:00"},
    ]
    bad = api.post("/v1/emails/batch", token, {"emails": [emails[0], {**emails[1], "bcc": "x"}]})
    assert bad.status_code == 422
    assert [e["pointer"] for e in bad.json()["errors"]] == ["/emails/1/bcc"]
    assert count(api.settings) == 0
    answer = api.post("/v1/emails/batch", token, {"emails": emails})
    assert answer.status_code == 202, answer.text
    stored = query(
        api.settings,
        "SELECT idempotency_key, cc, next_attempt_at = '2099-01-01T08:00:00Z'"
        " FROM email_outbox ORDER BY idempotency_key",
    )
    assert stored == [("b-1", ["erin@example.com"], False), ("b-2", None, True)]


def delete(api: Api, token: str, id_: int, body: Any = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return api.client.request("DELETE", f"{api.url}/v1/emails/{id_}", headers=headers, json=body)


def test_delete_cancels_an_email_no_worker_has_taken(api: Api) -> None:
    token = api.key("send")
    kept = api.post("/v1/emails", token, LOGIN_EMAIL, key="to-cancel").json()["id"]
    taken = api.post("/v1/emails", token, {**LOGIN_EMAIL, "to": "b@example.com"}, key="t").json()
    assert delete(api, api.key("read"), kept).status_code == 403
    answer = delete(api, token, kept, {"reason": "order withdrawn"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "id": kept, "idempotency_key": "to-cancel", "status": "cancelled", "cancelled": True
    }  # fmt: skip
    (event,) = query(
        api.settings,
        "SELECT reason, actor FROM email_event WHERE outbox_id = %s AND to_status = 'cancelled'",
        kept,
    )
    assert event[0] == "cancelled: order withdrawn"
    assert event[1].startswith("api key test-")
    again = delete(api, token, kept)
    assert (again.status_code, again.json()["cancelled"]) == (200, False)
    with connections.connect(api.settings.database_url) as conn:
        conn.execute("UPDATE email_outbox SET status = 'sent' WHERE id = %s", (taken["id"],))
        conn.commit()
    late = delete(api, token, taken["id"])
    assert late.status_code == 409
    assert late.json()["type"] == "/v1/problems/too-late-to-cancel"
    assert "sent" in late.json()["title"] + late.json()["detail"]
    assert delete(api, token, 999_999).status_code == 404
    bad = delete(api, token, kept, {"why": 1})
    assert bad.status_code == 422
    stored = query(api.settings, "SELECT idempotency_key, status FROM email_outbox ORDER BY id")
    assert stored == [("to-cancel", "cancelled"), ("t", "sent")]
