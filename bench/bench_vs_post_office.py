"""Outbox beside django-post-office and the raw SMTP limit, in one run.

Three ways to send the same newsletter into Postfix's smtp-sink, measured in
rounds that alternate (A B C, then C B A, ...), so that a machine getting
busier or quieter weighs on all three alike:

* **raw limit**: one bare smtplib connection sending Outbox's pre-rendered
  messages, the fastest a single sender can go;
* **django-post-office**: its best-tuned configuration (``send_queued_mail
  -p 2``, 10 threads per process, batches of 1,000, logging errors only),
  emails queued by ``mail.send_many`` in its own database, with the same
  subject, text and HTML as Outbox's messages;
* **Outbox**: the Procfile's shape with the shipped defaults: a relay for high
  priority, a niced one for bulk, and ``outbox worker bulk`` with the processes
  and threads it starts with on this machine (``OUTBOX_BULK_PROCESSES``,
  ``OUTBOX_BULK_THREADS``).

Each figure is emails (messages) per second, wall clock from the start of the
sending processes to the last email marked sent (so start-up counts, as it
does for a real drain); Outbox also gets its steady rate (first tenth to last,
from ``sent_at``). The enqueue is not measured for either.

    python -m bench.bench_vs_post_office [--emails 20000] [--rounds 2]

django-post-office comes from the ``bench`` extra: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import email
import email.policy
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from bench import run
from bench.bench_delivery import postfix_sink, steady_rate
from outbox.cli.worker_pools import pool_settings, usable_cpus
from outbox.testing.pipeline import Pipeline
from outbox.transports.base import OutgoingMessage

POST_OFFICE = {"processes": 2, "threads": 10, "batch": 1000}

SETTINGS = """\
SECRET_KEY = "bench"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "post_office"]
DATABASES = {{"default": {{"ENGINE": "django.db.backends.postgresql", "NAME": {name!r},
    "HOST": {host!r}, "PORT": {port!r}, "USER": {user!r}}}}}
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
EMAIL_HOST, EMAIL_PORT = {smtp_host!r}, {smtp_port}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
TEMPLATES = [{{"BACKEND": "django.template.backends.django.DjangoTemplates"}}]
POST_OFFICE = {{"BATCH_SIZE": {batch}, "THREADS_PER_PROCESS": {threads}, "LOG_LEVEL": 1}}
"""

# Run inside django-post-office's environment: queue the emails given as JSON lines.
FILL = """\
import json, sys
import django
django.setup()
from post_office import mail
(sender, subject, text, html), n = json.loads(sys.argv[1]), int(sys.argv[2])
for start in range(0, n, 5000):
    mail.send_many([
        dict(sender=sender, recipients=[f"reader{i}@example.com"], subject=subject,
             message=text, html_message=html, priority="medium")
        for i in range(start, min(n, start + 5000))
    ])
"""


def step(what: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.0f} s] {what}", file=sys.stderr, flush=True)


STARTED = time.monotonic()


def contents(message: OutgoingMessage) -> tuple[str, str, str, str]:
    """(From, Subject, text, HTML) of one of Outbox's built messages."""
    parsed = email.message_from_bytes(message.data, policy=email.policy.default)
    parts = {p.get_content_type(): p.get_content() for p in parsed.walk() if not p.is_multipart()}
    return (
        str(parsed["From"]),
        str(parsed["Subject"]),
        parts["text/plain"],
        parts.get("text/html", ""),
    )


def raw_round(sink_url: str, messages: list[OutgoingMessage], n: int) -> float:
    elapsed, _cpu = run.send_raw(sink_url, messages, n)
    return n / elapsed


