"""Every console page's latency with a large outbox, through a real `outbox web`.

A scratch database gets ``--rows`` emails by ``INSERT … SELECT
generate_series`` (a month of history: mostly sent, some dead, held, failed,
pending and bounced), 100,000 suppressions and 10,000 audit rows; then each
page is fetched ``--repeat`` times by a signed-in operator over loopback HTTP,
and the plans of the list queries are printed (which index each uses):

    python bench/bench_console.py [--rows 1000000] [--repeat 40]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import re
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg

from outbox.config import Settings
from outbox.db.store import connections, console_reads
from outbox.web.console_auth import hash_password
from outbox.web.server import make_server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script too
from bench.run import database

SECRET = "bench-" + uuid.uuid4().hex + uuid.uuid4().hex
PASSWORD = "bench-operator-password"
_CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')

# One statement, the whole history: row g's status by g's remainder.
FILL = """
INSERT INTO email_outbox (idempotency_key, recipient, template, params, content_hash, message_id,
    priority, status, status_reason, attempts, next_attempt_at, created_at, queued_at, sent_at,
    failed_at, provider_message_id, bounce_class, bounced_at)
SELECT 'order-' || g || '-' || t.template,
       'user' || (g %% 400000) || '@example' || (g %% 50) || '.com',
       t.template, '{"name": "R", "code": "123456", "product": "Shop", "minutes": 10,
                    "title": "News", "intro": "Hi", "url": "https://x.example"}',
       md5(g::text), '<' || md5('m' || g) || '@outbox.localhost>',
       t.priority, s.status, s.status, s.attempts,
       at, at, at, CASE WHEN s.status = 'sent' THEN at + interval '1 second' END,
       CASE WHEN s.status IN ('failed', 'dead') THEN at + interval '1 hour' END,
       CASE WHEN s.status = 'sent' THEN 'pm-' || g END,
       CASE WHEN s.status = 'sent' AND g %% 500 = 0 THEN 'hard' END,
       CASE WHEN s.status = 'sent' AND g %% 500 = 0 THEN at + interval '1 minute' END
FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g
CROSS JOIN LATERAL (SELECT now() - (%(rows)s - g) * %(spacing)s::interval AS at) AS w
CROSS JOIN LATERAL (SELECT CASE WHEN g %% 3 = 0 THEN 'login_code' ELSE 'newsletter' END AS template,
                           CASE WHEN g %% 3 = 0 THEN 'high' ELSE 'bulk' END AS priority) AS t
CROSS JOIN LATERAL (SELECT CASE WHEN g %% 1000 < 5 THEN 'dead' WHEN g %% 1000 < 7 THEN 'held'
                                WHEN g %% 1000 < 9 THEN 'failed'
                                WHEN g > %(rows)s - 2000 AND g %% 4 = 0 THEN 'pending'
                                ELSE 'sent' END AS status,
                           CASE WHEN g %% 1000 < 5 THEN 8 ELSE 1 END AS attempts) AS s
"""


def fill(url: str, rows: int) -> float:
    started = time.perf_counter()
    spacing = f"{30 * 86400 / rows:.6f} seconds"  # a month of history
    with psycopg.connect(url) as conn:
        step = 1_000_000
        for first in range(1, rows + 1, step):
            last = min(first + step - 1, rows)
            conn.execute(
                FILL.encode(), {"first": first, "last": last, "rows": rows, "spacing": spacing}
            )
            conn.commit()
            print(f"  {last:,} rows", flush=True)
        # One dead email's history, for its page: 8 attempts and their status changes.
        dead = conn.execute("SELECT max(id) FROM email_outbox WHERE status = 'dead'").fetchone()
        assert dead is not None
        conn.execute(
            "INSERT INTO email_attempt (outbox_id, attempt, verdict, reply_code, reply_text, "
            "duration_ms, worker, transport) SELECT %s, a, 'retry', 451, '4.3.0 try later', 12, "
            "'w', 'smtp' FROM generate_series(1, 8) a",
            (dead[0],),
        )
        conn.execute(
            "INSERT INTO email_event (outbox_id, from_status, to_status, reason) "
            "SELECT %s, 'sending', 'pending', 'retry' FROM generate_series(1, 16)",
            (dead[0],),
        )
        conn.execute(
            "INSERT INTO email_suppression (address, scope, reason, created_at) "
            "SELECT 'gone' || g || '@example.com', 'all', 'hard_bounce', "
            "now() - g * interval '1 minute' FROM generate_series(1, 100000) g"
        )
        conn.execute(
            "INSERT INTO console_audit (actor, role, action, target, reason) "
            "SELECT 'olga', 'operator', 'requeue', 'email ' || g, 'bench' "
            "FROM generate_series(1, 10000) g"
        )
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")
    return time.perf_counter() - started


def plans(url: str) -> list[tuple[str, str]]:
    """Which index each list query uses (the first line of its plan naming one)."""
    with psycopg.connect(url) as conn:
        (top,) = conn.execute("SELECT max(id) FROM email_outbox").fetchone()  # type: ignore[misc]
        # Every filter off, from the filters the store takes (so a new one is off too).
        none = {**dataclasses.asdict(console_reads.EmailFilter()), "from_id": 0}
        cases = [
            ("console_emails", {**none, "before": 2**63 - 1, "limit": 50}),
            ("console_emails", {**none, "status": "dead", "before": 2**63 - 1, "limit": 50}),
            ("console_emails", {**none, "status": "held", "before": top // 2, "limit": 50}),
            (
                "console_find",
                {"ref": "order-99-login_code", "bracketed": "<x>", "id": None, "limit": 50},
            ),
            (
                "console_find_to",
                {"address": "user77@example27.com", "before": 2**63 - 1, "limit": 50},
            ),
        ]
        found = []
        for name, args in cases:
            lines = [
                str(r[0])
                for r in conn.execute(
                    b"EXPLAIN " + console_reads.queries[name].encode(), args, prepare=False
                ).fetchall()
            ]
            used = sorted(
                {
                    m
                    for line in lines
                    for m in re.findall(r"Scan (?:Backward )?(?:using|on) (\w+)", line)
                    if "Index" in line
                }
            )
            label = name + "".join(f" {k}={v}" for k, v in args.items() if k == "status" and v)
            seq = [line.strip() for line in lines if "Seq Scan" in line]
            found.append((label, ", ".join(used) + (f"; {seq}" if seq else "")))
    return found


def index_sizes(url: str) -> list[tuple[str, int]]:
    """The bytes of each index of the outbox table: what a row carries."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index"
            " WHERE indrelid = 'email_outbox'::regclass ORDER BY 1"
        ).fetchall()
    return [(str(name), int(size)) for name, size in rows]


