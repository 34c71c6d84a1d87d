"""Bulk throughput of the whole pipeline: this checkout against a baseline revision.

The Procfile's processes (a relay for high and a niced one for bulk mail, one
bulk worker process x 8 threads, as ``outbox worker bulk`` starts it) drain a
newsletter of N emails into an SMTP relay, once per round, each round's
processes running one of two source trees: this checkout, or a baseline
revision (``--baseline``, default main) checked out with ``git worktree add``
into a temporary directory. Child processes run with their tree as working
directory and ``PYTHONPATH``, so each imports its own ``outbox``. Rounds
alternate in pairs, baseline first in one pair and second in the next (B C, C
B, B C, ...), so that a machine getting busier or quieter weighs on both alike,
after a round of each that is not counted (caches, connections, bytecode).

The relay is either

* ``--reply-ms MS`` (default 2): ``bench/slow_relay.py``, which answers every
  SMTP command MS milliseconds after it arrives: a relay one round trip away
  (2 ms: the same region; 20 ms: another one). With PIPELINING a message costs
  two round trips on a reused connection, so the threads spend most of their
  time waiting for replies, as they do against any real relay; or
* ``--smtp-sink``: Postfix's smtp-sink (``apt-get install postfix``), which
  answers in microseconds and stores nothing: the worst case for anything a
  send adds on the sender's side.

Each tree's schema comes from its own ``outbox migrate``, into its own
database, which its own ``enqueue_many`` fills once and which is then the
template of a fresh database for each round. Each round has its own Redis
namespace. The round databases, the namespaces' keys, the template databases
and the baseline's worktree are removed at the end, also after a failure.

Figures, per round and tree:

* emails/s: results that reached Postgres after the first tenth of them, over
  the time from that tenth to the last (``sent_at``): start-up and the first
  connections are left out;
* CPU per email over about the same stretch, from the count of sent rows that
  first reaches a tenth to the one that reaches all (psutil): the worker's
  processes, the two relays, this round's Postgres backends, the SMTP relay;
  Redis is counted whole (the server is shared with everything else on the
  machine);
* the pairs' ratios (checkout / baseline) of emails/s, their median, minimum
  and maximum.

    python -m bench.bench_delivery [--emails 3000] [--pairs 4] [--warmup 1]
        [--baseline REV] [--reply-ms 2 | --smtp-sink] [--threads 8]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
import redis

from bench.run import machine, smtp_sink
from outbox.testing.pipeline import Pipeline

ADMIN_URL = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
CHECKOUT = Path(__file__).resolve().parents[1]
POLL = 0.05  # seconds between counts of sent rows
STALL = 120.0  # seconds without a new result that end a round as failed
Reading = dict[int, tuple[str, float]]  # pid: (kind of process, CPU seconds)
KINDS = ("worker", "relays", "postgres", "smtp relay", "redis (whole)")

# Run by each tree's own interpreter path: its enqueue_many fills its database.
FILL = """
import json, sys
import psycopg
from outbox import enqueue_many
n, params = int(sys.argv[1]), json.loads(sys.argv[2])
rows = (
    {"idempotency_key": f"nl-{i}", "to": f"reader{i}@example.com", "template": "newsletter",
     "params": {**params, "name": f"Reader {i}"}}
    for i in range(n)
)
with psycopg.connect(sys.argv[3]) as conn:
    enqueue_many(conn, rows)
