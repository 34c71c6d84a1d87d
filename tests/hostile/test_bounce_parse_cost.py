"""High 1: a bounce whose body is costly to read froze the bounce server.

A 128 KB HTML part of ``<`` characters made the HTML-to-text step quadratic;
the regular expression held the interpreter lock, so the SMTP event loop
stopped with it and the next genuine bounce waited 21 s for its 250. A real
server on loopback, real Postgres.
"""

from __future__ import annotations

import json
import smtplib
import time
from collections.abc import Callable

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from outbox.bounce_parsing import parse_bounce
from outbox.bounce_receiving.ingest import UNPROCESSABLE, process_pending
from outbox.bounce_receiving.parse_worker import ParseWorker
from outbox.bounce_receiving.smtp_server import BounceServer
from outbox.config import Settings
from outbox.db.store import bounce_reports
from outbox.message.return_path import return_path
from tests.hostile.test_bounce_server import bsettings, server  # noqa: F401 (fixtures)
from tests.integration.helpers import query, wait_until
from tests.integration.test_bounces import BOUNCE_DOMAIN, dsn, sent_row
from tests.integration.test_cli import outbox
from tests.keys import SECRET

MB = 2**20
_HEAD = (
    b"From: MAILER-DAEMON@mx.example.net\r\nTo: x@bounces.shop.example\r\n"
    b"Subject: Undelivered Mail Returned to Sender\r\n"
)


def _typed(ctype: bytes, body: bytes) -> bytes:
    return _HEAD + b"Content-Type: " + ctype + b"\r\n\r\n" + body


