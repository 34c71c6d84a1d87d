"""Findings 3 and 4: no key, password, secret or address in logs, spans, rows or CLI output."""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from outbox import redact
from outbox.config import Settings
from outbox.testing.sink import Behaviour
from tests.integration.helpers import add_login, harness, query
from tests.integration.test_cli import outbox
from tests.keys import SECRET

BOB = "bob.private@example.org"
UNKNOWN = f"550 5.1.1 <{BOB}>: Recipient address rejected: User unknown"


def _pem_body() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    body = "".join(line for line in pem.splitlines() if not line.startswith("-----"))
    return pem, body


def _pieces(secret: str, size: int = 16) -> list[str]:
    return [secret[i : i + size] for i in range(0, len(secret) - size, size)]


@pytest.mark.parametrize(
    "command",
    [
        ["templates", "preview", "login_code", "--out", "{tmp}"],
        ["status"],
        ["bounces", "reprocess"],
        ["show", "anything"],
    ],
)
def test_regression_misquoted_dkim_key_never_reaches_output(
    settings: Settings, tmp_path: Path, command: list[str]
) -> None:
    """Finding 3: a key body without its PEM lines was echoed whole."""
    _, body = _pem_body()
    for value in (body, f"'{body}'", body[:300]):
        env = {
            "OUTBOX_DKIM_SELECTOR": "s1",
            "OUTBOX_DKIM_DOMAIN": "shop.example",
            "OUTBOX_DKIM_PRIVATE_KEY": value,
        }
        args = [arg.format(tmp=tmp_path) for arg in command]
        result = outbox(settings, *args, env=env)
        assert result.returncode == 2
        assert "OUTBOX_DKIM_PRIVATE_KEY" in result.stderr
        output = result.stdout + result.stderr
        assert not any(piece in output for piece in _pieces(body)), output


