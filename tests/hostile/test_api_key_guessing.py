"""Guessing API keys: failed authentications are limited per client address
before they cost a database lookup (`outbox web` on loopback, real Postgres)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from outbox.config import Settings
from outbox.web.server import FAILED_AUTH_BURST
from tests.integration.test_http_api import Api, running

GUESSES = 400


@pytest.fixture
def api(settings: Settings) -> Iterator[Api]:
    yield from running(settings, console_trusted_proxies="127.0.0.3")


def _from(address: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=10)


def _guess(client: httpx.Client, api: Api, **headers: str) -> int:
    token = "obx_" + uuid.uuid4().hex + "x" * 11
    answer = client.get(
        api.url + "/v1/emails/1", headers={"Authorization": f"Bearer {token}", **headers}
    )
    return answer.status_code


def test_regression_guessed_keys_are_refused_without_a_lookup_past_the_limit(api: Api) -> None:
    """400 wrong keys in under a second were each a database lookup (each 401)."""
    with _from("127.0.0.2") as guesser:
        statuses = [_guess(guesser, api) for _ in range(GUESSES)]
        assert statuses[:FAILED_AUTH_BURST] == [401] * FAILED_AUTH_BURST
        assert set(statuses[FAILED_AUTH_BURST:]) == {429}
        # A forwarded address from a client that is no proxy changes nothing.
        assert _guess(guesser, api, **{"X-Forwarded-For": "198.51.100.9"}) == 429
        limited = guesser.get(api.url + "/v1/emails/1", headers={"Authorization": "Bearer x"})
        assert int(limited.headers["retry-after"]) >= 1
    # Another client address has its own budget, and a live key is served.
    with _from("127.0.0.1") as other:
        token = api.key()
        answer = other.get(api.url + "/v1/emails/1", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 404


def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_budget(api: Api) -> None:
    with _from("127.0.0.3") as proxy:  # OUTBOX_CONSOLE_TRUSTED_PROXIES
        first = [
            _guess(proxy, api, **{"X-Forwarded-For": "198.51.100.1"})
            for _ in range(FAILED_AUTH_BURST + 1)
        ]
        assert first[-1] == 429
        # The proxy appends the address it saw: the last entry, never the client's own claim.
        assert _guess(proxy, api, **{"X-Forwarded-For": "198.51.100.1, 198.51.100.2"}) == 401
        assert _guess(proxy, api, **{"X-Forwarded-For": "198.51.100.2, 198.51.100.1"}) == 429
