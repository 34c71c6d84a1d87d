"""A real `outbox web` with its console on loopback, and users to sign in with."""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

from outbox.config import Settings
from outbox.web.console_auth import hash_password
from outbox.web.server import make_server
from tests.integration.helpers import pool
from tests.keys import SECRET

OPERATOR = ("olga", "operator-password-1")
VIEWER = ("victor", "viewer-password-1")
_HASHES = {name: hash_password(password) for name, password in (OPERATOR, VIEWER)}
USERS = f"olga:operator:{_HASHES['olga']},victor:viewer:{_HASHES['victor']}"
_CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def console_settings(settings: Settings, **extra: object) -> Settings:
    values: dict[str, object] = {
        "secret": SECRET,
        "console_users": USERS,
        "console_secure_cookie": "off",  # plain http on loopback
        "jaeger_url": "http://jaeger.test:16686",
        **extra,
    }
    return dataclasses.replace(settings, **values)  # type: ignore[arg-type]


def sso_settings(settings: Settings) -> Settings:
    """The console behind a trusted proxy on loopback that names the user in a header."""
    return console_settings(
        settings,
        console_users="olga:operator:",
        console_sso_header="X-Forwarded-User",
        console_trusted_proxies="127.0.0.1",
    )


@dataclass
class Running:
    url: str  # http://127.0.0.1:PORT
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, **kwargs: object) -> httpx.Client:
        """A client of this server's, closed with it."""
        made = httpx.Client(base_url=self.url, timeout=30, **kwargs)  # type: ignore[arg-type]
        self.clients.append(made)
        return made


@contextmanager
def web(settings: Settings) -> Iterator[Running]:
    """`outbox web` serving ``settings`` (a console among them) until the block ends."""
    with pool(settings) as p:
        server = make_server(settings, p, "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            host, port = server.server_address
            running = Running(f"http://{host}:{port}")
            yield running
        finally:
            for client in running.clients:
                client.close()
            server.shutdown()
            server.server_close()
            thread.join(timeout=15)


def csrf_of(page: str) -> str:
    found = _CSRF.search(page)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def signed_in(running: Running, user: tuple[str, str]) -> httpx.Client:
    client = running.client()
    login = client.get("/console/login")
    assert login.status_code == 200
    name, password = user
    answer = client.post(
        "/console/login",
        data={"csrf": csrf_of(login.text), "name": name, "password": password},
    )
    assert answer.status_code == 303, answer.text
    return client
