"""A DKIM key per sending domain (OUTBOX_DKIM_KEYS): parsing, choice, verification."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dkim as dkimpy
import pytest

from outbox import preflight
from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.message.compose import Composer
from outbox.message.dkim import Signers, parse_dkim_keys
from outbox.models import Priority
from tests.unit.test_dkim import DATE, dns_for, ed25519_pem, rsa_pem


def test_entries_name_a_selector_and_a_file_per_domain() -> None:
    text = " Billing.Example.com = s1:/etc/dkim/billing.pem ,example.com=2026a:/k/main.pem,"
    assert parse_dkim_keys(text) == {
        "billing.example.com": ("s1", "/etc/dkim/billing.pem"),
        "example.com": ("2026a", "/k/main.pem"),
    }
    assert parse_dkim_keys("") == {}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("example.com", "domain=selector:/path"),
        ("example.com=s1", "domain=selector:/path"),
        ("example.com=:/k.pem", "domain=selector:/path"),
        ("=s1:/k.pem", "domain=selector:/path"),
        ("bücher.example=s1:/k.pem", "not an ASCII name"),
        ("example.com=s 1:/k.pem", "not an ASCII name"),
        ("example.com=s1:/a.pem, EXAMPLE.com=s2:/b.pem", "twice"),
    ],
)
def test_bad_entries_are_config_errors(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_dkim_keys(text)


@pytest.fixture
def keyed(tmp_path: Path) -> Settings:
    (tmp_path / "billing.pem").write_bytes(ed25519_pem())
    (tmp_path / "main.pem").write_bytes(rsa_pem())
    return Settings(
        sender="Shop <no-reply@shop.example>",
        dkim_keys=f"billing.example.com=b1:{tmp_path / 'billing.pem'},"
        f"example.com=m1:{tmp_path / 'main.pem'}",
    )


def test_a_from_domain_takes_its_own_key_else_its_parent_s(keyed: Settings) -> None:
    signers = Signers.from_settings(keyed)
    own = signers.for_domain("billing.example.com")
    parent = signers.for_domain("news.example.com")
    assert own is not None
    assert (own.domain, own.selector) == ("billing.example.com", "b1")
    assert parent is not None
    assert (parent.domain, parent.selector) == ("example.com", "m1")
    assert signers.for_domain("shop.example") is None  # no key and no OUTBOX_DKIM_DOMAIN
    assert signers.for_domain("com") is None


def test_the_single_key_settings_remain_the_default(keyed: Settings, tmp_path: Path) -> None:
    (tmp_path / "shop.pem").write_bytes(rsa_pem())
    settings = dataclasses.replace(
        keyed,
        dkim_selector="s0",
        dkim_domain="shop.example",
        dkim_private_key=str(tmp_path / "shop.pem"),
    )
    signers = Signers.from_settings(settings)
    fallback = signers.for_domain("elsewhere.example")
    assert fallback is not None
    assert fallback.domain == "shop.example"
    assert signers.for_domain("billing.example.com") is not signers.default


def test_each_message_is_signed_by_its_from_domain(keyed: Settings) -> None:
    from outbox.db.store import sending  # noqa: PLC0415

    composer = Composer(keyed)
    signers = composer.signers
    for sender, domain in [
        ("Billing <billing@billing.example.com>", "billing.example.com"),
        ("News <news@news.example.com>", "example.com"),
    ]:
        row = sending.OutboxRow(
            id=1, idempotency_key="k", recipient="alice@example.org", template="login_code",
            params={"name": "A", "code": "1", "product": "P", "minutes": 5},
            message_id="<m@shop.example>", priority=Priority.HIGH.value, attempts=1,
            created_at=DATE, age_from=DATE, sender=sender,
        )  # fmt: skip
        template = composer.templates.get("login_code")
        row = dataclasses.replace(row, template_version=template.version)
        data = composer.message(row, to=row.recipient, connect=_no_db)
        signer = signers.by_domain[domain]
        assert f"d={domain};".encode() in data.split(b"\r\n\r\n")[0].replace(b"\r\n ", b"")
        assert dkimpy.verify(data, dnsfunc=dns_for(signer))


def _no_db() -> object:
    raise AssertionError("the template is in this process: no database needed")


def test_an_unreadable_key_file_stops_every_process(tmp_path: Path) -> None:
    settings = Settings(dkim_keys=f"example.com=s1:{tmp_path / 'missing.pem'}")
    for process in preflight.PROCESSES:
        problems = preflight.problems(settings, [process])
        assert any("OUTBOX_DKIM_KEYS (example.com)" in p and "read" in p for p in problems)
    (tmp_path / "bad.pem").write_text(
        "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n"
    )
    with pytest.raises(
        ConfigError, match=r"OUTBOX_DKIM_KEYS \(example.com\) is not an unencrypted"
    ):
        Signers.from_settings(Settings(dkim_keys=f"example.com=s1:{tmp_path / 'bad.pem'}"))
