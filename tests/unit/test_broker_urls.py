"""Sentinel URLs and RabbitMQ node lists: what each form means, and the clear
error (without the password) every malformed one gets."""

from __future__ import annotations

import dataclasses

import pytest

from outbox.broker import broker_kind
from outbox.broker_urls import (
    SentinelTarget,
    amqp_nodes,
    is_sentinel_url,
    parse_sentinel_url,
    split_nodes,
)
from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.preflight import masked, problems
from outbox.rabbitmq_queues import dead_letter_arguments, quorum_arguments
from outbox.redact import secret_values

PASSWORD = "s3cr3t-Pw"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "redis+sentinel://127.0.0.1:26379/mymaster",
            SentinelTarget(sentinels=(("127.0.0.1", 26379),), master="mymaster"),
        ),
        (
            f"redis+sentinel://:{PASSWORD}@s1:26379,s2:26380,s3:26381/mymaster/3",
            SentinelTarget(
                sentinels=(("s1", 26379), ("s2", 26380), ("s3", 26381)),
                master="mymaster",
                db=3,
                password=PASSWORD,
            ),
        ),
        (
            "redis+sentinel://app:p%40ss%2Cword@s1:26379/cache.main/0",
            SentinelTarget(
                sentinels=(("s1", 26379),),
                master="cache.main",
                username="app",
                password="p@ss,word",
            ),
        ),
        (  # an unescaped @ in the password: the last @ ends the credentials
            "redis+sentinel://:p@ss@s1:26379/m",
            SentinelTarget(sentinels=(("s1", 26379),), master="m", password="p@ss"),
        ),
        (  # a lone word is a user name, as redis-py reads redis://word@host
            "redis+sentinel://app@s1:26379/m",
            SentinelTarget(sentinels=(("s1", 26379),), master="m", username="app"),
        ),
        (
            "redis+sentinel://s1:26379, s2:26379/m/",
            SentinelTarget(sentinels=(("s1", 26379), ("s2", 26379)), master="m"),
        ),
        (
            "redis+sentinel://[::1]:26379,10.0.0.2:26379/m/15",
            SentinelTarget(sentinels=(("::1", 26379), ("10.0.0.2", 26379)), master="m", db=15),
        ),
        (
            "rediss+sentinel://:pw@s1:26379/m",
            SentinelTarget(sentinels=(("s1", 26379),), master="m", password="pw", tls=True),
        ),
        (
            "rediss+sentinel://s1:26379/m?ssl_ca_certs=/etc/ca.pem&ssl_cert_reqs=required",
            SentinelTarget(
                sentinels=(("s1", 26379),),
                master="m",
                tls=True,
                tls_options=(("ssl_ca_certs", "/etc/ca.pem"), ("ssl_cert_reqs", "required")),
            ),
        ),
        (
            "REDIS+SENTINEL://s1:26379/m",
            SentinelTarget(sentinels=(("s1", 26379),), master="m"),
        ),
    ],
)
def test_a_sentinel_url_names_the_sentinels_master_and_database(
    url: str, expected: SentinelTarget
) -> None:
    assert is_sentinel_url(url)
    assert parse_sentinel_url(url) == expected


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis://s1:6379/0", "the scheme must be"),
        ("sentinel://s1:26379/m", "the scheme must be"),
        ("redis+sentinel:/s1:26379/m", "the scheme must be"),
        ("redis+sentinel://", "no sentinel host:port"),
        ("redis+sentinel:///m", "no sentinel host:port"),
        ("redis+sentinel://s1/m", "is not host:port"),
        ("redis+sentinel://s1:/m", "not a number"),
        ("redis+sentinel://s1:0/m", "not a number from 1 to 65535"),
        ("redis+sentinel://s1:65536/m", "not a number from 1 to 65535"),
        ("redis+sentinel://s1:26x79/m", "not a number"),
        ("redis+sentinel://s1:26379,/m", "an empty entry"),
        ("redis+sentinel://,s1:26379/m", "an empty entry"),
        ("redis+sentinel://:26379/m", "is not host:port"),
        ("redis+sentinel://s 1:26379/m", "is not a host name"),
        ("redis+sentinel://s1:26379,s1:26379/m", "named twice"),
        ("redis+sentinel://s1:26379", "no master name"),
        ("redis+sentinel://s1:26379/", "no master name"),
        ("redis+sentinel://s1:26379//0", "no master name"),
        ("redis+sentinel://s1:26379/my master/0", "has characters"),
        ("redis+sentinel://s1:26379/m/x", "is not a number"),
        ("redis+sentinel://s1:26379/m/-1", "is not a number"),
        ("redis+sentinel://s1:26379/m/0/1", "is not a number"),
        ("redis+sentinel://s1:26379/m/1234567", "is not a number"),
        ("redis+sentinel://s1:26379/m#x", "fragment"),
        ("redis+sentinel://@s1:26379/m", "nothing before the @"),
        ("redis+sentinel://s1:26379/m?db=2", "unknown option 'db'"),
        ("redis+sentinel://s1:26379/m?ssl_ca_certs=/ca.pem", "needs rediss+sentinel"),
        ("rediss+sentinel://s1:26379/m?ssl_cert_reqs=maybe", "ssl_cert_reqs must be"),
        ("rediss+sentinel://s1:26379/m?ssl_ca_certs=", "is empty"),
    ],
)
def test_a_malformed_sentinel_url_says_what_is_wrong(url: str, why: str) -> None:
    with pytest.raises(ConfigError, match="REDIS_URL is not a Sentinel URL") as caught:
        parse_sentinel_url(url)
    assert why in str(caught.value)
    assert "redis+sentinel://[:password@]HOST:PORT" in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        f"redis+sentinel://:{PASSWORD}@s1:26379,s2:x/m",
        f"redis+sentinel://:{PASSWORD}@s1:26379/my master",
        f"redis+sentinel://user:{PASSWORD}@/m",
        f"redis+sentinel://:{PASSWORD}@s1:26379/m/zero",
        f"rediss+sentinel://:{PASSWORD}@s1:26379/m?password={PASSWORD}",
    ],
)
def test_the_error_of_a_malformed_url_never_shows_the_password(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_sentinel_url(url, "OUTBOX_BROKER_URL")
    assert PASSWORD not in str(caught.value)
    assert "OUTBOX_BROKER_URL" in str(caught.value)


def test_the_password_is_kept_out_of_the_target_repr() -> None:
    target = parse_sentinel_url(f"redis+sentinel://:{PASSWORD}@s1:26379/m")
    assert PASSWORD not in repr(target)


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://s1:26379/m",
        "rediss+sentinel://s1:26379/m",
        "redis://127.0.0.1:6379/0",
        "amqp://guest:guest@127.0.0.1:5672/%2F",
        "amqp://a:b@mq1:5672/v,amqp://a:b@mq2:5672/v",
    ],
)
def test_the_broker_kind_of_every_form(url: str) -> None:
    expected = "rabbitmq" if url.startswith("amqp") else "redis"
    assert broker_kind(url) == expected
    assert is_sentinel_url(url) == ("sentinel" in url)


