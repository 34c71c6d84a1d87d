"""A Redis behind TLS (`rediss://`), as Heroku and other hosts serve it.

Debian's redis-server, started by the test on loopback with a certificate from
a private CA (trustme): the relay and the worker pools reach it through
`rediss://` URLs, with the CA given (`ssl_ca_certs=`) or, as Heroku's
self-signed certificates require, without verification (`ssl_cert_reqs=none`).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import trustme

from outbox.config import Settings
from outbox.testing.pipeline import Pipeline
from outbox.testing.private_servers import free_port, wait_ready
from outbox.testing.sink import SmtpSink
from tests.integration.helpers import add_login, add_newsletter, statuses, wait_until


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """(TLS port, CA file) of a private redis-server that speaks only TLS."""
    # Debian's, built with TLS (the embedded one in the venv is not).
    binary = shutil.which("redis-server", path="/usr/bin:/usr/local/bin")
    if binary is None:
        pytest.fail("redis-server is not installed (apt-get install redis-server)")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca_file, cert_file, key_file = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    port = free_port()
    command = [
        binary,
        "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
        "--tls-cert-file", str(cert_file), "--tls-key-file", str(key_file),
        "--tls-ca-cert-file", str(ca_file), "--tls-auth-clients", "no",
        "--save", "", "--appendonly", "no", "--dir", str(tmp_path),
    ]  # fmt: skip
    log = (tmp_path / "redis.log").open("ab")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        client = redis.Redis.from_url(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca_file}")
        wait_ready(client.ping, 10, f"redis-server with TLS on port {port}")
        client.close()
        yield port, ca_file
    finally:
        proc.kill()
        proc.wait(timeout=10)
        log.close()


def _drain_through(settings: Settings, url: str, tmp_path: Path) -> list[str]:
    settings = dataclasses.replace(settings, redis_url=url)
    add_newsletter(settings, 50)
    add_login(settings, "login-tls", "alice@example.com")
    with SmtpSink() as sink:
        env = {
            **dataclasses.replace(settings, smtp_url=sink.url).to_env(),
            "OUTBOX_LOG_LEVEL": "INFO",
        }
        with Pipeline(env, high=(1, 2), bulk=(1, 4), log_dir=tmp_path):
            wait_until(lambda: statuses(settings) == {"sent": 51}, timeout=60)
        return sink.message_ids()


@pytest.mark.slow
def test_the_pipeline_runs_through_a_tls_redis_with_its_ca(
    settings: Settings, tls_redis: tuple[int, Path], tmp_path: Path
) -> None:
    port, ca_file = tls_redis
    ids = _drain_through(settings, f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca_file}", tmp_path)
    assert len(ids) == len(set(ids)) == 51


@pytest.mark.slow
def test_a_self_signed_certificate_is_taken_with_verification_off(
    settings: Settings, tls_redis: tuple[int, Path], tmp_path: Path
) -> None:
    # Heroku Redis: a self-signed certificate, so clients turn verification off.
    port, _ = tls_redis
    ids = _drain_through(settings, f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=none", tmp_path)
    assert len(ids) == 51


def test_an_unverifiable_certificate_is_refused(tls_redis: tuple[int, Path]) -> None:
    # Without the CA and with verification on (the default), no connection is made:
    # a man in the middle cannot pose as the broker.
    port, _ = tls_redis
    client = redis.Redis.from_url(f"rediss://127.0.0.1:{port}/0", socket_connect_timeout=5)
    with pytest.raises(redis.ConnectionError, match="certificate verify failed"):
        client.ping()
