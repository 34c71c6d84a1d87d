"""Finding 7: storage amplification and floods at the bounce server; finding 4's
SMTP command log. A real server on loopback, real Postgres."""

from __future__ import annotations

import dataclasses
import logging
import smtplib
import socket
from collections.abc import Iterator

import httpx
import pytest
from psycopg_pool import ConnectionPool

from outbox.bounce_receiving.budget import PeerBudget
from outbox.bounce_receiving.smtp_server import REFUSED, BounceServer
from outbox.config import Settings
from outbox.message.return_path import return_path
from outbox.testing.sink import SmtpSink
from tests.integration.helpers import query, wait_until
from tests.integration.test_bounces import BOUNCE_DOMAIN, dsn, sent_row
from tests.keys import SECRET


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bsettings(settings: Settings) -> Settings:
    return dataclasses.replace(
        settings,
        bounce_domain=BOUNCE_DOMAIN,
        secret=SECRET,
        bounce_port=SmtpSink().port,
        bounce_metrics_port=_free_port(),
    )


@pytest.fixture
def server(bsettings: Settings) -> Iterator[BounceServer]:
    with ConnectionPool(bsettings.database_url, min_size=1, max_size=2) as pool:
        running = BounceServer(bsettings, pool)
        running.start()
        try:
            yield running
        finally:
            running.stop()


def refused(reason: str) -> float:
    return REFUSED.labels(reason)._value.get()


def test_regression_one_message_to_many_bounce_addresses_is_stored_once(
    bsettings: Settings, server: BounceServer
) -> None:
    """200 recipients of one 1 MB message stored 200 copies (213 MB in 2.3 s)."""
    row_id, message_id = sent_row(bsettings, "k1")
    verp = return_path(row_id, domain=BOUNCE_DOMAIN, secret=SECRET)
    body = dsn("gone@example.net", message_id, to=verp) + (b"x" * 76 + b"\r\n") * 13_800
    before = refused("recipients")
    recipients = [f"r{i}@{BOUNCE_DOMAIN}" for i in range(3)] + [verp]
    recipients += [f"r{i}@{BOUNCE_DOMAIN}" for i in range(3, 200)]
    with smtplib.SMTP("127.0.0.1", bsettings.bounce_port, timeout=30) as client:
        client.ehlo()
        client.mail("")
        codes = [client.rcpt(r)[0] for r in recipients]
        assert client.data(body)[0] == 250
    assert codes.count(250) == bsettings.bounce_max_recipients
    assert set(codes[bsettings.bounce_max_recipients :]) == {452}
    assert refused("recipients") - before == len(recipients) - bsettings.bounce_max_recipients
    [(count, total)] = query(bsettings, "SELECT count(*), sum(length(raw)) FROM email_bounce")
    assert count == 1
    assert total < 2 * len(body)
    # Processed once, for the recipient that carries the VERP token.
    wait_until(
        lambda: (
            query(
                bsettings,
                "SELECT envelope_to, link FROM email_bounce WHERE processed_at IS NOT NULL",
            )
            == [(verp, "verp")]
        ),
        timeout=10,
    )


def test_regression_thousands_of_rcpts_in_one_transaction_are_refused(
    bsettings: Settings, server: BounceServer
) -> None:
    with smtplib.SMTP("127.0.0.1", bsettings.bounce_port, timeout=30) as client:
        client.ehlo()
        client.mail("")
        codes = [client.rcpt(f"r{i}@{BOUNCE_DOMAIN}")[0] for i in range(2000)]
    assert codes.count(250) == bsettings.bounce_max_recipients
    assert query(bsettings, "SELECT count(*) FROM email_bounce")[0][0] == 0


