"""Pacing rules: rates, receiver groups, limits per recipient, throttling replies."""

from __future__ import annotations

import pytest

from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.models import HttpReply, Reply, Stage
from outbox.pacing.rules import (
    GLOBAL,
    Rate,
    RateLimits,
    Receivers,
    parse_rate,
    receiver_of_mx,
    throttled_scope,
)


@pytest.mark.parametrize(
    ("text", "count", "seconds", "interval"),
    [
        ("20/s", 20, 1, 0.05),
        ("600/m", 600, 60, 0.1),
        ("1000/h", 1000, 3600, 3.6),
        ("5/10s", 5, 10, 2.0),
        (" 2.5 / s ", 2.5, 1, 0.4),
        ("1/2m", 1, 120, 120.0),
    ],
)
def test_rates(text: str, count: float, seconds: float, interval: float) -> None:
    rate = parse_rate(text, setting="X")
    assert (rate.count, rate.seconds) == (count, seconds)
    assert rate.interval == pytest.approx(interval)


@pytest.mark.parametrize(
    "text", ["", "20", "20/d", "/s", "0/s", "-1/s", "x/s", "20/0s", "20 per s"]
)
def test_bad_rates_name_the_setting(text: str) -> None:
    with pytest.raises(ConfigError, match="OUTBOX_RATE_LIMITS"):
        parse_rate(text, setting="OUTBOX_RATE_LIMITS")


@pytest.mark.parametrize(
    ("address", "receiver"),
    [
        ("a@gmail.com", "gmail.com"),
        ("a@GoogleMail.com", "gmail.com"),
        ("a@hotmail.co.uk", "outlook.com"),
        ("a@live.com", "outlook.com"),
        ("a@aol.com", "yahoo.com"),
        ("a@me.com", "icloud.com"),
        ("a@ya.ru", "yandex.ru"),
        ("a@example.org", "example.org"),
        ("a@Example.ORG.", "example.org"),
        ('"odd@name"@example.net', "example.net"),
    ],
)
def test_receivers_group_domains_that_share_a_receiver(address: str, receiver: str) -> None:
    assert Receivers.parse().of(address) == receiver


def test_extra_groups_join_a_builtin_receiver_or_name_a_new_one() -> None:
    receivers = Receivers.parse("googlemail.com=acme.com, acme.co.uk; relayco=a.org b.org")
    assert receivers.of("x@acme.com") == "gmail.com"
    assert receivers.of("x@ACME.co.uk") == "gmail.com"
    assert receivers.of("x@b.org") == "relayco"
    assert receivers.of("x@gmail.com") == "gmail.com"


@pytest.mark.parametrize("groups", ["acme.com", "=acme.com", "gmail.com=", "gmail.com=  ;"])
def test_bad_groups(groups: str) -> None:
    with pytest.raises(ConfigError, match="OUTBOX_DOMAIN_GROUPS"):
        Receivers.parse(groups)


def keys_for(limits: RateLimits, recipient: str) -> tuple[tuple[str, Rate], ...]:
    return limits.for_receiver(limits.receivers.of(recipient))


def test_limits_per_receiver_default_and_total() -> None:
    limits = RateLimits.parse("googlemail.com=20/s, outlook.com=10/s, *=50/s", "100/s")
    assert limits.enabled
    assert [(k, str(r)) for k, r in keys_for(limits, "a@gmail.com")] == [
        (GLOBAL, "100/1s"),
        ("gmail.com", "20/1s"),
    ]
    assert [k for k, _ in keys_for(limits, "a@msn.com")] == [GLOBAL, "outlook.com"]
    assert [(k, str(r)) for k, r in keys_for(limits, "a@example.org")][-1] == (
        "example.org",
        "50/1s",
    )


def test_without_default_other_receivers_are_unlimited() -> None:
    limits = RateLimits.parse("gmail.com=20/s")
    assert keys_for(limits, "a@example.org") == ()
    assert [k for k, _ in keys_for(limits, "a@googlemail.com")] == ["gmail.com"]


def test_nothing_configured_is_off() -> None:
    limits = RateLimits.parse("", "")
    assert not limits.enabled
    assert keys_for(limits, "a@gmail.com") == ()


