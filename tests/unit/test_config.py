from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from outbox.config import PACKAGE_TEMPLATES, Settings
from outbox.errors import ConfigError
from outbox.redact import recipient_tag
from tests.keys import OTHER_SECRET, SECRET


def test_defaults_work_on_this_machine() -> None:
    settings = Settings.from_env({})
    assert settings.database_url.startswith("postgresql://")
    assert settings.templates == PACKAGE_TEMPLATES
    assert (settings.retry_base_seconds, settings.retry_cap_seconds, settings.max_attempts) == (
        30.0,
        21600.0,
        8,
    )
    assert settings.greylist_min_seconds == 60
    assert settings.stuck_seconds == 60


def test_environment_names() -> None:
    settings = Settings.from_env(
        {
            "DATABASE_URL": "postgresql://db/x",
            "REDIS_URL": "redis://r/1",
            "SMTP_URL": "smtp://relay:587",
            "OUTBOX_FROM": "Shop <shop@example.com>",
            "OUTBOX_MAX_ATTEMPTS": "3",
            "OUTBOX_RETRY_BASE_SECONDS": "0.5",
            "OUTBOX_ON_UNCERTAIN": "hold",
            "OUTBOX_MAX_IN_FLIGHT": "",
        }
    )
    assert settings.database_url == "postgresql://db/x"
    assert settings.redis_url == "redis://r/1"
    assert settings.smtp_url == "smtp://relay:587"
    assert settings.sender == "Shop <shop@example.com>"
    assert settings.max_attempts == 3
    assert settings.retry_base_seconds == 0.5
    assert settings.on_uncertain == "hold"
    assert settings.max_in_flight == 2000


def test_round_trip_through_the_environment() -> None:
    settings = Settings(max_attempts=4, namespace="x", templates=PACKAGE_TEMPLATES)
    assert Settings.from_env(settings.to_env()) == settings


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OUTBOX_MAX_ATTEMPTS": "many"}, "not a valid int"),
        ({"OUTBOX_STUCK_SECONDS": "soon"}, "not a valid float"),
        ({"OUTBOX_ON_UNCERTAIN": "shrug"}, "retry or hold"),
        ({"OUTBOX_SMTP_STARTTLS": "maybe"}, "STARTTLS"),
        ({"OUTBOX_MAX_ATTEMPTS": "0"}, "at least 1"),
        ({"OUTBOX_TEMPLATES": "/nonexistent/templates"}, "not a directory"),
    ],
)
def test_bad_settings(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env)


def test_recipient_tag_hides_the_address(tmp_path: Path) -> None:
    tag = recipient_tag("Alice.Smith@Example.com", secret=SECRET)
    assert tag.endswith("@example.com")
    assert "alice" not in tag.lower()
    assert tag == recipient_tag("alice.smith@example.com", secret=SECRET)
    assert tag != recipient_tag("bob@example.com", secret=SECRET)


def test_regression_recipient_tag_is_keyed() -> None:
    """Finding 4: an unkeyed hash can be matched against a list of addresses."""
    address = "alice@example.com"
    keyed = recipient_tag(address, secret=SECRET)
    assert keyed != recipient_tag(address, secret="")
    assert keyed != recipient_tag(address, secret=OTHER_SECRET)
    unkeyed = hashlib.sha256(address.encode()).hexdigest()[:12]
    assert not keyed.startswith(unkeyed)


def test_every_setting_is_documented() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    names = Settings().to_env()
    undocumented = [name for name in names if f"`{name}`" not in readme]
    assert undocumented == []
