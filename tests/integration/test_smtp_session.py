"""TLS, authentication and session refusals against a real aiosmtpd server."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiosmtpd.smtp import AuthResult, LoginPassword

from outbox import preflight
from outbox.config import Settings
from outbox.models import Stage
from outbox.testing.sink import SmtpSink
from outbox.transports.base import OutgoingMessage
from outbox.transports.smtp import SmtpConfig, SmtpTransport, is_loopback

MESSAGE = OutgoingMessage(
    envelope_from="no-reply@shop.example",
    recipient="alice@example.com",
    data=b"From: no-reply@shop.example\r\nTo: alice@example.com\r\nSubject: hi\r\n"
    b"Message-ID: <m1@shop.example>\r\n\r\n.leading dot\r\nbody\r\n",
    message_id="<m1@shop.example>",
    idempotency_key="k1",
)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def server_tls(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


def check_password(
    server: Any, session: Any, envelope: Any, mechanism: str, data: Any
) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (b"app", b"s3cret:/@")
    return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535


@pytest.fixture
def tls_sink(ca: trustme.CA) -> Iterator[SmtpSink]:
    with SmtpSink(
        tls_context=server_tls(ca),
        require_starttls=True,
        authenticator=check_password,
        auth_required=True,
    ) as sink:
        yield sink


def send(config: SmtpConfig) -> Any:
    transport = SmtpTransport(config)
    try:
        return transport.send(MESSAGE)
    finally:
        transport.close()


def test_starttls_and_auth(tls_sink: SmtpSink, ca_file: str) -> None:
    # Credentials with URL-escaped characters.
    url = f"smtp://app:s3cret%3A%2F%40@127.0.0.1:{tls_sink.port}"
    reply = send(SmtpConfig.from_url(url, starttls="required", ca_file=ca_file))
    assert (reply.stage, reply.code) == (Stage.FINAL_REPLY, 250)
    assert len(tls_sink.messages) == 1
    # Dot-stuffing survived the trip: the body is exactly what was sent.
    assert tls_sink.messages[0].data.endswith(b"\r\n.leading dot\r\nbody\r\n")


def test_wrong_password_is_a_session_refusal(tls_sink: SmtpSink, ca_file: str) -> None:
    url = f"smtp://app:wrong@127.0.0.1:{tls_sink.port}"
    reply = send(SmtpConfig.from_url(url, starttls="required", ca_file=ca_file))
    assert reply.stage is Stage.AUTH
    assert reply.code == 535
    assert tls_sink.messages == []


def test_untrusted_certificate_fails_at_starttls(tls_sink: SmtpSink) -> None:
    url = f"smtp://app:x@127.0.0.1:{tls_sink.port}"
    reply = send(SmtpConfig.from_url(url, starttls="required"))
    assert reply.stage is Stage.STARTTLS
    assert reply.code is None
    assert reply.error is not None
    assert reply.error.startswith("tls")


def test_required_starttls_refuses_a_plain_relay() -> None:
    with SmtpSink() as plain:
        reply = send(SmtpConfig.from_url(plain.url, starttls="required"))
        assert reply.stage is Stage.STARTTLS
        assert reply.error == "relay does not offer STARTTLS"
        assert plain.messages == []


def test_implicit_tls(ca: trustme.CA, ca_file: str) -> None:
    with SmtpSink(ssl_context=server_tls(ca)) as sink:
        reply = send(SmtpConfig.from_url(f"smtps://127.0.0.1:{sink.port}", ca_file=ca_file))
        assert reply.code == 250
        assert len(sink.messages) == 1


def test_one_connection_is_reused_and_reopened(ca_file: str) -> None:
    with SmtpSink() as sink:
        transport = SmtpTransport(SmtpConfig.from_url(sink.url))
        try:
            for _ in range(3):
                assert transport.send(MESSAGE).code == 250
            assert len(transport._open_connections) == 1
            # The relay drops idle connections: the next send reconnects by itself.
            next(iter(transport._open_connections)).sock.close()  # type: ignore[union-attr]
            assert transport.send(MESSAGE).code == 250
        finally:
            transport.close()
        assert len(sink.messages) == 4


def test_config_from_url_hides_the_password() -> None:
    config = SmtpConfig.from_url("smtps://user:hunter2@relay.example")
    assert (config.host, config.port, config.implicit_tls) == ("relay.example", 465, True)
    assert config.password == "hunter2"
    assert "hunter2" not in repr(config)
    assert SmtpConfig.from_url("smtp://relay.example").port == 25


def test_regression_no_password_in_clear_when_the_relay_offers_no_starttls() -> None:
    """Finding 6: with the default opportunistic STARTTLS, AUTH PLAIN went out in clear."""
    tried: list[bytes] = []

    def record(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        tried.append(data.password)
        return AuthResult(success=True)

    with SmtpSink(authenticator=record, auth_require_tls=False) as plain:
        url = f"smtp://app:hunter2@127.0.0.1:{plain.port}"
        reply = send(SmtpConfig.from_url(url, starttls="opportunistic"))
        assert reply.stage is Stage.STARTTLS  # a session refusal: retried, not failed
        assert reply.error is not None
        assert "never sent in clear" in reply.error
        assert tried == []
        assert plain.messages == []
        # Allowed only when asked for, and only for a relay on this host.
        allowed = send(SmtpConfig.from_url(url, plaintext_auth="loopback"))
        assert allowed.code == 250
        assert tried == [b"hunter2"]


@pytest.mark.parametrize(
    "url",
    [
        "smtp://user:hunter2@[relay.example:25",
        "smtp://user:hunter2@relay.example:notaport",
        "smtps://user:hunter2@relay.example:99999",
        "ftp://user:hunter2@relay.example",
    ],
)
def test_regression_a_bad_smtp_url_never_shows_the_password(url: str) -> None:
    (refused,) = preflight.problems(Settings.from_env({"SMTP_URL": url}), ["worker"])
    assert "SMTP_URL" in refused
    assert "hunter2" not in refused


def test_credentials_with_starttls_never_are_refused_at_start() -> None:
    clear = Settings.from_env(
        {"SMTP_URL": "smtp://u:pw@relay.example:25", "OUTBOX_SMTP_STARTTLS": "never"}
    )
    (refused,) = preflight.common_problems(clear)
    assert "in clear" in refused
    loopback = Settings.from_env(
        {
            "SMTP_URL": "smtp://u:pw@127.0.0.1:25",
            "OUTBOX_SMTP_STARTTLS": "never",
            "OUTBOX_SMTP_PLAINTEXT_AUTH": "loopback",
        }
    )
    assert preflight.common_problems(loopback) == []


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("127.0.0.2", True),
        ("relay.example", False),
        ("10.0.0.1", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
