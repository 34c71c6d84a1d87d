"""The console's single sign-on believes the TCP peer, never a forwarded header:
`outbox web` on loopback with the console behind a named proxy, real Postgres."""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from outbox.config import Settings
from tests.integration.console_run import sso_settings, web


def test_regression_forwarded_for_does_not_make_a_local_client_the_trusted_proxy(
    settings: Settings,
) -> None:
    """Anyone on the host (a sidecar, an SSRF) claimed to be the proxy 10.0.0.5 in
    X-Forwarded-For, and the SSO header then signed them in as an operator."""
    behind = dataclasses.replace(sso_settings(settings), console_trusted_proxies="10.0.0.5")
    with web(behind) as r:
        for forwarded in (
            {"X-Forwarded-For": "10.0.0.5"},
            {"X-Forwarded-For": "203.0.113.1, 10.0.0.5"},
            {"Forwarded": "for=10.0.0.5"},
            {"X-Real-IP": "10.0.0.5"},
        ):
            answer = httpx.get(
                f"{r.url}/console/", headers={"X-Forwarded-User": "olga", **forwarded}
            )
            assert answer.status_code == 303, forwarded
            assert answer.headers["location"] == "/console/login"


@pytest.mark.parametrize("client", ["203.0.113.7", "10.0.0.5", "not an address"])
def test_the_trusted_proxy_stays_trusted_whatever_client_it_forwards(
    settings: Settings, client: str
) -> None:
    """A proxy names its client in X-Forwarded-For; that must not end its own trust."""
    with web(sso_settings(settings)) as r:  # the proxy is 127.0.0.1
        answer = httpx.get(
            f"{r.url}/console/", headers={"X-Forwarded-User": "olga", "X-Forwarded-For": client}
        )
        assert answer.status_code == 200
        assert "olga (operator)" in answer.text