def post_office_round(sink_url: str, content: tuple[str, ...], n: int) -> float:
    """Emails/s of ``send_queued_mail`` draining ``n`` queued emails."""
    host, port = sink_url.removeprefix("smtp://").split(":")
    with run.database("dpo") as url, tempfile.TemporaryDirectory() as home:
        info = psycopg.conninfo.conninfo_to_dict(url)
        Path(home, "dpo_settings.py").write_text(
            SETTINGS.format(
                name=info["dbname"],
                host=info.get("host", "127.0.0.1"),
                port=str(info.get("port", 5432)),
                user=info.get("user", "postgres"),
                smtp_host=host,
                smtp_port=int(port),
                **POST_OFFICE,
            )
        )
        env = {
            **os.environ,
            "PYTHONPATH": home,
            "DJANGO_SETTINGS_MODULE": "dpo_settings",
        }

        def django(*args: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run(
                [sys.executable, *args],
                check=False,
                cwd=home,
                env=env,
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise RuntimeError(f"django-post-office failed:\n{done.stderr[-3000:]}")
            return done

        django("-m", "django", "migrate", "-v", "0")
        django("-c", FILL, json.dumps(content), str(n))
        lock = str(Path(home, "send"))
        started = time.perf_counter()
        django(
            "-m",
            "django",
            "send_queued_mail",
            "-p",
            str(POST_OFFICE["processes"]),
            "-l",
            "1",
            "-L",
            lock,
        )
        elapsed = time.perf_counter() - started
        with psycopg.connect(url) as conn:
            sent = conn.execute("SELECT count(*) FROM post_office_email WHERE status = 0")
            count = int(sent.fetchone()[0])  # type: ignore[index]
        if count != n:
            raise RuntimeError(f"django-post-office sent {count} of {n}")
    return n / elapsed


def outbox_round(sink_url: str, n: int, bulk: tuple[int, int]) -> tuple[float, float]:
    """(wall emails/s, steady emails/s) of the Procfile's processes draining ``n``."""
    with run.database("vs") as url:
        settings = run.settings_for(url, sink_url)
        run.fill(settings, n)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM (FREEZE, ANALYZE)")
            env = {**settings.to_env(), "OUTBOX_LOG_LEVEL": "WARNING"}
            started = time.perf_counter()
            with Pipeline(env, high=(0, 0), bulk=bulk, split_relays=True):
                while run.count_status(settings, "sent") < n:
                    time.sleep(0.05)
                elapsed = time.perf_counter() - started
            return n / elapsed, steady_rate(conn)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--emails", type=int, default=20_000, help="emails per round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three")
    args = parser.parse_args()
    if importlib.util.find_spec("post_office") is None:
        raise SystemExit("django-post-office is missing: pip install -e '.[bench]'") from None
    pool = pool_settings(
        "bulk", os.environ, namespace="bench", metrics_host="127.0.0.1", cpus=usable_cpus()
    )
    bulk = (pool.processes, pool.threads)
    load = os.getloadavg()[0]
    figures: dict[str, list[float]] = {"raw": [], "post_office": [], "outbox": [], "steady": []}
    with postfix_sink() as (sink_url, _pid):
        step("pre-rendering the raw limit's messages")
        messages = run.prerendered(sink_url, min(args.emails, 2000))
        content = contents(messages[0])

        def outbox() -> None:
            wall, steady = outbox_round(sink_url, args.emails, bulk)
            figures["outbox"].append(wall)
            figures["steady"].append(steady)

        rounds: list[tuple[str, Callable[[], None]]] = [
            ("raw", lambda: figures["raw"].append(raw_round(sink_url, messages, args.emails))),
            (
                "django-post-office",
                lambda: figures["post_office"].append(
                    post_office_round(sink_url, content, args.emails)
                ),
            ),
            ("Outbox", outbox),
        ]
        try:
            for i in range(args.rounds):
                for name, measure in rounds if i % 2 == 0 else rounds[::-1]:
                    step(f"round {i + 1}: {name}")
                    measure()
        finally:
            run.forget_namespaces()
    print(report(args, bulk, figures, load))
    return 0


def report(
    args: argparse.Namespace, bulk: tuple[int, int], figures: dict[str, list[float]], load: float
) -> str:
    def shown(values: list[float]) -> str:
        each = " / ".join(f"{v:,.0f}" for v in values)
        return f"{statistics.median(values):,.0f} ({each})"

    raw, dpo, outbox = (statistics.median(figures[k]) for k in ("raw", "post_office", "outbox"))
    processes, threads = bulk
    lines = [
        f"{run.machine()}; {args.emails:,} emails per round, {args.rounds} rounds, smtp-sink",
        "",
        "| sender | per second: median (each round) | Outbox ÷ it |",
        "|---|---:|---:|",
        f"| raw limit: one smtplib connection, pre-rendered | {shown(figures['raw'])} |"
        f" {outbox / raw:.0%} |",
        f"| django-post-office: -p {POST_OFFICE['processes']}, {POST_OFFICE['threads']} threads,"
        f" batch {POST_OFFICE['batch']:,} | {shown(figures['post_office'])}"
        f" | {outbox / dpo:.2f}x |",
        f"| Outbox: 2 relays, `outbox worker bulk` ({processes} process(es) x {threads} threads),"
        f" wall | {shown(figures['outbox'])} | |",
        f"| Outbox, first tenth to last send | {shown(figures['steady'])} | |",
        "",
        textwrap.dedent(
            f"""\
            Targets: Outbox ≥ 3x django-post-office ({outbox / dpo:.2f}x) and ≥ 60 % of the raw
            limit ({outbox / raw:.0%}). Load average {load:.1f} at the start,
            {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} cores."""
        ),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