def html_of_lt(size: int) -> bytes:
    """The reported attack: an HTML part of lines of ``<``."""
    return _typed(b"text/html", (b"<" * 76 + b"\r\n") * (size // 78))


def html_of_open_tags(size: int) -> bytes:
    return _typed(b"text/html", b"<a " * (size // 3))


def html_of_scripts(size: int) -> bytes:
    return _typed(b"text/html", b"<script>" * (size // 8))


def nested_quotes(size: int) -> bytes:
    return _typed(b"text/plain", (b"> " * 38 + b"\r\n") * (size // 78))


def one_long_line(size: int) -> bytes:
    return _typed(b"text/plain", b"user@host " * (size // 10))


def many_headers(size: int) -> bytes:
    return b"".join(b"X-H%d: v\r\n" % i for i in range(100_000)) + b"\r\nbody\r\n"


def one_folded_header(size: int) -> bytes:
    return b"Subject: x\r\n" + b" folded continuation line\r\n" * (size // 27) + b"\r\nbody\r\n"


def many_parts(size: int) -> bytes:
    part = b"--b\r\nContent-Type: text/plain\r\n\r\nx@y.example failed\r\n"
    return _typed(b'multipart/mixed; boundary="b"', part * (size // len(part)) + b"--b--\r\n")


HOSTILE: list[Callable[[int], bytes]] = [
    html_of_lt,
    html_of_open_tags,
    html_of_scripts,
    nested_quotes,
    one_long_line,
    many_headers,
    one_folded_header,
    many_parts,
]


def _genuine(settings: Settings) -> tuple[bytes, str]:
    row_id, message_id = sent_row(settings, "genuine")
    verp = return_path(row_id, domain=BOUNCE_DOMAIN, secret=SECRET)
    return dsn("gone@example.net", message_id, to=verp), verp


def _seconds_to_250(settings: Settings, raw: bytes, to: str) -> float:
    started = time.monotonic()
    with smtplib.SMTP("127.0.0.1", settings.bounce_port, timeout=120) as client:
        client.sendmail("", [to], raw)  # raises unless 250
    return time.monotonic() - started


def _genuine_is_applied(settings: Settings, verp: str) -> Callable[[], bool]:
    def applied() -> bool:
        rows = query(
            settings,
            "SELECT link FROM email_bounce WHERE envelope_to = %s AND processed_at IS NOT NULL",
            verp,
        )
        return rows == [("verp",)]

    return applied


def test_regression_a_hostile_html_bounce_does_not_hold_up_the_next_250(
    bsettings: Settings,  # noqa: F811
    server: BounceServer,  # noqa: F811
) -> None:
    """The report: 1,680 lines of 76 ``<`` held the next genuine bounce for 21 s."""
    genuine, verp = _genuine(bsettings)
    _seconds_to_250(bsettings, html_of_lt(128 * 1024), f"x@{BOUNCE_DOMAIN}")
    assert _seconds_to_250(bsettings, genuine, verp) < 1.0
    wait_until(_genuine_is_applied(bsettings, verp), timeout=30)


def test_regression_the_server_listens_before_it_works_through_its_backlog(
    bsettings: Settings,  # noqa: F811
) -> None:
    """Restarted with a hostile bounce pending, the server did not listen for 26.5 s."""
    with psycopg.connect(bsettings.database_url) as conn:
        bounce_reports.store_bounce(conn, html_of_lt(128 * 1024), f"x@{BOUNCE_DOMAIN}")
    genuine, verp = _genuine(bsettings)
    with ConnectionPool(bsettings.database_url, min_size=1, max_size=2) as pool:
        running = BounceServer(bsettings, pool)
        started = time.monotonic()
        running.start()
        try:
            _seconds_to_250(bsettings, genuine, verp)
            assert time.monotonic() - started < 1.0
            wait_until(_genuine_is_applied(bsettings, verp), timeout=30)
        finally:
            running.stop()


@pytest.mark.slow
@pytest.mark.parametrize("hostile", HOSTILE, ids=lambda f: f.__name__)
def test_a_10_mb_hostile_body_parses_in_linear_time(hostile: Callable[[int], bytes]) -> None:
    """Every step of the parser is linear in its input: 10 MB of any of these
    shapes parses in seconds, where a quadratic step would take hours."""
    raw = hostile(10 * MB)
    started = time.monotonic()
    parse_bounce(raw)
    assert time.monotonic() - started < 10.0


@pytest.mark.slow
def test_10_mb_hostile_bodies_never_delay_a_genuine_bounce(
    bsettings: Settings,  # noqa: F811
    server: BounceServer,  # noqa: F811
) -> None:
    genuine, verp = _genuine(bsettings)
    # The shapes whose lines SMTP carries (at most 998 characters).
    for hostile in (html_of_lt, nested_quotes, one_folded_header, many_headers, many_parts):
        _seconds_to_250(bsettings, hostile(10 * MB - 4096), f"x@{BOUNCE_DOMAIN}")
    assert _seconds_to_250(bsettings, genuine, verp) < 1.0
    wait_until(_genuine_is_applied(bsettings, verp), timeout=60)


def test_a_message_over_its_parse_deadline_is_set_aside_once(bsettings: Settings) -> None:  # noqa: F811
    """Counted, shown by ``outbox bounces reprocess``, and never tried again."""
    before = UNPROCESSABLE.labels("parse_deadline")._value.get()
    genuine, verp = _genuine(bsettings)
    with psycopg.connect(bsettings.database_url) as conn:
        costly = bounce_reports.store_bounce(conn, html_of_lt(4 * MB), f"x@{BOUNCE_DOMAIN}")
        conn.commit()
        with ParseWorker(deadline=0.001) as parser:
            assert process_pending(conn, bsettings, parser.parse) == 1
    [(error, processed)] = query(
        bsettings,
        "SELECT error, processed_at IS NOT NULL FROM email_bounce WHERE id = %s",
        costly,
    )
    assert error.startswith("unprocessable: ParseDeadlineExceeded")
    assert processed
    assert UNPROCESSABLE.labels("parse_deadline")._value.get() - before == 1
    with psycopg.connect(bsettings.database_url) as conn:
        bounce_reports.store_bounce(conn, genuine, verp)
    shown = outbox(bsettings, "bounces", "reprocess", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {"processed": 1, "unprocessable": 1}
    assert _genuine_is_applied(bsettings, verp)()
    again = outbox(bsettings, "bounces", "reprocess")
    assert again.stdout.splitlines() == [
        "processed 0 bounces",
        "1 stored bounces set aside as unprocessable (email_bounce.error says why)",
    ]
