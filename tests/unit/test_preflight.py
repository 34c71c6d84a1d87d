"""Start-up checks and the settings table (no servers: nothing here connects)."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from outbox import preflight
from outbox.config import Settings
from outbox.errors import ConfigError
from tests.keys import SECRET


def test_every_setting_has_its_readers() -> None:
    for field in fields(Settings):
        assert preflight.readers(field.name) <= set(preflight.PROCESSES), field.name
        assert preflight.readers(field.name), field.name


def test_the_defaults_start_every_process_but_the_unconfigured_bounce_server() -> None:
    defaults = Settings()
    assert preflight.problems(defaults, ["app", "relay", "worker", "web", "metrics"]) == []
    assert preflight.problems(defaults, ["bounces"]) == [
        "OUTBOX_BOUNCE_DOMAIN must be set to receive bounces"
    ]


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