def timed(fetch: Callable[[], httpx.Response], repeat: int) -> tuple[float, float]:
    fetch()  # warm the connection and the plan cache
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        answer = fetch()
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, (answer.status_code, answer.text[:500])
    times.sort()
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    with database("console") as url:
        print(f"filling {args.rows:,} rows")
        seconds = fill(url, args.rows)
        print(f"filled in {seconds:.0f} s ({args.rows / seconds:,.0f} rows/s)")
        for label, used in plans(url):
            print(f"plan {label}: {used}")
        for name, size in index_sizes(url):
            print(f"index {name}: {size / 2**20:,.0f} MiB")
        settings = dataclasses.replace(
            Settings(),
            database_url=url,
            secret=SECRET,
            console_users=f"olga:operator:{hash_password(PASSWORD)}",
            console_secure_cookie="off",
        )
        with psycopg.connect(url) as conn:
            dead_id = conn.execute("SELECT max(id) FROM email_outbox WHERE status = 'dead'")
            (dead,) = dead_id.fetchone()  # type: ignore[misc]
            (top,) = conn.execute("SELECT max(id) FROM email_outbox").fetchone()  # type: ignore[misc]
        with connections.Pool(url, name="bench-console", max_size=8) as pool:
            server = make_server(settings, pool, "127.0.0.1", 0)
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            host, port = server.server_address
            with httpx.Client(base_url=f"http://{host}:{port}", timeout=60) as client:
                login = client.get("/console/login")
                token = _CSRF.search(login.text).group(1)  # type: ignore[union-attr]
                client.post(
                    "/console/login", data={"csrf": token, "name": "olga", "password": PASSWORD}
                )
                csrf = _CSRF.search(client.get("/console/").text).group(1)  # type: ignore[union-attr]

                def search(q: str) -> Callable[[], httpx.Response]:
                    return lambda: client.post("/console/emails", data={"csrf": csrf, "q": q})

                def get(path: str) -> Callable[[], httpx.Response]:
                    return lambda: client.get(path)

                mid = f"{top // 2}"
                ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=7)
                week = ago.strftime("%Y-%m-%dT%H:%M")
                week_end = (ago + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
                message_id = "ae7be26cdaa742ca148068d5ac90eaca@outbox.localhost"  # md5("m1"): row 1
                pages = [
                    ("overview", get("/console/")),
                    ("emails, newest", get("/console/emails")),
                    ("emails, a page deep in the history", get(f"/console/emails?before={mid}")),
                    ("dead list", get("/console/emails?status=dead")),
                    ("held list, older page", get(f"/console/emails?status=held&before={mid}")),
                    ("pending bulk", get("/console/emails?status=pending&priority=bulk")),
                    ("template filter", get("/console/emails?template=login_code")),
                    ("one hour, a week ago", get(f"/console/emails?since={week}&until={week_end}")),
                    ("dead, since a week ago", get(f"/console/emails?status=dead&since={week}")),
                    ("search: key", search("order-300-login_code")),
                    ("search: Message-ID without brackets", search(message_id)),
                    ("search: row id", search(str(top // 3))),
                    ("search: provider id", search(f"pm-{top // 3 + 1}")),
                    ("search: address", search("user77@example27.com")),
                    ("one email (8 attempts)", get(f"/console/emails/{dead}")),
                    ("suppressions", get("/console/suppressions")),
                    ("audit", get("/console/audit")),
                ]  # fmt: skip
                print(f"\n| page ({args.rows:,} rows) | p50 ms | p95 ms |")
                print("|---|---|---|")
                for label, fetch in pages:
                    p50, p95 = timed(fetch, args.repeat)
                    print(f"| {label} | {p50:.1f} | {p95:.1f} |", flush=True)
            server.shutdown()
            server.server_close()


if __name__ == "__main__":
    main()
