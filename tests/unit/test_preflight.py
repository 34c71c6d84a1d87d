"""Start-up checks and the settings table (no servers: nothing here connects)."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from outbox import preflight
from outbox.config import Settings
from outbox.domain_auth.checker import setting_warnings
from outbox.errors import ConfigError
from tests.keys import SECRET


def test_every_setting_has_its_readers() -> None:
    for field in fields(Settings):
        assert preflight.readers(field.name) <= set(preflight.PROCESSES), field.name
        assert preflight.readers(field.name), field.name


def test_the_defaults_start_every_process() -> None:
    # The bounce server without OUTBOX_BOUNCE_DOMAIN starts too, idle (it says so).
    assert preflight.problems(Settings()) == []


@pytest.mark.parametrize(
    ("change", "process", "names"),
    [
        ({"smtp_url": "htp://foo"}, "worker", "SMTP_URL"),
        ({"smtp_url": "smtp://user:pw@relay.example:abc"}, "worker", "SMTP_URL"),
        ({"transport": "postmark"}, "worker", "OUTBOX_POSTMARK_SERVER_TOKEN"),
        ({"transport": "carrier-pigeon"}, "worker", "OUTBOX_TRANSPORT"),
        ({"attachments_dir": "/no/such/dir"}, "worker", "OUTBOX_ATTACHMENTS_DIR"),
        ({"attachments_dir": "/no/such/dir"}, "app", "OUTBOX_ATTACHMENTS_DIR"),
        ({"unsubscribe_url": "http://x.example/u"}, "worker", "OUTBOX_UNSUBSCRIBE_URL"),
        ({"redis_url": "http://127.0.0.1:6379"}, "relay", "REDIS_URL"),
        ({"redis_url": "http://127.0.0.1:6379"}, "worker", "REDIS_URL"),
        ({"database_url": "mysql://db.example/x"}, "metrics", "DATABASE_URL"),
        ({"database_url": "nonsense"}, "relay", "DATABASE_URL"),
        ({"postmark_webhook_auth": "no-colon"}, "web", "OUTBOX_POSTMARK_WEBHOOK_AUTH"),
        ({"resend_webhook_secret": "plain"}, "web", "OUTBOX_RESEND_WEBHOOK_SECRET"),
    ],
)
def test_a_broken_setting_names_its_variable(
    change: dict[str, str], process: str, names: str
) -> None:
    settings = replace(Settings(), **change)  # type: ignore[arg-type]
    found = preflight.problems(settings, [process])
    assert len(found) == 1
    assert names in found[0]


def test_a_setting_only_another_process_reads_does_not_stop_this_one() -> None:
    broken_smtp = replace(Settings(), smtp_url="htp://foo")
    assert preflight.problems(broken_smtp, ["relay", "web", "metrics", "app"]) == []


def test_settings_or_exit_prints_one_line_per_problem(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        preflight.settings_or_exit("worker", {"SMTP_URL": "htp://foo"})
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "outbox worker: cannot start: SMTP_URL must look like smtp://[user:pass@]host[:port] "
        "or smtps://…\n"
    )


def test_settings_or_exit_stops_on_a_value_from_env_cannot_parse(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        preflight.settings_or_exit("relay", {"OUTBOX_MAX_IN_FLIGHT": "many"})
    assert "OUTBOX_MAX_IN_FLIGHT" in capsys.readouterr().err


@pytest.mark.parametrize(
    "sender", ["nobody", "Shop <shop>", "A <a@b.example>\r\nBcc: x@y.example", "", "<@x.example>"]
)
def test_a_malformed_from_is_refused(sender: str) -> None:
    with pytest.raises(ConfigError, match="OUTBOX_FROM"):
        Settings(sender=sender).validate()


def test_secrets_never_print_and_urls_hide_their_password() -> None:
    settings = replace(
        Settings(),
        secret="k" * 40,
        postmark_server_token="pm-token-value",
        smtp_url="smtp://user:hunter2@relay.example:587",
        database_url="postgresql://app:dbpass@db.example/app",
        dkim_private_key="-----BEGIN PRIVATE KEY-----abc",
    )
    shown = {s.env: s for s in preflight.effective(settings)}
    printed = " ".join(s.value for s in shown.values())
    for secret in ("k" * 40, "pm-token-value", "hunter2", "dbpass", "BEGIN PRIVATE"):
        assert secret not in printed
    assert shown["SMTP_URL"].value == "smtp://user:****@relay.example:587"
    assert shown["OUTBOX_SECRET"].value == "****"
    assert not shown["OUTBOX_SECRET"].default
    assert shown["REDIS_URL"].default
    assert shown["OUTBOX_FROM"].readers == ("app", "worker", "web")  # web: the HTTP API


def test_a_value_that_is_not_a_url_is_masked_whole() -> None:
    assert preflight.masked("smtp_url", "smtp://u:p@h:notaport") == "****"


MULTI_HOST = "postgresql://app:dbpass@db1:5432,db2:5433/app?target_session_attrs=read-write"


def test_a_url_of_several_hosts_is_shown_with_every_host_and_no_password() -> None:
    assert preflight.masked("database_url", MULTI_HOST) == (
        "postgresql://app:****@db1:5432,db2:5433/app?target_session_attrs=read-write"
    )
    assert preflight.masked("database_url", "postgresql://a:pw@[::1]:5432,db2/app") == (
        "postgresql://a:****@[::1]:5432,db2/app"
    )


@pytest.mark.parametrize(
    "url", ["postgresql://a:pw@db1:54x,db2/app", "postgresql://a:pw@db1,,db2/app"]
)
def test_several_hosts_one_of_which_does_not_read_are_masked_whole(url: str) -> None:
    assert preflight.masked("database_url", url) == "****"


def test_a_database_url_of_several_hosts_is_one_libpq_reads() -> None:
    assert preflight.database_url_problem(MULTI_HOST) is None
    settings = replace(Settings(), secret=SECRET, database_url=MULTI_HOST)
    assert not [p for p in preflight.problems(settings) if "DATABASE_URL" in p]


def test_templates_directory_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="OUTBOX_TEMPLATES"):
        Settings(templates=tmp_path / "missing").validate()


@pytest.mark.parametrize(
    ("auth", "ok"),
    [
        ("", True),
        ("prometheus:sixteen-chars-pw", True),
        ("t" * 32, True),
        ("prometheus:short", False),
        (":sixteen-chars-password", False),
        ("t" * 31, False),
    ],
)
def test_the_metrics_credentials_must_be_hard_to_guess(auth: str, ok: bool) -> None:
    settings = replace(Settings(), secret=SECRET, metrics_auth=auth)
    found = [
        line for line in preflight.problems(settings, ["web"]) if "OUTBOX_METRICS_AUTH" in line
    ]
    assert (found == []) is ok
    assert all(auth not in line for line in found if auth)


def test_a_sending_process_warns_of_what_receivers_will_hold_and_starts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    env = {
        "OUTBOX_FROM": "Shop <shop@shop.example>",
        "OUTBOX_SENDER_DOMAINS": "shop.example,dev.localhost",
        "OUTBOX_BOUNCE_DOMAIN": "bounces.elsewhere.example",
        "OUTBOX_SECRET": SECRET,
        "OUTBOX_TEMPLATES": str(tmp_path),
    }
    settings = preflight.settings_or_exit("relay", env)
    assert settings.sender_domains == "shop.example,dev.localhost"
    said = capsys.readouterr().err.splitlines()
    assert said == [
        "outbox relay: warning: mail from shop.example is not signed with DKIM, which Gmail,"
        " Yahoo and Microsoft require: set OUTBOX_DKIM_KEYS",
        "outbox relay: warning: OUTBOX_BOUNCE_DOMAIN bounces.elsewhere.example does not align"
        " with shop.example: DMARC rests on DKIM alone for its mail",
    ]  # dev.localhost is in no public DNS: nothing to say
    preflight.settings_or_exit("web", env)
    assert capsys.readouterr().err == ""


def test_a_key_of_another_domain_is_a_warning(tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    key.write_bytes(
        ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    settings = Settings(
        sender="A <a@shop.example>",
        dkim_selector="s1",
        dkim_domain="esp.example",
        dkim_private_key=str(key),
    )
    (warning,) = setting_warnings(settings)
    assert warning.startswith("mail from shop.example is signed for esp.example, which does not")
    assert setting_warnings(Settings(sender="A <a@shop.example>", transport="postmark")) == []