def test_regression_worker_refuses_to_start_on_a_bad_key_without_showing_it(
    settings: Settings,
) -> None:
    _, body = _pem_body()
    env = {
        **settings.to_env(),
        "OUTBOX_DKIM_SELECTOR": "s1",
        "OUTBOX_DKIM_DOMAIN": "shop.example",
        "OUTBOX_DKIM_PRIVATE_KEY": body,
    }
    result = subprocess.run(
        [sys.executable, "-c", "import outbox.worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "OUTBOX_DKIM_PRIVATE_KEY" in result.stderr
    assert not any(piece in result.stderr for piece in _pieces(body))


def test_regression_relay_reply_address_is_tagged_in_logs_and_spans(
    settings: Settings, caplog: pytest.LogCaptureFixture, spans: InMemorySpanExporter
) -> None:
    """Finding 4: "550 5.1.1 <bob@…>" reached worker logs, span events and status."""
    settings = dataclasses.replace(settings, secret=SECRET)
    spans.clear()
    add_login(settings, "login-1", BOB)
    caplog.set_level(logging.DEBUG)
    with harness(settings, lambda a: Behaviour(rcpt_reply=UNKNOWN)) as (h, _):
        h.run()
    assert query(settings, "SELECT status FROM email_outbox")[0][0] == "failed"
    # The stored reply keeps the address: support may need it (`outbox show --reveal`).
    assert BOB in query(settings, "SELECT reply_text FROM email_attempt")[0][0]
    logged = caplog.text
    assert "User unknown" in logged
    assert BOB not in logged
    assert redact.recipient_tag(BOB, secret=SECRET) in logged
    finished = spans.get_finished_spans()
    assert any(s.name == "outbox deliver" for s in finished)
    dump = json.dumps(
        [
            (
                s.name,
                dict(s.attributes or {}),
                [(e.name, dict(e.attributes or {})) for e in s.events],
                s.status.description,
            )
            for s in finished
        ],
        default=str,
    )
    assert "User unknown" in dump
    assert "bob.private" not in dump


def test_regression_show_tags_addresses_unless_revealed_and_finds_by_address(
    settings: Settings,
) -> None:
    settings = dataclasses.replace(settings, secret=SECRET)
    add_login(settings, "login-1", BOB)
    with harness(settings, lambda a: Behaviour(rcpt_reply=UNKNOWN)) as (h, _):
        h.run()
    shown = outbox(settings, "show", "login-1")
    assert shown.returncode == 0, shown.stderr
    assert "User unknown" in shown.stdout
    assert "bob.private" not in shown.stdout
    as_json = outbox(settings, "show", "login-1", "--json")
    assert "bob.private" not in as_json.stdout
    revealed = outbox(settings, "show", "login-1", "--reveal")
    assert BOB in revealed.stdout
    # Support looks the person up by address, read from stdin: not in argv, not in output.
    by_address = subprocess.run(
        [sys.executable, "-m", "outbox.cli", "show", "--to", "-"],
        input=BOB.upper() + "\n",
        env=settings.to_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert by_address.returncode == 0, by_address.stderr
    assert "login-1" in by_address.stdout
    assert "bob.private" not in by_address.stdout.lower()
    nobody = outbox(settings, "show", "--to", "nobody@example.org")
    assert nobody.returncode == 1
    assert "nobody" not in nobody.stderr


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("550 5.1.1 <bob@example.org>: unknown", "bob@example.org"),
        ("to jörg@bücher.example failed", "jörg@bücher.example"),
        ("a.b+c@sub.example.co.uk, d@e.io", "a.b+c@sub.example.co.uk"),
        ("sender: <x@y.example> size=1", "x@y.example"),
    ],
)
def test_addresses_are_tagged_in_text(text: str, hidden: str) -> None:
    cleaned = redact.addresses(text, secret=SECRET)
    assert hidden not in cleaned
    assert redact.recipient_tag(hidden, secret=SECRET) in cleaned


def test_redactor_hides_every_configured_secret() -> None:
    pem, body = _pem_body()
    settings = Settings(
        secret=SECRET,
        previous_secrets="p" + SECRET[::-1],
        smtp_url="smtp://user:relay-pa%24%24word@relay.example:587",
        database_url="postgresql://app:db-password-1@db/x",
        redis_url="redis://:redis-password-1@r:6379/0",
        postmark_server_token="pm-server-token-1",
        resend_api_key="re_resend-key-1",
        postmark_webhook_auth="hook:hook-password-1",
        resend_webhook_secret="whsec_c2VjcmV0LXNpZ25pbmcta2V5",
        dkim_private_key=pem.replace("\n", "\\n"),
    )
    secrets = [
        SECRET,
        "p" + SECRET[::-1],
        "relay-pa$$word",
        "relay-pa%24%24word",
        "db-password-1",
        "redis-password-1",
        "pm-server-token-1",
        "re_resend-key-1",
        "hook-password-1",
        "c2VjcmV0LXNpZ25pbmcta2V5",
        body[100:164],
        body[500:540],
    ]
    redactor = redact.Redactor.from_settings(settings)
    for secret in secrets:
        cleaned = redactor.text(f"error: {secret} and more")
        assert secret not in cleaned
        assert redact.HIDDEN in cleaned
    # A re-wrapped key (another line length) is hidden too.
    rewrapped = "\n".join(body[i : i + 76] for i in range(0, len(body), 76))
    assert not any(piece in redactor.text(rewrapped) for piece in _pieces(body, 40))


def test_log_filter_redacts_messages_arguments_and_tracebacks() -> None:
    settings = Settings(secret=SECRET)
    logger = logging.getLogger("outbox.test.redaction")
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Keep()
    logger.addHandler(handler)
    logger.propagate = False
    try:
        redact.install(settings, logger)
        logger.warning("secret %s to %s", SECRET, BOB)
        try:
            raise ValueError(f"boom {SECRET} {BOB}")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    text = "\n".join(records)
    assert SECRET not in text
    assert BOB not in text
    assert "ValueError: boom [redacted]" in text


def test_our_own_addresses_stay_readable() -> None:
    settings = Settings(secret=SECRET, bounce_domain="bounces.shop.example")
    redactor = redact.Redactor.from_settings(settings)
    # Our own by their shapes: a Message-ID of ours, a VERP return path.
    msgid = "<0123456789abcdef0123456789abcdef@outbox.localhost>"
    verp = "bounces+1-0123456789abcdef@bounces.shop.example"
    cleaned = redactor.text(f"{msgid} from {verp} to bob@example.org")
    assert msgid in cleaned
    assert verp in cleaned
    assert "bob@example.org" not in cleaned


def test_regression_bounces_ingest_and_classify_print_no_address(
    settings: Settings, tmp_path: Path
) -> None:
    """Finding 4: `outbox bounces ingest` printed the bounced recipients."""
    from tests.integration.test_bounces import dsn  # noqa: PLC0415

    report = dsn("bounced.person@example.net", "<x@elsewhere.example>")
    path = tmp_path / "bounce.eml"
    path.write_bytes(report)
    for command in (["bounces", "ingest", str(path)], ["bounces", "classify", str(path)]):
        result = outbox(settings, *command)
        assert result.returncode == 0, result.stderr
        assert "5.1.1" in result.stdout
        assert "bounced.person" not in result.stdout
    revealed = outbox(settings, "bounces", "classify", str(path), "--reveal")
    assert "bounced.person@example.net" in revealed.stdout


def test_regression_spans_record_failures_by_type_only(
    settings: Settings, spans: InMemorySpanExporter
) -> None:
    """An exception's message can quote a row, and with it an address."""
    import psycopg  # noqa: PLC0415

    import outbox as api  # noqa: PLC0415
    from outbox.errors import InvalidAddress  # noqa: PLC0415
    from tests.integration.helpers import LOGIN  # noqa: PLC0415

    spans.clear()
    with psycopg.connect(settings.database_url) as conn, pytest.raises(InvalidAddress):
        api.enqueue(
            conn,
            idempotency_key="k",
            to="bob.private@@example.org",
            template="login_code",
            params=LOGIN,
            settings=settings,
        )
    [span] = [s for s in spans.get_finished_spans() if s.name == "outbox enqueue"]
    assert span.status.description == "InvalidAddress"
    assert [dict(e.attributes or {}) for e in span.events] == [{"exception.type": "InvalidAddress"}]
