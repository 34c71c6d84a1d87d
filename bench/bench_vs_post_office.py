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

Beside each rate, what an email cost in CPU over the same window: the
sender's own processes' (the raw client's thread; the processes
django-post-office and Outbox start, counted once they have exited), and
smtp-sink's, Postgres's (its postmaster's tree: a backend that ended counts
there) and Redis's; and how busy the machine's cores were (``/proc/stat``).
A sender that keeps every core busy goes as fast as its CPU per email allows:
a rate k times another's needs about a k-th of its CPU per email.

    python -m bench.bench_vs_post_office [--emails 20000] [--rounds 2]

django-post-office comes from the ``bench`` extra: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import contextlib
import email
import email.policy
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg

from bench import run
from bench.bench_delivery import count_sent, postfix_sink, steady_rate
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


def machine_busy() -> float:
    """CPU seconds the machine's cores spent on anything but idling, since boot."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """CPU seconds of this process's descendants that have exited and been waited for."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def tree_cpu(root: psutil.Process) -> dict[int, float]:
    """CPU seconds by pid of a process tree: the root with its ended children
    (a Postgres backend that ended counts in the postmaster), and each live
    descendant's own."""
    times = root.cpu_times()
    spent = {root.pid: times.user + times.system + times.children_user + times.children_system}
    for child in root.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            spent[child.pid] = sum(child.cpu_times()[:2])
    return spent


def servers() -> dict[str, psutil.Process]:
    """The machine's Postgres (its postmaster) and Redis, whose CPU a round counts."""
    found = {}
    for proc in psutil.process_iter(["name"]):
        name = proc.info["name"]
        if name == "postgres" and proc.parent().name() != "postgres":
            found["postgres"] = proc
        elif name == "redis-server":
            found["redis"] = proc
    return found


@dataclass
class Cost:
    """CPU seconds spent while one sender ran, by kind, and the wall seconds it ran."""

    spent: dict[str, float]
    machine: float = 0.0  # every core's busy time, for how busy the cores were
    wall: float = 0.0

    def per_email(self, n: int) -> dict[str, float]:
        """µs per email of each kind and all; the share of the cores kept busy."""
        us = {kind: seconds / n * 1e6 for kind, seconds in self.spent.items()}
        busy = self.machine / (self.wall * (os.cpu_count() or 1))
        return {**us, "all": sum(us.values()), "busy": busy}


@contextmanager
def costing(sink_pid: int) -> Iterator[Cost]:
    """What the block spent: its sender (the descendants it waited for, unless the
    caller sets ``spent["sender"]`` itself), smtp-sink, Postgres and Redis."""
    watched = {**servers(), "sink": psutil.Process(sink_pid)}
    before = {kind: tree_cpu(proc) for kind, proc in watched.items()}
    children, machine = children_cpu(), machine_busy()
    cost = Cost({"sender": 0.0})
    started = time.perf_counter()
    yield cost
    cost.wall = time.perf_counter() - started
    cost.machine = machine_busy() - machine
    if not cost.spent["sender"]:
        cost.spent["sender"] = children_cpu() - children
    for kind, proc in watched.items():
        after = tree_cpu(proc)
        cost.spent[kind] = sum(v - before[kind].get(pid, 0.0) for pid, v in after.items())


def raw_round(sink: tuple[str, int], messages: list[OutgoingMessage], n: int) -> tuple[float, Cost]:
    with costing(sink[1]) as cost:
        elapsed, cost.spent["sender"] = run.send_raw(sink[0], messages, n)
    return n / elapsed, cost


def post_office_round(
    sink: tuple[str, int], content: tuple[str, ...], n: int
) -> tuple[float, Cost]:
    """Emails/s of ``send_queued_mail`` draining ``n`` queued emails, and its cost."""
    sink_url = sink[0]
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
        with costing(sink[1]) as cost:
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
        elapsed = cost.wall
        with psycopg.connect(url) as conn:
            sent = conn.execute("SELECT count(*) FROM post_office_email WHERE status = 0")
            count = int(sent.fetchone()[0])  # type: ignore[index]
        if count != n:
            raise RuntimeError(f"django-post-office sent {count} of {n}")
    return n / elapsed, cost


def outbox_round(sink: tuple[str, int], n: int, bulk: tuple[int, int]) -> tuple[float, float, Cost]:
    """(wall emails/s, steady emails/s, cost) of the Procfile's processes draining ``n``.
    The cost runs until the processes have exited, so it counts their stopping too."""
    sink_url = sink[0]
    with run.database("vs") as url:
        settings = run.settings_for(url, sink_url)
        run.fill(settings, n)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM (FREEZE, ANALYZE)")
            env = {**settings.to_env(), "OUTBOX_LOG_LEVEL": "WARNING"}
            with costing(sink[1]) as cost:
                started = time.perf_counter()
                with Pipeline(env, high=(0, 0), bulk=bulk, split_relays=True):
                    # On the one connection: a new one per poll would cost Postgres
                    # a backend's start each time, counted as Outbox's.
                    while count_sent(conn) < n:
                        time.sleep(0.05)
                    elapsed = time.perf_counter() - started
            return n / elapsed, steady_rate(conn), cost


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
    costs: dict[str, list[Cost]] = {"raw": [], "post_office": [], "outbox": []}
    with postfix_sink() as sink:
        step("pre-rendering the raw limit's messages")
        messages = run.prerendered(sink[0], min(args.emails, 2000))
        content = contents(messages[0])

        def raw() -> None:
            rate, cost = raw_round(sink, messages, args.emails)
            figures["raw"].append(rate)
            costs["raw"].append(cost)

        def post_office() -> None:
            rate, cost = post_office_round(sink, content, args.emails)
            figures["post_office"].append(rate)
            costs["post_office"].append(cost)

        def outbox() -> None:
            wall, steady, cost = outbox_round(sink, args.emails, bulk)
            figures["outbox"].append(wall)
            figures["steady"].append(steady)
            costs["outbox"].append(cost)

        rounds: list[tuple[str, Callable[[], None]]] = [
            ("raw", raw),
            ("django-post-office", post_office),
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
    print()
    print(cost_table(costs, args.emails))
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


def cost_table(costs: dict[str, list[Cost]], n: int) -> str:
    """CPU per email of each sender by kind, the median of its rounds, in µs."""
    names = {"raw": "raw limit", "post_office": "django-post-office", "outbox": "Outbox"}
    kinds = ("all", "sender", "sink", "postgres", "redis")
    lines = [
        "| sender | CPU per email: all | its own processes | smtp-sink | Postgres | Redis"
        " | cores busy |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, name in names.items():
        each = [c.per_email(n) for c in costs[key]]
        median = {k: statistics.median(e.get(k, 0.0) for e in each) for k in (*kinds, "busy")}
        cells = " | ".join(f"{median[k]:,.0f} µs" for k in kinds)
        lines.append(f"| {name} | {cells} | {median['busy']:.0%} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
