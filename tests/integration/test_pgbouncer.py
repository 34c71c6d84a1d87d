"""Behind a real PgBouncer in transaction mode (Debian's pgbouncer, started here on loopback)."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from outbox.config import Settings
from outbox.db.store import listener
from outbox.relay.loop import NOTIFY_CHANNEL
from tests.integration.helpers import add_login, add_newsletter, harness, statuses

# Every test goes through a real PgBouncer.
pytestmark = pytest.mark.pgbouncer

INSTALL = "install Debian's pgbouncer (apt-get install pgbouncer); ./dev test does as root"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def pgbouncer() -> Iterator[int]:
    """A PgBouncer in transaction mode in front of this machine's Postgres; its port."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.path.exists(binary):
        pytest.fail(f"no pgbouncer on this machine; {INSTALL}")
    root = Path(tempfile.mkdtemp(prefix="outbox-pgbouncer-"))
    port = _free_port()
    (root / "users.txt").write_text('"postgres" ""\n')
    (root / "pgbouncer.ini").write_text(
        "[databases]\n* = host=127.0.0.1 port=5432\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {root}/users.txt\n"
        "pool_mode = transaction\ndefault_pool_size = 4\nmax_client_conn = 100\n"
        f"logfile = {root}/pgbouncer.log\npidfile = {root}/pgbouncer.pid\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
    )
    command = [binary, str(root / "pgbouncer.ini")]
    if os.geteuid() == 0:
        command[1:1] = ["-u", "postgres"]  # it will not run as root
        for path in (root, *root.iterdir()):
            shutil.chown(path, "postgres")
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            if proc.poll() is not None:
                log = (
                    (root / "pgbouncer.log").read_text()
                    if (root / "pgbouncer.log").exists()
                    else ""
                )
                pytest.fail(f"pgbouncer did not start: {log[-500:]}")
            time.sleep(0.05)
    else:
        pytest.fail("pgbouncer did not listen within 10 s")
    yield port
    proc.terminate()
    proc.wait(timeout=10)
    shutil.rmtree(root, ignore_errors=True)


def _through(url: str, port: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"postgres@127.0.0.1:{port}"))


@pytest.fixture
def bounced(settings: Settings, pgbouncer: int) -> Settings:
    return dataclasses.replace(
        settings,
        database_url=_through(settings.database_url, pgbouncer),
        prepared_statements="off",
    )


def test_transaction_mode_drops_notifications(bounced: Settings) -> None:
    # What the listener guards against, shown on the real pooler.
    with psycopg.connect(bounced.database_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        with psycopg.connect(bounced.database_url, autocommit=True) as other:
            other.execute("SELECT pg_notify(%s, 'x')", (NOTIFY_CHANNEL,))
        assert list(listener.notifies(timeout=1.0, stop_after=1)) == []


def test_the_relay_listener_notices_and_polls_with_one_warning(
    bounced: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    listening = listener.Listener(bounced.listen_url, NOTIFY_CHANNEL, probe_seconds=0.5)
    stop = threading.Event()
    with caplog.at_level(logging.WARNING, logger="outbox.db.store.listener"):
        for _ in range(3):
            listening.wait(0.1, stop)
    assert listening.working is False
    warnings = [r for r in caplog.records if "OUTBOX_LISTEN_DATABASE_URL" in r.getMessage()]
    assert len(warnings) == 1


def test_a_direct_listen_url_keeps_immediate_wake_ups(
    bounced: Settings, settings: Settings
) -> None:
    direct = dataclasses.replace(bounced, listen_database_url=settings.database_url)
    listening = listener.Listener(direct.listen_url, NOTIFY_CHANNEL, probe_seconds=2.0)
    stop = threading.Event()
    listening.wait(0.01, stop)
    assert listening.working is True
    woke = threading.Event()

    def wait() -> None:
        listening.wait(3600.0, stop)  # only the NOTIFY (or the stop) ends it during the test
        woke.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    with psycopg.connect(bounced.database_url, autocommit=True) as conn:  # through the pooler
        conn.execute("SELECT pg_notify(%s, 'high')", (NOTIFY_CHANNEL,))
    assert woke.wait(60)  # before the stop below: the NOTIFY woke it
    stop.set()
    waiter.join(5)
    listening.close()


def test_enqueue_relay_and_delivery_through_the_pooler(bounced: Settings) -> None:
    # Claims, COPY, the template version and the results statement, all through
    # transaction pooling, with psycopg's prepared statements off.
    add_newsletter(bounced, 120)
    add_login(bounced, "login-1", "alice@example.com")
    with harness(bounced) as (h, sink):
        h.run(timeout=60)
    assert statuses(bounced) == {"sent": 121}
    assert len(set(sink.message_ids())) == 121