@pytest.mark.parametrize(
    "limits",
    ["gmail.com", "gmail.com=fast", "=20/s", "gmail.com=20/s,googlemail.com=5/s"],
)
def test_bad_limits(limits: str) -> None:
    with pytest.raises(ConfigError, match="OUTBOX_RATE_LIMITS"):
        RateLimits.parse(limits)


def test_settings_refuse_bad_pacing_at_start() -> None:
    with pytest.raises(ConfigError, match="OUTBOX_SEND_RATE"):
        Settings.from_env({"OUTBOX_SEND_RATE": "lots"})
    with pytest.raises(ConfigError, match="OUTBOX_RATE_LIMITS"):
        Settings.from_env({"OUTBOX_RATE_LIMITS": "gmail.com=20"})
    with pytest.raises(ConfigError, match="OUTBOX_PACE_FLOOR"):
        Settings.from_env({"OUTBOX_PACE_FLOOR": "0"})
    settings = Settings.from_env(
        {"OUTBOX_RATE_LIMITS": "gmail.com=20/s", "OUTBOX_SEND_RATE": "5/s"}
    )
    assert settings.rate_limits_parsed().total is not None


@pytest.mark.parametrize(
    ("reply", "scope"),
    [
        # Gmail, rate of unsolicited mail, at RCPT: the receiver.
        (Reply(Stage.RCPT, 421, "4.7.28 Our system has detected an unusual rate"), "receiver"),
        (Reply(Stage.FINAL_REPLY, 421, "4.7.0 [TSS04] Messages temporarily deferred"), "receiver"),
        (
            Reply(Stage.RCPT, 451, "4.7.650 The mail server has been temporarily rate limited"),
            "receiver",
        ),
        (Reply(Stage.RCPT, 450, "4.7.1 Too many messages from your IP, slow down"), "receiver"),
        # The peer itself refuses us: ours overall.
        (Reply(Stage.GREETING, 421, "Too many concurrent SMTP connections"), "sender"),
        (Reply(Stage.MAIL, 451, "4.7.1 Sending rate exceeded"), "sender"),
        (Reply(Stage.GREETING, 421, "Service not available"), "sender"),
        (Reply(Stage.RCPT, 421, "4.3.2 closing connection"), "sender"),
        (HttpReply(Stage.RESPONSE, 429, "rate_limit_exceeded"), "sender"),
        # Not a throttle.
        (HttpReply(Stage.RESPONSE, 500, "rate limited?"), None),
        (Reply(Stage.RCPT, 450, "4.2.0 Greylisted, try again later"), None),
        (Reply(Stage.RCPT, 452, "4.2.2 Mailbox full"), None),
        (Reply(Stage.RCPT, 550, "5.7.1 rate limit: rejected"), None),
        (Reply(Stage.FINAL_REPLY, 250, "ok rate limited"), None),
        (Reply(Stage.CONNECT, None, "", error="timeout"), None),
    ],
)
def test_throttling_replies(reply: Reply, scope: str | None) -> None:
    assert throttled_scope(reply) == scope


@pytest.mark.parametrize(
    ("host", "receiver"),
    [
        ("aspmx.l.google.com.", "gmail.com"),
        ("ALT1.ASPMX.L.GOOGLE.COM", "gmail.com"),
        ("gmail-smtp-in.l.google.com", "gmail.com"),
        ("contoso-com.mail.protection.outlook.com", "outlook.com"),
        ("mx1.hotmail.com", "outlook.com"),
        ("mta5.am0.yahoodns.net", "yahoo.com"),
        ("mx01.mail.icloud.com", "icloud.com"),
        ("mx.yandex.net", "yandex.ru"),
        ("mxs.mail.ru", "mail.ru"),
        ("mx00.gmx.net", "gmx.net"),
        ("mx1.hoster.example", "hoster.example"),
        ("mx.hoster.co.uk", "hoster.co.uk"),
        ("example.org", "example.org"),
        ("localhost", "localhost"),
    ],
)
def test_mail_exchangers_name_their_receiver(host: str, receiver: str) -> None:
    assert receiver_of_mx(host) == receiver