def test_messages_per_connection_are_capped(bsettings: Settings) -> None:
    limited = dataclasses.replace(bsettings, bounce_max_messages=3, bounce_metrics_port=0)
    with ConnectionPool(limited.database_url, min_size=1, max_size=2) as pool:
        running = BounceServer(limited, pool)
        running.start()
        try:
            with smtplib.SMTP("127.0.0.1", limited.bounce_port, timeout=30) as client:
                for i in range(3):
                    client.sendmail("", [f"r{i}@{BOUNCE_DOMAIN}"], b"Subject: x\r\n\r\nx\r\n")
                with pytest.raises(smtplib.SMTPSenderRefused) as refusal:
                    client.sendmail("", [f"r9@{BOUNCE_DOMAIN}"], b"Subject: x\r\n\r\nx\r\n")
                assert refusal.value.smtp_code == 421
        finally:
            running.stop()
    assert query(limited, "SELECT count(*) FROM email_bounce")[0][0] == 3


def test_a_peer_over_its_budget_is_deferred(bsettings: Settings) -> None:
    limited = dataclasses.replace(
        bsettings, bounce_peer_bytes_per_hour=50_000, bounce_metrics_port=0
    )
    before = refused("peer_budget")
    with ConnectionPool(limited.database_url, min_size=1, max_size=2) as pool:
        running = BounceServer(limited, pool)
        running.start()
        try:
            with smtplib.SMTP("127.0.0.1", limited.bounce_port, timeout=30) as client:
                codes = []
                for _ in range(5):
                    try:
                        client.sendmail("", [f"r@{BOUNCE_DOMAIN}"], (b"x" * 78 + b"\r\n") * 250)
                        codes.append(250)
                    except (smtplib.SMTPDataError, smtplib.SMTPSenderRefused) as exc:
                        codes.append(exc.smtp_code)
        finally:
            running.stop()
    assert codes[:2] == [250, 250]
    assert set(codes[2:]) == {451}
    assert refused("peer_budget") - before == 3
    assert query(limited, "SELECT count(*) FROM email_bounce")[0][0] == 2


def test_refusals_are_a_metric(bsettings: Settings, server: BounceServer) -> None:
    with (
        smtplib.SMTP("127.0.0.1", bsettings.bounce_port, timeout=10) as client,
        pytest.raises(smtplib.SMTPRecipientsRefused),
    ):
        client.sendmail("", ["victim@example.net"], b"Subject: relay me\r\n\r\nx\r\n")
    page = httpx.get(f"http://127.0.0.1:{bsettings.bounce_metrics_port}/metrics").text
    line = next(
        line
        for line in page.splitlines()
        if line.startswith('outbox_bounce_refused_total{reason="relaying"}')
    )
    assert float(line.split()[-1]) >= 1


def test_regression_smtp_commands_are_not_logged_with_addresses(
    bsettings: Settings, server: BounceServer, caplog: pytest.LogCaptureFixture
) -> None:
    """aiosmtpd logged every command at INFO ("sender: …") and DATA at DEBUG."""
    caplog.set_level(logging.INFO)
    row_id, message_id = sent_row(bsettings, "k1", to="private.person@example.net")
    verp = return_path(row_id, domain=BOUNCE_DOMAIN, secret=SECRET)
    with smtplib.SMTP("127.0.0.1", bsettings.bounce_port, timeout=10) as client:
        client.sendmail(
            "sender.person@example.org", [verp], dsn("private.person@example.net", message_id)
        )
    wait_until(
        lambda: (
            query(bsettings, "SELECT count(*) FROM email_bounce WHERE processed_at IS NOT NULL")[0][
                0
            ]
            == 1
        ),
        timeout=10,
    )
    assert "sender.person" not in caplog.text
    assert "private.person" not in caplog.text


@pytest.mark.parametrize(
    ("steps", "allowed"),
    [
        ([(0, 600), (0, 500)], [True, False]),
        ([(0, 1000), (0, 1)], [True, False]),
        ([(0, 1000), (1800, 500)], [True, True]),  # half an hour refills half
        ([(0, 1000), (1800, 501)], [True, False]),
        ([(0, 1001)], [False]),
    ],
)
def test_peer_budget(steps: list[tuple[float, int]], allowed: list[bool]) -> None:
    now = [0.0]
    budget = PeerBudget(1000, clock=lambda: now[0])  # 1000 bytes an hour
    got = []
    for at, size in steps:
        now[0] = at
        got.append(budget.take("198.51.100.7", size))
    assert got == allowed
    assert not budget.exhausted("203.0.113.1")  # another peer has its own
