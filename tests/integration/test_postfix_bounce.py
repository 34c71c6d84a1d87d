"""End to end with a real MTA: Postfix accepts, finds no such user, and its DSN
comes back through the VERP address to `outbox bounces serve`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from outbox import enqueue
from outbox.bounce_receiving.smtp_server import BounceServer
from outbox.config import Settings
from outbox.db.store import suppressions
from outbox.testing.postfix import PostfixMissing, free_port, private_postfix
from tests.integration.helpers import LOGIN, harness, query, wait_until
from tests.keys import SECRET

# A real Postfix sends the bounce.
pytestmark = pytest.mark.postfix

BOUNCE_DOMAIN = "bounces.outbox-test.example"
MAIN_CF = """\
myhostname = mx.outbox-test.example
mydomain = outbox-test.example
myorigin = $myhostname
mydestination = users.outbox-test.example
# Accept any local address at RCPT, so that the failure comes later as a DSN.
local_recipient_maps =
alias_maps =
alias_database =
transport_maps = inline:{{{{ {{{{ {bounce_domain} = smtp:[127.0.0.1]:{bounce_port} }}}} }}}}
"""


@pytest.fixture
def postfix() -> Iterator[tuple[Path, int, int]]:
    """A private Postfix instance on loopback: (config dir, smtpd port, bounce port)."""
    bounce_port = free_port()
    try:
        with private_postfix(
            MAIN_CF.format(bounce_domain=BOUNCE_DOMAIN, bounce_port=bounce_port)
        ) as instance:
            yield instance.conf, instance.port, bounce_port
    except PostfixMissing as exc:
        pytest.fail(str(exc))


def test_a_real_dsn_suppresses_the_address(
    settings: Settings, postfix: tuple[Path, int, int]
) -> None:
    conf, smtpd_port, bounce_port = postfix
    settings = dataclasses.replace(
        settings,
        bounce_domain=BOUNCE_DOMAIN,
        secret=SECRET,
        bounce_port=bounce_port,
        smtp_url=f"smtp://127.0.0.1:{smtpd_port}",
    )
    with psycopg.connect(settings.database_url) as conn:
        sent = enqueue(
            conn,
            idempotency_key="login-1",
            to="no-such-user@users.outbox-test.example",
            template="login_code",
            params=LOGIN,
            priority="high",
            settings=settings,
        )
        conn.commit()
    with ConnectionPool(settings.database_url, min_size=1, max_size=2) as pool:
        server = BounceServer(settings, pool)
        server.start()
        try:
            with harness(settings, started=False, smtp_url=settings.smtp_url) as (h, _):
                h.run()  # Postfix accepts: the row is sent

            def suppressed() -> bool:
                with psycopg.connect(settings.database_url) as conn:
                    return (
                        suppressions.find_suppression(
                            conn, "no-such-user@users.outbox-test.example"
                        )
                        is not None
                    )

            log = conf.parent / "maillog"
            try:
                wait_until(suppressed, timeout=30)
            except AssertionError:
                raise AssertionError(f"no suppression; Postfix log:\n{log.read_text()}") from None
        finally:
            server.stop()
    row = query(settings, "SELECT status, bounce_class FROM email_outbox WHERE id = %s", sent.id)[0]
    assert row == ("sent", "hard")
    bounce = query(
        settings, "SELECT link, outbox_id, forged, results->0->>'status' FROM email_bounce"
    )
    assert bounce == [("verp", sent.id, False, "5.1.1")]
    with psycopg.connect(settings.database_url) as conn:
        entry = suppressions.find_suppression(conn, "no-such-user@users.outbox-test.example")
    assert entry is not None
    assert entry.reason == "hard_bounce"