@pytest.mark.parametrize(
    ("url", "nodes"),
    [
        ("amqp://guest:guest@127.0.0.1:5672/%2F", ["amqp://guest:guest@127.0.0.1:5672/%2F"]),
        (
            "amqp://u:p@mq1:5672/v,amqp://u:p@mq2:5673/v, amqps://u:p@mq3/v",
            ["amqp://u:p@mq1:5672/v", "amqp://u:p@mq2:5673/v", "amqps://u:p@mq3/v"],
        ),
        (  # a comma inside a password stays in its node
            "amqp://u:a,b@mq1/v,amqp://u:a,b@mq2/v",
            ["amqp://u:a,b@mq1/v", "amqp://u:a,b@mq2/v"],
        ),
    ],
)
def test_a_node_list_is_split_before_each_url(url: str, nodes: list[str]) -> None:
    assert amqp_nodes(url) == nodes
    assert split_nodes(url) == nodes


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("amqp://u:p@mq1:56x2/v", "port that is not a number"),
        ("amqp://u:p@mq1/v,redis://r:6379/0", "separate nodes"),
        ("amqp://u:p@mq1/v,", "separate nodes"),
        ("redis://r:6379/0,amqp://u:p@mq1/v", "amqp:// or amqps:// URL"),
        ("amqp://u:p@mq1,mq2/v", "separate nodes"),
        ("amqp:///v", "with a host"),
        ("amqp://u:p@mq1/v,amqp://u:p@mq1/v", "named twice"),
    ],
)
def test_a_malformed_node_list_says_what_is_wrong(url: str, why: str) -> None:
    with pytest.raises(ConfigError, match="OUTBOX_BROKER_URL") as caught:
        amqp_nodes(url)
    assert why in str(caught.value)
    assert ":p@" not in str(caught.value)