"""
NEWS = {
    "name": "Reader",
    "title": "What is new this month",
    "intro": "A short introduction paragraph for the newsletter.",
    "url": "https://outbox.example/news/2026-11",
}


@dataclass
class Tree:
    """A source tree under test and its filled template database."""

    label: str  # checkout | baseline
    root: Path
    commit: str
    template: str = ""  # database name

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(self.root), "OUTBOX_LOG_LEVEL": "WARNING"}

    def run(self, *args: str, database: str) -> str:
        """``python args`` in this tree against ``database``; its stdout."""
        env = {**os.environ, **self.env(), "DATABASE_URL": url_of(database)}
        done = subprocess.run(
            [sys.executable, *args],
            check=False,
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise RuntimeError(f"{self.label}: {args[:3]} failed:\n{done.stderr[-2000:]}")
        return done.stdout


@dataclass
class Round:
    tree: str
    rate: float  # emails/s after the first tenth
    wall: float  # seconds from the processes' start to the last result
    cpu_us: dict[str, float]  # CPU per email by kind of process


# ---------------------------------------------------------------- set-up


def url_of(database: str) -> str:
    return ADMIN_URL.rsplit("/", 1)[0] + f"/{database}"


def admin(statement: str) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


@contextlib.contextmanager
def database(name: str, template: str | None = None) -> Iterator[str]:
    admin(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    try:
        yield name
    finally:
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def git(*args: str, cwd: Path = CHECKOUT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@contextlib.contextmanager
def baseline_tree(revision: str) -> Iterator[Tree]:
    try:
        commit = git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"--baseline {revision}: no such revision") from None
    parent = Path(tempfile.mkdtemp(prefix="outbox-bench-baseline-"))
    root = parent / "tree"
    git("worktree", "add", "--detach", "--quiet", str(root), commit)
    try:
        yield Tree("baseline", root, commit[:9])
    finally:
        git("worktree", "remove", "--force", str(root))
        shutil.rmtree(parent, ignore_errors=True)


def checkout_tree() -> Tree:
    commit = git("rev-parse", "--short=9", "HEAD")
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += " + uncommitted changes"
    return Tree("checkout", CHECKOUT, commit)


@contextlib.contextmanager
def prepared(tree: Tree, n: int, tag: str) -> Iterator[Tree]:
    """``tree`` with its template database: migrated by the tree, filled with ``n`` emails."""
    with database(f"outbox_bench_dlv_{tag}_{tree.label}") as name:
        tree.run("-m", "outbox.cli", "migrate", database=name)
        status = tree.run("-m", "outbox.cli", "migrate", "--status", database=name).splitlines()
        pending = [line for line in status if line.rstrip().endswith("pending")]
        if pending or not status:
            raise RuntimeError(f"{tree.label}: schema not migrated: {pending or 'no migrations'}")
        print(f"{tree.label}: {tree.commit}, {len(status)} migrations applied", flush=True)
        tree.run("-c", FILL, str(n), json.dumps(NEWS), url_of(name), database=name)
        # Statistics and hint bits in the template, so every round's copy plans and
        # reads alike, not as autovacuum happened to leave the template.
        with psycopg.connect(url_of(name), autocommit=True) as conn:
            conn.execute("VACUUM (FREEZE, ANALYZE)")
        # A fresh worktree has no bytecode: its first round would compile it.
        tree.run("-m", "compileall", "-q", "outbox", database=name)
        tree.template = name
        yield tree


@contextlib.contextmanager
def slow_relay(reply_ms: float) -> Iterator[tuple[str, int]]:
    """(url, pid) of bench/slow_relay.py answering after ``reply_ms``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.slow_relay", "--reply-ms", str(reply_ms)],
        cwd=CHECKOUT,
        env={**os.environ, "PYTHONPATH": str(CHECKOUT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        yield f"smtp://127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait()


@contextlib.contextmanager
def postfix_sink() -> Iterator[tuple[str, int]]:
    """(url, pid) of Postfix's smtp-sink."""
    with smtp_sink() as (url, kind):
        if kind != "Postfix smtp-sink":
            raise SystemExit("smtp-sink is not installed: apt-get install postfix")
        (pid,) = [p.pid for p in psutil.Process().children() if p.name() == "smtp-sink"]
        yield url, pid


def drop_keys(namespace: str) -> None:
    """Every Redis key of a round's namespace: its own and its broker's."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{namespace}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


# ---------------------------------------------------------------- measuring


class CpuMeter:
    """CPU seconds of one round's processes by kind, read when asked."""

    def __init__(self, pipeline: Pipeline, relay_pid: int, conn: psycopg.Connection) -> None:
        self.pipeline = pipeline
        self.relay_pid = relay_pid
        self.conn = conn
        self.redis = [p.pid for p in psutil.process_iter(["name"]) if p.name() == "redis-server"]

    def pids(self) -> Iterator[tuple[str, int]]:
        for name, proc in self.pipeline.procs.items():
            kind = "relays" if name.startswith("relay") else "worker"
            yield kind, proc.pid
            with contextlib.suppress(psutil.NoSuchProcess):
                for child in psutil.Process(proc.pid).children(recursive=True):
                    yield kind, child.pid
        backends = self.conn.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        for (pid,) in backends:
            yield "postgres", pid
        yield "smtp relay", self.relay_pid
        for pid in self.redis:
            yield "redis (whole)", pid

    def read(self) -> Reading:
        seconds: Reading = {}
        for kind, pid in self.pids():
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                times = psutil.Process(pid).cpu_times()
                # Children that exited and were waited for count with their
                # parent (a Postgres backend that ended, an autovacuum worker).
                spent = times.user + times.system + times.children_user + times.children_system
                seconds[pid] = (kind, spent)
        return seconds

    @staticmethod
    def used(before: Reading, after: Reading) -> dict[str, float]:
        """CPU seconds by kind between two reads (a process born between counts whole)."""
        totals: dict[str, float] = collections.Counter()
        for pid, (kind, seconds) in after.items():
            totals[kind] += seconds - before.get(pid, (kind, 0.0))[1]
        return totals


def count_sent(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM email_outbox WHERE status = 'sent'").fetchone()
    return int(row[0])  # type: ignore[index]


def steady_rate(conn: psycopg.Connection) -> float:
    """Results per second after the first tenth, from the rows' own ``sent_at``."""
    # MATERIALIZED: statistics taken while the rows were pending say no row is
    # sent, and the planner would then compute the window again for every row.
    row = conn.execute(
        """
        WITH w AS MATERIALIZED (
            SELECT percentile_disc(0.1) WITHIN GROUP (ORDER BY sent_at) AS start,
                   max(sent_at) AS stop
            FROM email_outbox WHERE status = 'sent'
        )
        SELECT count(*) FILTER (WHERE o.sent_at > w.start), extract(epoch FROM w.stop - w.start)
        FROM email_outbox o, w WHERE o.status = 'sent' GROUP BY w.start, w.stop
        """
    ).fetchone()
    assert row is not None
    return float(row[0]) / max(float(row[1]), 1e-9)


def wait_for_results(conn: psycopg.Connection, n: int, at_tenth: Callable[[int], None]) -> float:
    """Wait for ``n`` sent rows; ``at_tenth(sent)`` runs once, when a tenth of
    them first are. The wall seconds waited."""
    started = last_change = time.monotonic()
    marked = False
    sent = previous = 0
    while sent < n:
        time.sleep(POLL)
        sent = count_sent(conn)
        if not marked and sent >= n // 10:
            at_tenth(sent)
            marked = True
        if sent != previous:
            previous, last_change = sent, time.monotonic()
        elif time.monotonic() - last_change > STALL:
            states = conn.execute("SELECT status, count(*) FROM email_outbox GROUP BY 1").fetchall()
            raise RuntimeError(f"no new result for {STALL:.0f} s: {dict(states)}")  # type: ignore[arg-type]
    return time.monotonic() - started


def drain(pipeline: Pipeline, conn: psycopg.Connection, n: int, relay_pid: int) -> Round:
    """Wait for all ``n`` results; CPU from the first tenth of them to the last."""
    meter = CpuMeter(pipeline, relay_pid, conn)
    marks: list[tuple[Reading, int]] = []
    wall = wait_for_results(conn, n, lambda sent: marks.append((meter.read(), sent)))
    ((before, sent_then),) = marks
    used = CpuMeter.used(before, meter.read())
    counted = max(n - sent_then, 1)
    cpu_us = {kind: used.get(kind, 0.0) / counted * 1e6 for kind in KINDS}
    return Round("", steady_rate(conn), wall, cpu_us)


def one_round(tree: Tree, smtp_url: str, relay_pid: int, n: int, threads: int) -> Round:
    tag = uuid.uuid4().hex[:8]
    namespace = f"bench-dlv-{tag}"
    env = {
        **tree.env(),
        "REDIS_URL": REDIS_URL,
        "SMTP_URL": smtp_url,
        "OUTBOX_NAMESPACE": namespace,
    }
    try:
        with database(f"outbox_bench_dlv_{tag}", template=tree.template) as name:
            env["DATABASE_URL"] = url_of(name)
            with psycopg.connect(url_of(name), autocommit=True) as conn:
                pipeline = Pipeline(env, high=(0, 0), bulk=(1, threads), split_relays=True)
                with contextlib.chdir(tree.root), pipeline:  # `python -m` looks in the cwd first
                    result = drain(pipeline, conn, n, relay_pid)
        result.tree = tree.label
        return result
    finally:
        drop_keys(namespace)


# ---------------------------------------------------------------- report


def show(label: str, result: Round) -> None:
    cpu = ", ".join(f"{kind} {us:,.0f}" for kind, us in result.cpu_us.items())
    print(
        f"{label:<8}  {result.tree:<8}  {result.rate:7,.0f} emails/s"
        f"  (wall {result.wall:5.1f} s)  CPU µs/email: {cpu}",
        flush=True,
    )


def summary(pairs: list[tuple[Round, Round]]) -> None:
    """Medians per tree and the pairs' ratios, checkout / baseline."""
    for label in ("checkout", "baseline"):
        mine = [r for pair in pairs for r in pair if r.tree == label]
        rates = [r.rate for r in mine]
        total = statistics.median(sum(r.cpu_us.values()) for r in mine)
        print(
            f"{label:<8}  emails/s median {statistics.median(rates):,.0f}"
            f" (min {min(rates):,.0f}, max {max(rates):,.0f});"
            f" CPU per email median {total:,.0f} µs"
        )
    ratios = []
    cpu_ratios = []
    for pair in pairs:
        mine = {r.tree: r for r in pair}
        ratios.append(mine["checkout"].rate / mine["baseline"].rate)
        cpu_ratios.append(
            sum(mine["checkout"].cpu_us.values()) / sum(mine["baseline"].cpu_us.values())
        )
    print(
        f"checkout / baseline emails/s, {len(pairs)} pairs: median {statistics.median(ratios):.3f}"
        f" (min {min(ratios):.3f}, max {max(ratios):.3f});"
        f" CPU per email: median {statistics.median(cpu_ratios):.3f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--emails", type=int, default=3000, help="emails per round")
    parser.add_argument("--pairs", type=int, default=4, help="rounds of each tree")
    parser.add_argument(
        "--warmup", type=int, default=1, help="rounds of each tree first, not counted"
    )
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--threads", type=int, default=8, help="threads of the bulk worker")
    relay = parser.add_mutually_exclusive_group()
    relay.add_argument("--reply-ms", type=float, default=2.0, help="the slow relay's delay")
    relay.add_argument("--smtp-sink", action="store_true", help="Postfix's smtp-sink instead")
    args = parser.parse_args()
    print(machine())
    began, load = time.monotonic(), os.getloadavg()[0]
    tag = uuid.uuid4().hex[:6]
    relay_cm = postfix_sink() if args.smtp_sink else slow_relay(args.reply_ms)
    with (
        baseline_tree(args.baseline) as baseline,
        prepared(baseline, args.emails, tag),
        prepared(checkout_tree(), args.emails, tag) as checkout,
        relay_cm as (smtp_url, relay_pid),
    ):
        what = "smtp-sink" if args.smtp_sink else f"a relay answering after {args.reply_ms:g} ms"
        print(f"{args.emails:,} emails per round, 1 bulk worker x {args.threads} threads, {what}")
        for _ in range(args.warmup):
            for tree in (baseline, checkout):
                show("warm-up", one_round(tree, smtp_url, relay_pid, args.emails, args.threads))
        pairs = []
        for index in range(args.pairs):
            order = (baseline, checkout) if index % 2 == 0 else (checkout, baseline)
            results = []
            for tree in order:
                results.append(one_round(tree, smtp_url, relay_pid, args.emails, args.threads))
                show(f"round {2 * index + len(results)}", results[-1])
            pairs.append((results[0], results[1]))
    summary(pairs)
    # The machine's other work weighs on every figure: say how busy it was.
    print(
        f"wall time {time.monotonic() - began:,.0f} s; load average (1 min)"
        f" {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
