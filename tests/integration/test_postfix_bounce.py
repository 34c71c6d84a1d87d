"""End to end with a real MTA: Postfix accepts, finds no such user, and its DSN
comes back through the VERP address to `outbox bounces serve`."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from outbox import enqueue
from outbox.config import Settings
from outbox.db import store
from outbox.feedback.smtp_server import BounceServer
from outbox.testing.sink import SmtpSink
from tests.integration.helpers import LOGIN, harness, query, wait_until
from tests.keys import SECRET

BOUNCE_DOMAIN = "bounces.outbox-test.example"
MAIN_CF = """\
compatibility_level = 3.6
queue_directory = {root}/queue
data_directory = {root}/data
shlib_directory = /usr/lib/postfix
daemon_directory = /usr/lib/postfix/sbin
meta_directory = /etc/postfix
mail_owner = postfix
setgid_group = postdrop
maillog_file = {root}/maillog
maillog_file_prefixes = {root}
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = mx.outbox-test.example
mydomain = outbox-test.example
myorigin = $myhostname
mydestination = users.outbox-test.example
# Accept any local address at RCPT, so that the failure comes later as a DSN.
local_recipient_maps =
alias_maps =
alias_database =
mynetworks = 127.0.0.0/8
relayhost =
smtp_dns_support_level = disabled
transport_maps = inline:{{ {{ {bounce_domain} = smtp:[127.0.0.1]:{bounce_port} }} }}
smtputf8_enable = no
biff = no
"""


@pytest.fixture
def postfix() -> Iterator[tuple[Path, int, int]]:
    """A private Postfix instance on loopback: (config dir, smtpd port, bounce port)."""
    if shutil.which("postfix") is None:
        pytest.fail("Postfix is not installed: apt-get install postfix (./.ci/run does)")
    # Not under pytest's tmp_path: its parents are private to root, and Postfix's
    # daemons run as the postfix user.
    root = Path(tempfile.mkdtemp(prefix="outbox-postfix-"))
    root.chmod(0o755)
    conf, data = root / "conf", root / "data"
    for directory in (conf, data, root / "queue"):
        directory.mkdir()
    shutil.chown(data, "postfix")
    smtpd_port, bounce_port = SmtpSink().port, SmtpSink().port
    # The package's service table; with debconf's "No configuration" only the
    # shipped prototypes exist.
    candidates = [
        "/etc/postfix/master.cf",
        "/etc/postfix/master.cf.proto",
        "/usr/share/postfix/master.cf.dist",
    ]
    master = next(Path(p).read_text() for p in candidates if Path(p).exists())
    lines = []
    for original in master.splitlines():
        fields = original.split()
        if fields[:2] == ["smtp", "inet"]:
            lines.append(f"127.0.0.1:{smtpd_port} inet n - n - - smtpd")
        elif len(fields) >= 8 and fields[1] in {"unix", "fifo", "pass", "unix-dgram"}:
            fields[4] = "n"  # no chroot: the queue is in a temporary directory
            lines.append(" ".join(fields))
        else:
            lines.append(original)
    (conf / "master.cf").write_text("\n".join(lines) + "\n")
    (conf / "main.cf").write_text(
        MAIN_CF.format(root=root, bounce_domain=BOUNCE_DOMAIN, bounce_port=bounce_port)
    )
    started = subprocess.run(
        ["postfix", "-c", str(conf), "start"], capture_output=True, text=True, check=False
    )
    log = root / "maillog"
    if started.returncode != 0:
        pytest.fail(
            f"Postfix did not start: {started.stderr}\n{log.read_text() if log.exists() else ''}"
        )
    try:
        yield conf, smtpd_port, bounce_port
    finally:
        subprocess.run(["postfix", "-c", str(conf), "stop"], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


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
                        store.find_suppression(conn, "no-such-user@users.outbox-test.example")
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
        entry = store.find_suppression(conn, "no-such-user@users.outbox-test.example")
    assert entry is not None
    assert entry.reason == "hard_bounce"
