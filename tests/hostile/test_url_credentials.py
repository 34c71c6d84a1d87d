"""A password in a URL setting is masked however the URL is written, parsed or not."""

from __future__ import annotations

import pytest

from outbox import preflight, redact
from outbox.config import Settings
from tests.integration.test_cli import outbox
from tests.keys import SECRET

PASSWORD = "Hunter2-relay-pass"
# Passwords with unescaped URL delimiters, and typos after the scheme.
SMTP_URLS = [
    f"smtp://mailer:{PASSWORD}/x@relay.example:587",
    f"smtp://mailer:{PASSWORD}#x@relay.example:587",
    f"smtp://mailer:{PASSWORD}?x@relay.example:587",
    f"smtp://mailer:{PASSWORD}@x@relay.example:587",
    f"smtp//mailer:{PASSWORD}@relay.example:587",
    f"smtp:/mailer:{PASSWORD}@relay.example:587",
    f"smtp:mailer:{PASSWORD}@relay.example:587",
    f"mailer:{PASSWORD}@relay.example:587",
    f"smtps://mailer:{PASSWORD}@relay.example:notaport",
]


@pytest.mark.parametrize("url", SMTP_URLS)
def test_regression_config_never_prints_a_password_in_a_malformed_url(
    settings: Settings, url: str
) -> None:
    for action in ("show", "check"):
        result = outbox(settings, "config", action, env={"SMTP_URL": url})
        assert PASSWORD not in result.stdout + result.stderr, action
        assert PASSWORD[:8] not in result.stdout + result.stderr, action
    shown = {s.env: s.value for s in preflight.effective(Settings(smtp_url=url))}
    assert PASSWORD not in shown["SMTP_URL"]


@pytest.mark.parametrize("url", SMTP_URLS)
def test_regression_logs_never_show_a_password_in_a_malformed_url(url: str) -> None:
    redactor = redact.Redactor.from_settings(Settings(secret=SECRET, smtp_url=url))
    said = redactor.text(f"cannot connect to {url}: refused; password {PASSWORD}")
    assert PASSWORD not in said


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("database_url", f"host=db user=app password={PASSWORD} dbname=outbox"),
        ("database_url", f"host=db password='{PASSWORD}' dbname=outbox"),
        ("database_url", f"postgresql://app@db/outbox?password={PASSWORD}"),
        ("broker_url", f"amqp://app:{PASSWORD}@rabbit:5672/%2f"),
        ("listen_database_url", f"postgresql://app:{PASSWORD}@db/outbox"),
        ("redis_url", f"redis://:{PASSWORD}@cache:6379/0"),
    ],
)
def test_regression_every_url_setting_masks_its_password(name: str, value: str) -> None:
    settings = Settings(secret=SECRET, **{name: value})
    shown = [s.value for s in preflight.effective(settings)]
    assert not any(PASSWORD in v for v in shown)
    said = redact.Redactor.from_settings(settings).text(f"failed: {value}; {PASSWORD}")
    assert PASSWORD not in said


def test_a_well_formed_url_keeps_its_user_and_host() -> None:
    shown = preflight.masked("smtp_url", f"smtp://mailer:{PASSWORD}@relay.example:587")
    assert shown == "smtp://mailer:****@relay.example:587"
    assert preflight.masked("smtp_url", "smtp://relay.example:25") == "smtp://relay.example:25"
    assert preflight.masked("database_url", "host=db user=app dbname=outbox") == (
        "host=db user=app dbname=outbox"
    )
