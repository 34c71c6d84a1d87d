"""`outbox web` serving the exporter's metrics at /metrics, only with credentials."""

from __future__ import annotations

import base64
import dataclasses
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import Message

from outbox.config import Settings
from outbox.telemetry.metrics_server import metrics_registry
from outbox.web.server import make_server
from tests.integration.helpers import add_newsletter, pool
from tests.keys import SECRET

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
BASIC = "prometheus:a-long-scrape-password"
TOKEN = "t" * 40


def get(url: str, authorization: str | None = None) -> tuple[int, str, Message]:
    headers = {"Authorization": authorization} if authorization else {}
    try:
        with OPENER.open(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers


@contextmanager
def web(settings: Settings, metrics_auth: str) -> Iterator[str]:
    settings = dataclasses.replace(settings, secret=SECRET, metrics_auth=metrics_auth)
    registry, collector = metrics_registry(settings.database_url)
    with pool(settings) as p:
        server = make_server(settings, p, "127.0.0.1", 0, registry)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
        finally:
            server.shutdown()
            server.server_close()
            collector.close()


def _basic(credentials: str) -> str:
    return "Basic " + base64.b64encode(credentials.encode()).decode()


def test_metrics_need_the_basic_credentials(settings: Settings) -> None:
    add_newsletter(settings, 3)
    with web(settings, BASIC) as url:
        status, _, headers = get(url)
        assert status == 401
        assert headers.get("WWW-Authenticate") == 'Basic realm="outbox metrics"'
        assert get(url, _basic("prometheus:wrong"))[0] == 401
        assert get(url, f"Bearer {BASIC}")[0] == 401
        status, body, headers = get(url, _basic(BASIC))
    assert status == 200
    assert headers.get("Content-Type", "").startswith("text/plain; version=0.0.4")
    assert 'outbox_emails{priority="bulk",status="pending"} 3.0' in body
    assert "outbox_exporter_up 1.0" in body


def test_metrics_take_a_bearer_token(settings: Settings) -> None:
    with web(settings, TOKEN) as url:
        assert get(url)[0] == 401
        assert get(url, "Bearer " + "x" * 40)[0] == 401
        status, body, _ = get(url, f"Bearer {TOKEN}")
    assert status == 200
    assert "outbox_exporter_up 1.0" in body


def test_without_credentials_configured_there_is_no_metrics_page(settings: Settings) -> None:
    with web(settings, "") as url:
        status, _, _ = get(url, f"Bearer {TOKEN}")
    assert status == 404
