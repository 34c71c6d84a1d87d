"""Concurrent wrong passwords at the console's sign-in: the limit holds under a
burst, and argon2 (64 MiB a verification) runs a bounded number at once
(`outbox web` on loopback, real Postgres)."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator

import httpx
import pytest

from outbox.config import Settings
from outbox.web import console_auth
from outbox.web.console_sign_in import HASHES_AT_ONCE
from tests.integration.console_run import Running, console_settings, csrf_of, web

# Seconds by design: twenty argon2 verifications of 64 MiB, two at a time.
pytestmark = pytest.mark.slow

BURST = 20


@pytest.fixture
def running(settings: Settings) -> Iterator[Running]:
    with web(console_settings(settings)) as r:
        yield r


def _burst(running: Running, names: list[str]) -> list[int]:
    """One wrong password per name, all sent at once: the statuses."""
    forms = []
    for name in names:
        client = running.client()
        forms.append((client, csrf_of(client.get("/console/login").text), name))
    start = threading.Barrier(len(forms))

    def attempt(form: tuple[httpx.Client, str, str]) -> int:
        client, token, name = form
        start.wait()
        data = {"csrf": token, "name": name, "password": "guess"}
        return client.post("/console/login", data=data).status_code

    with concurrent.futures.ThreadPoolExecutor(len(forms)) as pool:
        return list(pool.map(attempt, forms))


def test_regression_a_burst_of_wrong_passwords_is_checked_no_more_than_the_limit(
    running: Running,
) -> None:
    """20 concurrent wrong passwords for one name were all checked (each 401): the
    limiter's check and its count of failures were apart."""
    statuses = _burst(running, ["olga"] * BURST)
    assert statuses.count(401) <= 10, statuses  # SignInLimiter's failures per window
    assert set(statuses) <= {401, 429}


def test_argon2_verifications_run_a_bounded_number_at_once(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Different names pass the per-name limit; memory is bounded by the gate."""
    at_once, peak, lock = 0, 0, threading.Lock()
    verify = console_auth.Access.sign_in

    def counted(self: console_auth.Access, name: str, password: str) -> object:
        nonlocal at_once, peak
        with lock:
            at_once += 1
            peak = max(peak, at_once)
        try:
            return verify(self, name, password)
        finally:
            with lock:
                at_once -= 1

    monkeypatch.setattr(console_auth.Access, "sign_in", counted)
    statuses = _burst(running, [f"name{n}" for n in range(BURST)])
    assert statuses.count(401) == BURST  # every one checked, in turn
    assert 1 <= peak <= HASHES_AT_ONCE
