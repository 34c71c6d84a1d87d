"""API keys of one service against another's emails: reads by id, cancels and
idempotency keys are per owner; an operator key sees all. A real `outbox web`
on loopback with real Postgres."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import outbox
from outbox.config import Settings
from outbox.db.store import api_key_rows, connections
from outbox.web import api_keys
from tests.integration.helpers import query
from tests.integration.test_http_api import Api, running

ORDER = {"to": "carol@example.com", "subject": "Order 3001", "text": "Your order is confirmed."}
LATER = {**ORDER, "send_at": "2099-01-01T09:00:00Z"}
KEY = "order-3001-confirmation"


@pytest.fixture
def api(settings: Settings) -> Iterator[Api]:
    yield from running(settings)


def key_of(api: Api, owner: str | None, *scopes: str, operator: bool = False) -> str:
    """A new key of ``owner`` (None: the default owner), made as `outbox api-keys create` does."""
    token = api_keys.new_token()
    with connections.connect(api.settings.database_url) as conn:
        api_key_rows.create_api_key(
            conn,
            name=f"test-{uuid.uuid4().hex[:8]}",
            token_hash=api_keys.token_hash(token),
            prefix=api_keys.shown_prefix(token),
            scopes=list(scopes or ["send"]),
            owner=owner,
            operator=operator,
        )
        conn.commit()
    return token


def delete(api: Api, token: str, id_: int) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return api.client.delete(f"{api.url}/v1/emails/{id_}", headers=headers)


def statuses(api: Api) -> list[tuple[Any, ...]]:
    return query(api.settings, "SELECT id, status FROM email_outbox ORDER BY id")


def test_a_key_reads_no_email_of_another_owner_by_id_or_by_key(api: Api) -> None:
    billing, shop = key_of(api, "billing"), key_of(api, "shop")
    mine = api.post("/v1/emails", billing, ORDER, key=KEY)
    assert mine.status_code == 202
    email_id = mine.json()["id"]
    assert mine.json()["idempotency_key"] == KEY  # the owner sees the key it gave
    # Walking the ids finds nothing, answered exactly as a missing id.
    missing = api.get("/v1/emails/999999", shop)
    for id_ in range(1, email_id + 3):
        answer = api.get(f"/v1/emails/{id_}", shop)
        assert (answer.status_code, answer.json()) == (404, missing.json())
    assert api.get("/v1/emails", shop, idempotency_key=KEY).status_code == 404
    own = api.get(f"/v1/emails/{email_id}", billing)
    assert own.status_code == 200
    assert own.json()["idempotency_key"] == KEY
    assert api.get("/v1/emails", billing, idempotency_key=KEY).json()["id"] == email_id


def test_a_key_cannot_cancel_another_owners_scheduled_email(api: Api) -> None:
    billing, shop = key_of(api, "billing"), key_of(api, "shop")
    email_id = api.post("/v1/emails", billing, LATER, key=KEY).json()["id"]
    assert delete(api, shop, email_id).status_code == 404
    assert statuses(api) == [(email_id, "pending")]
    assert delete(api, billing, email_id).status_code == 200
    assert statuses(api) == [(email_id, "cancelled")]


def test_an_idempotency_key_taken_by_another_owner_blocks_nothing_and_tells_nothing(
    api: Api,
) -> None:
    billing, shop = key_of(api, "billing"), key_of(api, "shop")
    # A guess at billing's next email: the key and the content.
    claimed = api.post("/v1/emails", shop, ORDER, key=KEY)
    assert claimed.status_code == 202
    assert claimed.json()["idempotency_key"] == KEY
    # Billing's real request is billing's own email, not a 200 or a 409 about shop's.
    real = api.post("/v1/emails", billing, {**ORDER, "text": "Shipped tomorrow."}, key=KEY)
    assert real.status_code == 202
    assert real.json()["id"] != claimed.json()["id"]
    # Probing again after billing's request: the same answer as before it, for any content.
    assert api.post("/v1/emails", shop, ORDER, key=KEY).status_code == 200
    assert api.post("/v1/emails", shop, {**ORDER, "text": "x"}, key=KEY).status_code == 409
    batch = {"emails": [{**ORDER, "text": "Shipped tomorrow.", "idempotency_key": KEY}]}
    repeated = api.post("/v1/emails/batch", billing, batch).json()["emails"][0]
    assert (repeated["id"], repeated["created"], repeated["idempotency_key"]) == (
        real.json()["id"],
        False,
        KEY,
    )
    conflict = api.post(
        "/v1/emails/batch", billing, {"emails": [{**ORDER, "idempotency_key": KEY}]}
    )
    assert conflict.status_code == 409
    detail = conflict.json()["detail"]
    assert KEY in detail
    assert "\u241f" not in detail  # the key as its owner gave it
    assert len(statuses(api)) == 2


def test_in_process_emails_and_existing_keys_belong_to_the_default_owner(api: Api) -> None:
    with connections.connect(api.settings.database_url) as conn:
        enqueued = outbox.enqueue(
            conn, idempotency_key=KEY, template=None, settings=api.settings, **ORDER
        )
        conn.commit()
    default = key_of(api, None)  # a key made before owners existed
    seen = api.get(f"/v1/emails/{enqueued.id}", default)
    assert (seen.status_code, seen.json()["idempotency_key"]) == (200, KEY)
    again = api.post("/v1/emails", default, ORDER, key=KEY)  # the same email, as before
    assert (again.status_code, again.json()["id"]) == (200, enqueued.id)
    shop = key_of(api, "shop")
    assert api.get(f"/v1/emails/{enqueued.id}", shop).status_code == 404
    assert delete(api, shop, enqueued.id).status_code == 404
    # The default owner reaches no other owner's email, not even by naming its stored key.
    billing = api.post("/v1/emails", key_of(api, "billing"), LATER, key=KEY).json()
    assert api.get(f"/v1/emails/{billing['id']}", default).status_code == 404
    stored = query(
        api.settings, "SELECT idempotency_key FROM email_outbox WHERE id = %s", billing["id"]
    )
    assert api.get("/v1/emails", default, idempotency_key=stored[0][0]).status_code == 404
    forged = api.post(
        "/v1/emails/batch", default, {"emails": [{**LATER, "idempotency_key": stored[0][0]}]}
    )
    assert forged.status_code == 422
    assert delete(api, default, billing["id"]).status_code == 404


def test_an_operator_key_sees_and_cancels_every_owners_email(api: Api) -> None:
    billing = api.post("/v1/emails", key_of(api, "billing"), LATER, key=KEY).json()
    operator = key_of(api, None, "send", "read", operator=True)
    seen = api.get(f"/v1/emails/{billing['id']}", operator)
    assert seen.status_code == 200
    assert seen.json()["recipient"] == ORDER["to"]
    assert delete(api, operator, billing["id"]).status_code == 200
    assert statuses(api) == [(billing["id"], "cancelled")]


def test_api_keys_create_gives_each_key_an_owner(settings: Settings) -> None:
    env = {"DATABASE_URL": settings.database_url, "PATH": "/usr/bin:/bin"}

    def outbox_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "outbox.cli", "api-keys", *args],
            check=False, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    tag = uuid.uuid4().hex[:6]  # the table is shared by the session's tests
    billing = f"billing-{tag}"
    assert outbox_cli("create", billing).returncode == 0  # its own owner, by its name
    assert outbox_cli("create", f"{billing}-2", "--owner", billing).returncode == 0
    assert outbox_cli("create", f"legacy-{tag}", "--owner", "default").returncode == 0
    assert outbox_cli("create", f"ops-{tag}", "--owner", "default", "--operator").returncode == 0
    refused = outbox_cli("create", f"billing team {tag}")  # no owner's name: --owner asked for
    assert refused.returncode == 2
    assert "--owner" in refused.stderr
    stored = query(
        settings,
        "SELECT name, owner, operator FROM outbox_api_key WHERE name LIKE %s ORDER BY id",
        f"%{tag}%",
    )
    assert stored == [
        (billing, billing, False),
        (f"{billing}-2", billing, False),
        (f"legacy-{tag}", None, False),
        (f"ops-{tag}", None, True),
    ]
    listed = outbox_cli("list").stdout
    assert f"{billing}-2  owner {billing}" in listed
    assert f"ops-{tag}  owner default (operator)" in listed