def test_every_process_refuses_a_malformed_sentinel_url_at_start() -> None:
    for variable, field in (("REDIS_URL", "redis_url"), ("OUTBOX_BROKER_URL", "broker_url")):
        settings = dataclasses.replace(
            Settings(), **{field: f"redis+sentinel://:{PASSWORD}@s1:26379"}
        )
        found = problems(settings, ("relay", "worker"))
        assert found, variable
        assert all(variable in line and PASSWORD not in line for line in found)


def test_every_process_takes_a_well_formed_sentinel_url() -> None:
    settings = dataclasses.replace(
        Settings(),
        redis_url="redis+sentinel://:pw@s1:26379,s2:26379/mymaster/1",
        broker_url="amqp://u:p@mq1/v,amqp://u:p@mq2/v",
    )
    assert problems(settings, ("relay", "worker", "metrics")) == []


def test_a_node_list_prints_each_node_without_its_password() -> None:
    shown = masked("broker_url", f"amqp://u:{PASSWORD}@mq1/v,amqp://u:{PASSWORD}@mq2/v")
    assert shown == "amqp://u:****@mq1/v,amqp://u:****@mq2/v"


def test_the_passwords_of_every_node_and_of_sentinel_urls_are_redacted() -> None:
    settings = dataclasses.replace(
        Settings(),
        redis_url=f"redis+sentinel://:{PASSWORD}@s1:26379,s2:26379/m",
        broker_url=f"amqp://u:{PASSWORD}1@mq1/v,amqp://u:{PASSWORD}2@mq2/v",
    )
    secrets = secret_values(settings)
    assert {PASSWORD, f"{PASSWORD}1", f"{PASSWORD}2"} <= set(secrets)
    assert "mq1" not in secrets  # a host name is not taken for a password


def test_quorum_queues_dead_letter_instead_of_dropping() -> None:
    arguments = quorum_arguments(20)
    assert arguments["x-queue-type"] == "quorum"
    assert arguments["x-delivery-limit"] == 20
    assert arguments["x-dead-letter-strategy"] == "at-least-once"
    assert arguments["x-overflow"] == "reject-publish"  # at-least-once needs it
    assert dead_letter_arguments()["x-queue-type"] == "quorum"


@pytest.mark.parametrize(
    ("env", "error"),
    [
        ({"OUTBOX_RABBITMQ_QUEUE_TYPE": "mirrored"}, "must be classic or quorum"),
        ({"OUTBOX_RABBITMQ_DELIVERY_LIMIT": "0"}, "at least 1"),
    ],
)
def test_rabbitmq_settings_that_cannot_work_are_refused(env: dict[str, str], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        Settings.from_env(env)
