"""A scripted run for the metrics tests: the exporter, a relay and worker processes,
recipients answering 2yz, 4yz, 5yz or nothing at all, then bounces and a complaint.

What it leaves (max_attempts 2):
  high  3 login codes, one of them refused once with 421 -> 3 sent
  bulk  30 accepted, 2 refused once with 421 (then sent), 2 refused with 550
        (failed; 5.1.1 at RCPT TO suppresses both addresses), 2 greylisted for
        good (dead after two 4xx), 1 that never gets a final reply (dead after
        two uncertain attempts) -> 32 sent
  2 hard bounces and 1 complaint on sent bulk rows, then one email to a
  bounced address (suppressed).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from outbox import enqueue, enqueue_many
from outbox.bounce_receiving.ingest import ingest
from outbox.config import Settings
from outbox.message.return_path import return_path
from outbox.testing.pipeline import WORKER_ENV, Pipeline, worker_command
from outbox.testing.sink import ACCEPT, Behaviour, SmtpSink
from tests.integration.helpers import LOGIN, NEWS, query, statuses, wait_until
from tests.integration.prometheus import free_port
from tests.integration.test_bounces import BOUNCE_DOMAIN, arf, dsn
from tests.keys import SECRET

GREYLIST = Behaviour(rcpt_reply="451 4.7.1 Greylisted, try again later")
GONE = Behaviour(rcpt_reply="550 5.1.1 No such user")
SILENT = Behaviour(delay=2.0)  # longer than the 1 s command timeout: no final reply
UNSETTLED = {"pending", "queued", "sending"}


class Recipients:
    """Each address's behaviour by its local part; `flaky` ones refuse only the first time."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, address: str) -> Behaviour:
        local = address.split("@", maxsplit=1)[0]
        with self.lock:
            self.seen[address] += 1
            first = self.seen[address] == 1
        if local.startswith("flaky"):
            return Behaviour(rcpt_reply="421 4.3.2 Try again later") if first else ACCEPT
        return {"grey": GREYLIST, "gone": GONE, "silent": SILENT}.get(
            local.rstrip("0123456789"), ACCEPT
        )


@dataclass(frozen=True)
class Ports:
    """Where the exporter and the two pools' Dramatiq endpoints listen (loopback)."""

    metrics: int
    high: int
    bulk: int

    @classmethod
    def free(cls) -> Ports:
        return cls(free_port(), free_port(), free_port())


@dataclass
class Run:
    settings: Settings
    metrics_url: str
    ports: Ports
    started: float


def fresh_settings(database_url: str, redis_url: str, namespace: str) -> Settings:
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "TRUNCATE email_outbox, email_attempt, email_event, email_suppression, email_bounce,"
            " outbox_process, outbox_breaker"
            " RESTART IDENTITY"
        )
    return Settings(
        database_url=database_url,
        redis_url=redis_url,
        namespace=namespace,
        retry_base_seconds=0.05,
        retry_cap_seconds=0.2,
        greylist_min_seconds=0.3,
        poll_interval=0.2,
        sweep_interval=0.5,
        max_attempts=2,
        smtp_command_timeout=1.0,
        rate_limits="example.com=500/s",  # paced, never held back: the pace figures exist
        bounce_domain=BOUNCE_DOMAIN,  # bounces act only through VERP
        secret=SECRET,
    )


@contextmanager
def scripted_run(settings: Settings, tmp_path: Path, ports: Ports | None = None) -> Iterator[Run]:
    """Yields once every email is settled and the bounces are in; processes still running."""
    ports = ports or Ports.free()
    with SmtpSink(Recipients()) as sink:
        env = dataclasses.replace(settings, smtp_url=sink.url).to_env()
        pipeline = Pipeline(env, high=(0, 0), bulk=(0, 0), log_dir=tmp_path)
        try:
            pipeline.spawn(
                "metrics",
                [sys.executable, "-m", "outbox.cli", "metrics", "--port", str(ports.metrics)],
            )
            metrics_url = f"http://127.0.0.1:{ports.metrics}/metrics"
            wait_until(lambda: _answers(metrics_url), timeout=30, interval=0.2)
            for (queue, threads), port in zip(
                (("email_high", 2), ("email_bulk", 4)), (ports.high, ports.bulk), strict=True
            ):
                pipeline.spawn(
                    queue,
                    worker_command(queue, 1, threads),
                    {
                        **WORKER_ENV[queue],
                        "dramatiq_prom_host": "127.0.0.1",
                        "dramatiq_prom_port": str(port),
                        "dramatiq_prom_db": str(tmp_path / f"prom-{queue}"),
                    },
                )
            started = time.time()
            pipeline.start()  # the relay
            _enqueue(settings)
            wait_until(lambda: not set(statuses(settings)) & UNSETTLED, timeout=90)
            _bounces(settings)
            yield Run(settings, metrics_url, ports, started)
        finally:
            pipeline.stop()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def _enqueue(settings: Settings) -> None:
    bulk = [f"r{i}" for i in range(30)] + ["flaky1", "flaky2", "gone1", "gone2", "grey1", "grey2"]
    bulk.append("silent1")
    with psycopg.connect(settings.database_url) as conn:
        for index, local in enumerate(["login1", "login2", "flaky9"]):
            enqueue(
                conn,
                idempotency_key=f"login-{index}",
                to=f"{local}@example.com",
                template="login_code",
                params=LOGIN,
                priority="high",
                settings=settings,
            )
        enqueue_many(
            conn,
            (
                {
                    "idempotency_key": f"news-{local}",
                    "to": f"{local}@example.com",
                    "template": "newsletter",
                    "params": NEWS,
                    "priority": "bulk",
                }
                for local in bulk
            ),
            settings=settings,
        )
        conn.commit()


def _bounces(settings: Settings) -> None:
    sent = query(
        settings,
        "SELECT id, recipient, message_id FROM email_outbox"
        " WHERE priority = 'bulk' AND status = 'sent' AND recipient LIKE 'r%%' ORDER BY id LIMIT 3",
    )

    def verp(row_id: int) -> str:
        return return_path(row_id, domain=BOUNCE_DOMAIN, secret=SECRET)

    with psycopg.connect(settings.database_url) as conn:
        for row_id, recipient, message_id in sent[:2]:
            ingest(conn, dsn(recipient, message_id, to=verp(row_id)), settings, verp(row_id))
        row_id, recipient, message_id = sent[2]
        ingest(conn, arf(recipient, message_id, return_path=verp(row_id)), settings)
        enqueue(
            conn,
            idempotency_key="after-bounce",
            to=sent[0][1],
            template="newsletter",
            params=NEWS,
            settings=settings,
        )
        conn.commit()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exporter: (name, sorted labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
