"""The ``outbox`` command."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import io
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from outbox import redact
from outbox.config import Settings, default_settings
from outbox.errors import OutboxError, SchemaMissing
from outbox.redact import recipient_tag
from outbox.telemetry.tracing import trace_id_of

if TYPE_CHECKING:
    from outbox.db import store

# Commands import the database layer when they run: `outbox bounces classify`
# only parses, and starts without loading psycopg.

log = logging.getLogger("outbox")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    # argparse fills a "*" positional before it reads the options after it, so
    # `bounces ingest --to RCPT -` would leave "-" over: it is one of the files.
    if extra and hasattr(args, "files") and not any(e.startswith("--") for e in extra):
        args.files = [*args.files, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=os.environ.get("OUTBOX_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    process = getattr(args, "process", None)
    if args.handler is cmd_bounces and args.action == "serve":
        process = "bounces"
    if process:
        # A long-running process checks everything it needs before it starts.
        from outbox.preflight import settings_or_exit  # noqa: PLC0415

        settings_or_exit(process)
    try:
        settings = default_settings()
    except OutboxError as exc:
        print(f"outbox: {exc}", file=sys.stderr)  # ConfigError never shows a secret value
        return 2
    redact.install(settings)  # no secret, no address in clear in any log line
    if args.handler is not cmd_config:  # `outbox config check` lists them instead
        from outbox.preflight import common_problems  # noqa: PLC0415

        for line in common_problems(settings):
            print(f"outbox: {line}", file=sys.stderr)  # names the variable, never its value
            return 2
    try:
        return int(args.handler(settings, args) or 0)
    except OutboxError as exc:
        # One line: a database error's context (LINE 4: ...) is for a developer's log.
        said = (str(exc).splitlines() or [type(exc).__name__])[0]
        print(f"outbox: {redact.Redactor.from_settings(settings).text(said)}", file=sys.stderr)
        return 2


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("outbox-email")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _parser() -> argparse.ArgumentParser:  # noqa: PLR0915 (one statement per command)
    parser = argparse.ArgumentParser(prog="outbox", description=__doc__)
    parser.add_argument("--version", action="version", version=f"outbox {_version()}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, handler: Any, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        return sub

    migrate = command(
        "migrate", cmd_migrate, "create or update the schema (safe while workers run)"
    )
    migrate.add_argument("--status", action="store_true", help="list applied and pending ones")
    migrate.add_argument("--json", action="store_true", help="machine-readable output")
    migrate.add_argument(
        "--lock-timeout",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="longest wait for a table lock before a pause and a retry (default 0.5)",
    )
    config = command("config", cmd_config, "the effective settings; `check`: every problem")
    config.add_argument("action", nargs="?", choices=["show", "check"], default="show")
    config.add_argument(
        "--process",
        dest="only",
        action="append",
        choices=["app", "relay", "worker", "web", "bounces", "metrics"],
        help="check: only these processes (default: all)",
    )
    config.add_argument("--json", action="store_true", help="show: machine-readable output")
    relay = command("relay", cmd_relay, "publish due rows to the broker and sweep stuck ones")
    relay.set_defaults(process="relay")
    relay.add_argument(
        "--priority",
        action="append",
        choices=["high", "bulk"],
        help="only these priorities (default both); a high-only relay keeps codes fast",
    )
    sweep = command("sweep", cmd_sweep, "return rows stuck in queued or sending, once")
    sweep.add_argument("--json", action="store_true", help="machine-readable output")
    sweep.add_argument(
        "--force",
        action="store_true",
        help="sweep sending rows even when Postgres or every process was just silent",
    )
    status = command("status", cmd_status, "rows per status and priority, oldest unsent age")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--tag", help="count only the emails enqueued with this tag")
    show = command("show", cmd_show, "one email with its attempts and status changes")
    which_email = show.add_mutually_exclusive_group(required=True)
    which_email.add_argument(
        "ref", nargs="?", metavar="REF", help="key, Message-ID (brackets optional), id, provider id"
    )
    which_email.add_argument(
        "--to", metavar="ADDRESS", help="the latest emails to ADDRESS (- reads it from stdin)"
    )
    show.add_argument("--json", action="store_true", help="one JSON object per email")
    show.add_argument(
        "--reveal",
        action="store_true",
        help="show addresses in reply texts and the recipient in clear (support only)",
    )
    requeue = command("requeue", cmd_requeue, "send failed, dead or held emails again")
    requeue.add_argument("ref", nargs="?", metavar="REF", help="one email (as `outbox show`)")
    requeue.add_argument("--failed", action="store_true", help="failed emails")
    requeue.add_argument("--dead", action="store_true", help="dead emails")
    requeue.add_argument("--held", action="store_true", help="held emails")
    requeue.add_argument("--template", help="only emails of this template")
    requeue.add_argument("--since", metavar="WHEN", help="only emails enqueued since (2h, 7d, ISO)")
    requeue.add_argument("--to-domain", metavar="DOMAIN", help="only emails to this domain")
    requeue.add_argument("--dry-run", action="store_true", help="count them, change nothing")
    requeue.add_argument("--batch", type=int, default=1000, help=argparse.SUPPRESS)
    requeue.add_argument("--json", action="store_true", help="machine-readable output")
    cancel = command("cancel", cmd_cancel, "call off an email no worker has taken yet")
    cancel.add_argument("key", metavar="KEY", help="the email's idempotency key")
    cancel.add_argument("--reason", required=True, help="why (recorded in its history)")
    cancel.add_argument("--by", help="who (recorded); default: cli:<login name>")
    suppress = command("suppress", cmd_suppress, "manage the suppression list")
    suppress.add_argument("action", choices=["add", "remove", "list", "check"])
    suppress.add_argument("address", nargs="?")
    suppress.add_argument(
        "--scope", choices=["all", "bulk"], default="all", help="bulk: only newsletters (add)"
    )
    suppress.add_argument(
        "--reason", default="manual", help="add: why, in a word or a line of your own"
    )
    suppress.add_argument(
        "--reveal", action="store_true", help="list: addresses in clear (support only)"
    )
    suppress.add_argument("--json", action="store_true", help="list, check: machine-readable")
    purge = command("purge", cmd_purge, "delete finished emails past retention; keys stay taken")
    purge.add_argument("--older-than", required=True, metavar="AGE", help="e.g. 30d, 12h")
    purge.add_argument("--dry-run", action="store_true", help="count them, delete nothing")
    purge.add_argument("--batch", type=int, default=5000, help=argparse.SUPPRESS)
    purge.add_argument("--json", action="store_true", help="machine-readable output")
    forget = command("forget", cmd_forget, "erase an address from every table (erasure request)")
    forget.add_argument(
        "address", metavar="ADDRESS", help="the address, or - to read it from stdin"
    )
    forget.add_argument("--json", action="store_true", help="machine-readable output")
    bounces = command("bounces", cmd_bounces, "receive, ingest and classify bounces")
    bounces.add_argument("action", choices=["serve", "ingest", "classify", "reprocess"])
    bounces.add_argument("files", nargs="*", metavar="FILE", help="a message file, or - for stdin")
    bounces.add_argument(
        "--to", metavar="ADDRESS", help="ingest: the envelope recipient (an MTA's ${recipient})"
    )
    bounces.add_argument(
        "--reveal", action="store_true", help="classify: recipients in clear (support only)"
    )
    bounces.add_argument("--json", action="store_true", help="reprocess: machine-readable output")
    demo = command("demo", cmd_demo, "send a login code and a newsletter through the pipeline")
    demo.add_argument("--newsletter", type=int, default=1000, help="newsletter recipients")
    demo.add_argument("--timeout", type=float, default=180.0, help="seconds to wait")
    demo.add_argument(
        "--keep", action="store_true", help="keep the demo's schema to look at it afterwards"
    )
    templates = command("templates", cmd_templates, "compile, check and preview the templates")
    templates.add_argument("action", choices=["check", "preview"])
    templates.add_argument("name", nargs="?", help="preview: the template")
    templates.add_argument("--params", help="preview: params as JSON (default: the example)")
    templates.add_argument("--to", default="recipient@example.com", help="preview: recipient")
    templates.add_argument("--priority", choices=["high", "bulk"], help="preview: priority")
    templates.add_argument("--locale", help="preview: the language, e.g. de-AT (its folder)")
    templates.add_argument("--out", type=Path, default=Path(), help="preview: output folder")
    templates.add_argument("--json", action="store_true", help="check: machine-readable output")
    api_keys = command("api-keys", cmd_api_keys, "keys of the HTTP API (`outbox web`, /v1/)")
    api_keys.add_argument("action", choices=["create", "list", "revoke"])
    api_keys.add_argument("name", nargs="?", help="create, revoke: the key's name")
    api_keys.add_argument(
        "--scope",
        action="append",
        choices=["send", "read"],
        help="create: send (enqueue, look up with the recipient redacted; the default), "
        "read (look up with the recipient in clear); repeat for both",
    )
    console = command("console", cmd_console, "the web console's users (see docs/console.md)")
    console.add_argument("action", choices=["hash-password"])
    web = command(
        "web", cmd_web, "the HTTP API, unsubscribe links, bounce webhooks and the console"
    )
    web.set_defaults(process="web")
    # PORT is the platform's (Heroku-like hosts), not an Outbox setting.
    web.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 8000))
    web.add_argument("--host", default="0.0.0.0", help="listen address")  # noqa: S104
    metrics = command("metrics", cmd_metrics, "the Prometheus exporter (outbox_* metrics)")
    metrics.set_defaults(process="metrics")
    metrics.add_argument("--port", type=int, help="default: PORT, else OUTBOX_METRICS_PORT")
    return parser


def _connect(settings: Settings) -> store.Conn:
    from outbox.db import store  # noqa: PLC0415
    from outbox.errors import StoreError  # noqa: PLC0415
    from outbox.preflight import database_url_problem  # noqa: PLC0415

    problem = database_url_problem(settings.database_url)
    if problem:
        raise OutboxError(problem)
    try:
        return store.connect(settings.database_url)
    except StoreError as exc:
        raise OutboxError(connect_failure(str(exc.__cause__))) from exc


def connect_failure(said: str) -> str:
    """What to do about a failed connection, in one line."""
    said = " ".join(said.split())
    missing = re.search(r'database "([^"]+)" does not exist', said)
    if missing:
        name = missing.group(1)
        return (
            f'database "{name}" does not exist on the server DATABASE_URL names: '
            f"create it (`createdb {name}`), then run `outbox migrate`"
        )
    return f"cannot reach Postgres at DATABASE_URL ({said}); start it or set DATABASE_URL"


def cmd_config(settings: Settings, args: argparse.Namespace) -> int:
    from outbox import preflight  # noqa: PLC0415

    if args.action == "check":
        # The bounce server is optional: checked when asked for or configured.
        processes = args.only or [
            p for p in preflight.PROCESSES if p != "bounces" or settings.bounce_domain
        ]
        found = preflight.problems(settings, processes)
        for line in found:
            print(f"problem: {line}")
        if not found:
            print(f"ok: {', '.join(processes)} can start with these settings")
        return 1 if found else 0
    shown = preflight.effective(settings)
    if args.json:
        print(json.dumps([vars(s) for s in shown], indent=2))
        return 0
    width = max(len(s.env) for s in shown)
    for s in shown:
        mark = " " if s.default else "*"
        print(f"{mark} {s.env:<{width}}  {s.value or '(empty)'}   [{', '.join(s.readers)}]")
    print("* set in the environment; [..] the processes that read it")
    return 0


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.db import store  # noqa: PLC0415

    with _connect(settings) as conn:
        if args.status:
            states = store.migration_status(conn)
            function_there = store.enqueue_function_present(conn)
        else:
            applied = store.migrate(
                conn,
                lock_timeout=args.lock_timeout,
                on_wait=lambda label, n: print(
                    f"{label}: waiting for traffic's locks (try {n})", file=sys.stderr
                ),
            )
    if not args.status:
        if args.json:
            print(_json({"applied": applied}))
        else:
            print("applied: " + ", ".join(applied) if applied else "schema is up to date")
        return 0
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "version": m.version,
                        "name": m.name,
                        "applied_at": m.applied_at.isoformat() if m.applied_at else None,
                    }
                    for m in states
                ],
                indent=2,
            )
        )
        return 0
    for m in states:
        when = f"applied {m.applied_at:%Y-%m-%d %H:%M:%S}" if m.applied_at else "pending"
        print(f"{m.version:04d}_{m.name:<32} {when}")
    # After the migrations: without it enqueue works, planning each insert on psycopg2.
    print(f"{'enqueue function':<37} {'there' if function_there else 'pending'}")
    pending = sum(1 for m in states if m.applied_at is None) + (not function_there)
    print(f"{pending} pending: run `outbox migrate`" if pending else "schema is up to date")
    return 0


def cmd_relay(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.broker import broker_kind, make_broker  # noqa: PLC0415
    from outbox.db import store  # noqa: PLC0415
    from outbox.models import Priority  # noqa: PLC0415
    from outbox.relay.held import broker_watch  # noqa: PLC0415
    from outbox.relay.loop import Relay  # noqa: PLC0415
    from outbox.relay.publish import Publisher  # noqa: PLC0415
    from outbox.telemetry.outages import quiet_pool_logs  # noqa: PLC0415
    from outbox.telemetry.setup import setup_tracing  # noqa: PLC0415

    setup_tracing("outbox-relay")
    quiet_pool_logs()
    stop = _stop_on_signals()
    if settings.retention_days:
        from outbox.relay.retention import Retention  # noqa: PLC0415

        Retention(settings, stop).start()
    with store.Pool(
        settings.database_url,
        name="outbox-relay",
        max_size=2,
        prepare=settings.prepared_statements == "on",
        timeout=settings.pool_timeout,
    ) as pool:
        priorities = [Priority(p) for p in args.priority or ("high", "bulk")]
        broker = make_broker(settings)
        # Redis can be asked what it holds and whether it restarted; RabbitMQ's
        # durable queues keep what they were given, so nothing needs watching.
        watch = (
            broker_watch(settings, broker.client, priorities)  # type: ignore[attr-defined]
            if broker_kind(settings.broker) == "redis"
            else None
        )
        Relay(settings, pool, Publisher(broker), priorities=priorities, watch=watch).run(stop)
    return 0


def cmd_sweep(settings: Settings, args: argparse.Namespace) -> int:
    """Return lost rows once: queued ones the broker lost, sending ones of gone workers."""
    from outbox.broker import broker_kind  # noqa: PLC0415
    from outbox.db import store  # noqa: PLC0415
    from outbox.relay.sweep_guard import why_not_sweep_sending  # noqa: PLC0415

    with _connect(settings) as conn:
        lost = _lost_queued(settings, conn) if broker_kind(settings.broker) == "redis" else set()
        up, freshest = store.sweep_guard(conn)
        refusal = why_not_sweep_sending(
            postgres_up_seconds=up,
            freshest_beat_seconds=freshest,
            stuck_seconds=settings.stuck_seconds,
            heartbeat_seconds=settings.heartbeat_seconds(),
        )
        if refusal and args.force:
            print(f"sweeping sending rows although {refusal} (--force)", file=sys.stderr)
        elif refusal:
            print(
                f"sending rows left alone: {refusal}; sweeping them now could send live"
                " workers' emails twice. Run again once the processes beat, or with --force"
                " if every worker is known to be stopped",
                file=sys.stderr,
            )
        sending = not refusal or args.force
        swept = store.sweep(
            conn,
            stuck_seconds=settings.stuck_seconds,
            max_attempts=settings.max_attempts,
            hold=settings.on_uncertain == "hold",
            lost=lost,
            sending=sending,
        )
    if args.json:
        print(
            _json(
                {
                    "requeued_lost": swept.requeued,
                    "silent_workers_rows": swept.uncertain or 0,
                }
            )
        )
        return 0
    print(
        f"requeued {swept.requeued} queued rows the broker had lost; "
        f"rows of silent worker processes: {swept.uncertain or 0}"
    )
    return 0


def _lost_queued(settings: Settings, conn: Any) -> set[int]:
    """Queued rows Redis no longer holds (RabbitMQ's durable queues lose none)."""
    import redis  # noqa: PLC0415

    from outbox.db import store  # noqa: PLC0415
    from outbox.errors import BrokerError  # noqa: PLC0415
    from outbox.models import Priority  # noqa: PLC0415
    from outbox.relay.held import broker_watch  # noqa: PLC0415

    candidates = store.queued_ids(conn, lost_after=1.0)
    if not candidates:
        return set()
    client = redis.Redis.from_url(settings.broker, socket_connect_timeout=5, socket_timeout=5)
    try:
        return set(candidates) - broker_watch(settings, client, list(Priority)).held_ids()
    except BrokerError as exc:
        print(f"queued rows left alone: {exc}", file=sys.stderr)
        return set()
    finally:
        client.close()


def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    """Counts and health; exits 1 when some part is down (a probe's answer)."""

    from outbox.db import store  # noqa: PLC0415
    from outbox.telemetry.health import gather  # noqa: PLC0415

    try:
        conn = _connect(settings)
    except OutboxError as exc:
        # Said on stderr as every command does, and shown with the other parts' health.
        print(f"outbox: {exc}", file=sys.stderr)
        health = gather(settings, None, str(exc))
        if args.json:
            print(json.dumps({"health": health.as_dict()}, indent=2))
        else:
            _print_health(health)
        return 2
    else:
        with conn:
            try:
                tag = args.tag
                counts = store.status_counts_by_tag(conn, tag) if tag else store.status_counts(conn)
                oldest = store.oldest_unsent(conn)
                paced = store.paced_pending(conn)
            except SchemaMissing:
                raise  # said in one line, with what to do
            except OutboxError:
                counts, oldest, paced = [], {}, {}
                with contextlib.suppress(OutboxError):
                    store.rollback(conn)  # the health checks below need a usable connection
            health = gather(settings, conn)
            with contextlib.suppress(OutboxError):
                store.rollback(conn)
    if args.json:
        report = {
            "counts": [{"status": s, "priority": p, "count": n} for s, p, n in counts],
            **({"tag": args.tag} if args.tag else {}),
            "oldest_unsent_seconds": oldest,
            "paced_pending": paced,
            "health": health.as_dict(),
        }
        print(json.dumps(report, indent=2))
        return 0 if health.ok else 1
    if args.tag:
        print(f"emails tagged {args.tag}:")
    if counts:
        print(f"{'status':<10} {'priority':<8} {'count':>10}")
    else:
        print("no email with that tag" if args.tag else "no email in the outbox yet")
    for status, priority, count in counts:
        print(f"{status:<10} {priority:<8} {count:>10}")
    for priority, age in sorted(oldest.items()):
        print(f"oldest unsent {priority}: {age:.1f}s")
    for receiver, count in paced.items():
        print(f"pending for {receiver}'s rate: {count}")
    _print_health(health)
    return 0 if health.ok else 1


def _print_health(health: Any) -> None:
    print("health:")
    pg = health.postgres
    if pg.get("up"):
        print(f"  postgres   up ({pg['latency_ms']:.1f} ms)")
    else:
        print(f"  postgres   DOWN: {pg.get('error', '')}")
    broker = health.broker
    if broker.get("up"):
        waiting = ", ".join(f"{q} {n}" for q, n in broker["messages"].items())
        print(f"  broker     up ({broker['latency_ms']:.1f} ms; messages waiting: {waiting})")
    else:
        print(f"  broker     DOWN: {broker.get('error', '')}")
    for t in health.transports:
        if t["state"] == "open":
            print(
                f"  transport  {t['transport']} DOWN since {t['down_since']}"
                f" ({t['failures']} failures; last: {t['last_error']})"
            )
        else:
            print(f"  transport  {t['transport']} up")
    if not health.transports and pg.get("up"):
        print("  transport  no send seen yet")
    for proc in health.processes:
        state = "SILENT" if proc["silent"] else "alive"
        detail = proc["detail"] or {}
        what = ",".join(detail.get("queues") or detail.get("priorities") or [])
        pool = detail.get("pool")
        pool_text = (
            f"; pool {pool['pool_available']}/{pool['pool_size']} free,"
            f" {pool['requests_waiting']} waiting"
            if pool
            else ""
        )
        print(
            f"  {proc['kind']:<10} {proc['name']} {what} {state},"
            f" last beat {proc['last_beat_seconds_ago']:.1f}s ago{pool_text}"
        )


def _json(value: Any) -> str:
    return json.dumps(value, default=_json_value)


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="milliseconds")
    return str(value)


def _ts(value: dt.datetime | None) -> str:
    """A timestamp to the millisecond: attempts of one second are told apart."""
    if value is None:
        return "-"
    return f"{value:%Y-%m-%d %H:%M:%S}.{value.microsecond // 1000:03d}"


def cmd_show(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.cli_input import email_ref  # noqa: PLC0415
    from outbox.db import store  # noqa: PLC0415

    redactor = redact.Redactor.from_settings(settings)
    with _connect(settings) as conn:
        if args.to is not None:
            # Read from stdin with "-", so the address is not even in the shell history.
            address = sys.stdin.readline().strip() if args.to == "-" else args.to.strip()
            rows = store.find_messages_to(conn, address)
            if not rows:
                tag = recipient_tag(address, secret=settings.secret)
                print(f"no email to {tag}", file=sys.stderr)
                return 1
        else:
            rows = store.find_messages(conn, email_ref(args.ref))
            if not rows:
                print(
                    f"no email with key, Message-ID, id or provider id {args.ref!r}",
                    file=sys.stderr,
                )
                return 1
        shown = [_email_details(conn, row) for row in rows]
    for index, (row, attempts, events, bounces) in enumerate(shown):
        if not args.reveal:
            row["recipient"] = recipient_tag(row["recipient"], secret=settings.secret)
        # Search Jaeger by this id, or by the tag email.message_id / outbox.idempotency_key.
        row["trace_id"] = trace_id_of(row.pop("trace_context", None))
        row.pop("params")  # may hold personal data; `outbox show` is for operators' logs too
        if args.json:
            text = _json({"email": row, "attempts": attempts, "events": events, "bounces": bounces})
        else:
            text = _show_text(row, attempts, events, bounces)
            text = text if index == 0 else "\n" + text
        # Reply texts and reasons quote addresses: tagged unless --reveal; secrets never.
        print(redactor.secrets_only(text) if args.reveal else redactor.text(text))
    return 0


def _email_details(conn: store.Conn, row: dict[str, Any]) -> tuple[Any, ...]:
    from outbox.db import store  # noqa: PLC0415

    outbox_id = row["id"]
    return (
        row,
        store.list_attempts(conn, outbox_id),
        store.list_events(conn, outbox_id),
        store.list_bounces(conn, outbox_id),
    )


def _show_text(
    row: dict[str, Any],
    attempts: list[dict[str, Any]],
    events: list[dict[str, Any]],
    bounces: list[dict[str, Any]],
) -> str:
    lines = [
        f"{name:>20}: {_ts(value) if isinstance(value, dt.datetime) else value}"
        for name, value in row.items()
    ]
    lines.append("attempts:" if attempts else "attempts: none yet")
    for a in attempts:
        # Numbered across requeues; a requeue restarts the try count of the budget.
        tried = f" (try {a['attempt']} after a requeue)" if a["attempt"] != a["number"] else ""
        lines.append(
            f"  #{a['number']}{tried} {_ts(a['attempted_at'])} {a['verdict']:<9} "
            f"via {a['transport'] or '?'} {a['reply_code'] or '-'} "
            f"{a['enhanced_status'] or ''} {a['reply_text'] or ''}"
        )
        for r in a.get("recipients") or []:
            lines.append(
                f"     {r['kind']:<3} {r['address']}: {r['code'] or '-'} {r['text'] or ''}"
            )
    lines.append("status changes:")
    lines.append(f"  {_ts(row['created_at'])} -> pending (enqueued)")
    for e in events:
        lines.append(f"  {_ts(e['at'])} {e['from_status']} -> {e['to_status']} ({e['reason']})")
    if bounces:
        lines.append("bounce reports:")
    for b in bounces:
        verdicts = ", ".join(
            " ".join(filter(None, (r.get("class"), r.get("status"), r.get("reason"))))
            for r in b["results"]
        )
        lines.append(
            f"  #{b['id']} {_ts(b['received_at'])} {b['source']} "
            f"linked by {b['link']}: {verdicts or 'no verdict'}"
        )
    return "\n".join(lines)


def cmd_requeue(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.cli_input import email_ref, requeue_filter  # noqa: PLC0415
    from outbox.db import store  # noqa: PLC0415

    chosen = args.failed or args.dead or args.held
    if args.ref and (chosen or args.template or args.since or args.to_domain):
        raise OutboxError("name one email, or choose with --failed/--dead/--held and filters")
    if args.ref:
        with _connect(settings) as conn:
            if args.dry_run:
                rows = store.find_messages(conn, email_ref(args.ref))
                parked = [r for r in rows if r["status"] in ("failed", "dead", "held")]
                store.rollback(conn)
                count = len(parked)
            else:
                count = len(store.requeue(conn, email_ref(args.ref)))
                store.commit(conn)
        if not count:
            print(
                f"no failed, dead or held email with key, Message-ID or id {args.ref!r}",
                file=sys.stderr,
            )
            return 1
        verb = "would requeue" if args.dry_run else "requeued"
        print(
            _json({"requeued": count, "dry_run": args.dry_run}) if args.json else f"{verb} 1 email"
        )
        return 0
    selected = requeue_filter(
        failed=args.failed,
        dead=args.dead,
        held=args.held,
        template=args.template,
        since=args.since,
        to_domain=args.to_domain,
        now=dt.datetime.now(dt.UTC),
    )
    with _connect(settings) as conn:
        counts = store.requeue_count(conn, selected.params())
        store.rollback(conn)
        total = sum(n for _, _, n in counts)
        if args.dry_run or not total:
            if args.json:
                found = [{"status": s, "priority": p, "count": n} for s, p, n in counts]
                print(_json({"would_requeue": found, "dry_run": args.dry_run}))
            elif not total:
                print("no email matches: nothing to requeue")
            else:
                for status, priority, count in counts:
                    print(f"would requeue {count} {status} {priority} emails")
            return 0
        progress = None
        if not args.json and total > args.batch:

            def progress(done: int) -> None:
                print(f"requeued {done}/{total}", file=sys.stderr, flush=True)

        woken = store.requeue_matching(
            conn, selected.params(), batch=max(1, args.batch), on_batch=progress
        )
    done = sum(woken.values())
    if args.json:
        print(_json({"requeued": woken, "dry_run": False}))
    else:
        per = ", ".join(f"{n} {p}" for p, n in sorted(woken.items()))
        print(f"requeued {done} emails ({per})" if done else "no email matches: nothing to requeue")
    return 0


def cmd_cancel(settings: Settings, args: argparse.Namespace) -> int:
    """Exit 0 when cancelled now, 1 when the email is past cancelling or unknown."""
    import getpass  # noqa: PLC0415

    from outbox.cancelling import cancel  # noqa: PLC0415
    from outbox.db import store  # noqa: PLC0415

    by = args.by or f"cli:{getpass.getuser()}"
    with _connect(settings) as conn:
        result = cancel(conn, args.key, reason=args.reason, by=by)
        store.commit(conn)
    if result.status is None:
        print(f"no email with key {args.key!r}", file=sys.stderr)
        return 1
    if not result.cancelled:
        print(f"not cancelled: the email is {result.status}", file=sys.stderr)
        return 1
    print(f"cancelled email {result.id}")
    return 0


def cmd_suppress(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.db import store  # noqa: PLC0415

    if args.action != "list" and not args.address:
        print(f"outbox suppress {args.action} needs an ADDRESS", file=sys.stderr)
        return 2
    if args.action == "add":
        from outbox.cli_input import suppression_reason  # noqa: PLC0415
        from outbox.validate import normalize_address  # noqa: PLC0415

        address = normalize_address(args.address)
        reason = suppression_reason(args.reason)  # checked before anything is written
    with _connect(settings) as conn:
        if args.action == "add":
            added = store.suppress(conn, address, reason=reason, scope=args.scope)
            store.commit(conn)
            print(f"suppressed ({args.scope})" if added else "already suppressed")
        elif args.action == "remove":
            removed = store.unsuppress(conn, args.address)
            store.commit(conn)
            print("removed" if removed else "not suppressed")
            return 0 if removed else 1
        elif args.action == "check":
            found = store.find_suppression(conn, args.address)
            if args.json:
                print(_json(None if found is None else _suppression(found, settings, reveal=False)))
                return 1 if found is None else 0
            if found is None:
                print("not suppressed")
                return 1
            print(f"suppressed ({found.scope}): {found.reason} since {_ts(found.created_at)}")
        else:
            entries = store.list_suppressions(conn)
            if args.json:
                print(_json([_suppression(e, settings, reveal=args.reveal) for e in entries]))
                return 0
            if not entries:
                print("no address is suppressed")
            for entry in entries:
                shown = (
                    entry.address
                    if args.reveal
                    else recipient_tag(entry.address, secret=settings.secret)
                )
                print(
                    f"{entry.created_at:%Y-%m-%d %H:%M}  {entry.scope:<4}  {entry.reason:<12}  "
                    f"{shown}"
                )
    return 0


def cmd_api_keys(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.db import store  # noqa: PLC0415
    from outbox.web import api_keys  # noqa: PLC0415

    if args.action != "list" and not args.name:
        print(f"outbox api-keys {args.action} needs a NAME", file=sys.stderr)
        return 2
    with _connect(settings) as conn:
        if args.action == "create":
            token = api_keys.new_token()
            scopes = api_keys.checked_scopes(args.scope or ["send"])
            store.create_api_key(
                conn,
                name=args.name,
                token_hash=api_keys.token_hash(token),
                prefix=api_keys.shown_prefix(token),
                scopes=scopes,
            )
            store.commit(conn)
            # The one time the key is shown: only its hash is kept.
            print(token)
            print(
                f"API key {args.name!r} ({', '.join(scopes)}): store it now, it is not shown again",
                file=sys.stderr,
            )
        elif args.action == "revoke":
            revoked = store.revoke_api_key(conn, args.name)
            store.commit(conn)
            print("revoked" if revoked else f"no live API key named {args.name!r}")
            return 0 if revoked else 1
        else:
            for key in store.list_api_keys(conn):
                state = (
                    f"revoked {key['revoked_at']:%Y-%m-%d %H:%M}" if key["revoked_at"] else "live"
                )
                print(
                    f"{key['created_at']:%Y-%m-%d %H:%M}  {key['prefix']}…  "
                    f"{','.join(key['scopes']):<10}  {state:<22}  {key['name']}"
                )
    return 0


def _suppression(entry: Any, settings: Settings, *, reveal: bool) -> dict[str, Any]:
    return {
        "address": entry.address
        if reveal
        else recipient_tag(entry.address, secret=settings.secret),
        "scope": entry.scope,
        "reason": entry.reason,
        "since": entry.created_at,
    }


def cmd_purge(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.cli_input import parse_duration  # noqa: PLC0415
    from outbox.db import store  # noqa: PLC0415

    before = dt.datetime.now(dt.UTC) - parse_duration(args.older_than)
    with _connect(settings) as conn:
        if args.dry_run:
            count = store.purge_count(conn, before=before)
            store.rollback(conn)
            if args.json:
                print(_json({"would_purge": count, "before": before, "dry_run": True}))
            else:
                print(f"would purge {count} finished emails last changed before {_ts(before)}")
            return 0

        def progress(done: store.Purged) -> None:
            if not args.json:
                print(f"purged {done.emails} emails so far", file=sys.stderr, flush=True)

        purged = store.purge(conn, before=before, batch=max(1, args.batch), on_batch=progress)
    if args.json:
        print(_json({**dataclasses.asdict(purged), "before": before, "dry_run": False}))
    elif not purged.emails:
        print(f"no finished email last changed before {_ts(before)}: nothing to purge")
    else:
        print(
            f"purged {purged.emails} emails, {purged.attempts} attempts, {purged.events} events,"
            f" {purged.bounces} bounce reports; their keys stay taken"
        )
    return 0


def cmd_forget(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.cli_input import erasure_pattern  # noqa: PLC0415
    from outbox.db import store  # noqa: PLC0415

    # "-" reads it from stdin, so the address is not even in the shell history.
    address = sys.stdin.readline().strip() if args.address == "-" else args.address.strip()
    pattern = erasure_pattern(address)
    tag = recipient_tag(address, secret=settings.secret)
    with _connect(settings) as conn:
        forgotten = store.forget(conn, address, pattern=pattern)
        store.commit(conn)
    if args.json:
        print(_json({"address": tag, **dataclasses.asdict(forgotten)}))
        return 0
    if not (forgotten.emails or forgotten.bounces or forgotten.suppression_kept):
        print(f"nothing held about {tag}")
        return 0
    kept = "; still suppressed, by its keyed hash" if forgotten.suppression_kept else ""
    print(
        f"erased {tag} from {forgotten.emails} emails, {forgotten.attempts} attempts,"
        f" {forgotten.events} events and {forgotten.bounces} bounce reports{kept}"
    )
    return 0


def cmd_bounces(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "classify":
        from outbox.bounces.command import classify_command  # noqa: PLC0415

        if args.reveal:
            return classify_command(args.files or ["-"], sys.stdout)
        # Each line names a bounced recipient: tagged, like every other output.
        found = io.StringIO()
        status = classify_command(args.files or ["-"], found)
        sys.stdout.write(redact.Redactor.from_settings(settings).text(found.getvalue()))
        return status
    from outbox.telemetry.setup import setup_tracing  # noqa: PLC0415

    setup_tracing("outbox-bounces")  # each bounce joins its email's trace
    if args.action == "serve":
        from outbox.feedback.smtp_server import serve  # noqa: PLC0415

        serve(settings, _stop_on_signals())
        return 0
    from outbox.feedback import ingest as feedback  # noqa: PLC0415

    with _connect(settings) as conn:
        if args.action == "reprocess":
            processed = feedback.process_pending(conn, settings)
            print(
                _json({"processed": processed}) if args.json else f"processed {processed} bounces"
            )
            return 0
        for path in args.files or ["-"]:
            raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
            done = feedback.ingest(conn, raw, settings, envelope_to=args.to)
            # The results name the bounced recipients: tagged, like every other output.
            redactor = redact.Redactor.from_settings(settings)
            print(
                redactor.text(
                    json.dumps(
                        {
                            "bounce_id": done.bounce_id,
                            "link": done.link.via,
                            "outbox_id": done.link.outbox_id,
                            "forged": done.link.forged,
                            "results": [r.to_json() for r in done.results],
                            "suppressed": [
                                recipient_tag(a, secret=settings.secret) for a in done.suppressed
                            ],
                            "unprocessable": done.unprocessable is not None,
                        }
                    )
                )
            )
    return 0


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.testing.demo import run_demo  # noqa: PLC0415

    return run_demo(settings, newsletter=args.newsletter, timeout=args.timeout, keep=args.keep)


def cmd_templates(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.message import preview as template_tools  # noqa: PLC0415

    if args.action == "check":
        failed = 0
        checked_all = list(template_tools.check(settings))
        if args.json:
            print(
                _json(
                    [
                        {"name": c.name, "version": c.version, "problem": c.problem}
                        for c in checked_all
                    ]
                )
            )
            return 1 if any(c.problem for c in checked_all) else 0
        if not checked_all:
            print("no template found")
        for checked in checked_all:
            if checked.problem:
                failed += 1
                print(f"FAIL {checked.name}: {checked.problem}")
            else:
                how = "compiled, example rendered" if checked.rendered_example else "compiled"
                print(f"ok   {checked.name} {checked.version} ({how})")
        return 1 if failed else 0
    if not args.name:
        print("outbox templates preview needs a NAME", file=sys.stderr)
        return 2
    try:
        params = None if args.params is None else json.loads(args.params)
    except json.JSONDecodeError as exc:
        print(f"outbox: --params is not JSON: {exc}", file=sys.stderr)
        return 2
    written = template_tools.preview(
        settings,
        args.name,
        params,
        out_dir=args.out,
        to=args.to,
        priority=args.priority,
        locale=args.locale,
    )
    print(written.eml)
    if written.html:
        print(written.html)
    return 0


def cmd_console(settings: Settings, args: argparse.Namespace) -> int:
    """``hash-password``: the argon2 hash of the password on stdin, for OUTBOX_CONSOLE_USERS."""
    from outbox.web.console_auth import hash_password  # noqa: PLC0415

    # From stdin, so the password is in no shell history or process list.
    password = sys.stdin.readline().rstrip("\r\n")
    print(hash_password(password))
    return 0


def cmd_web(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.telemetry.setup import setup_tracing  # noqa: PLC0415
    from outbox.web.server import serve  # noqa: PLC0415

    setup_tracing("outbox-web")
    if not settings.metrics_auth:
        serve(settings, args.host, args.port, _stop_on_signals())
        return 0
    # One port per app on Heroku-like hosts: the exporter rides along at /metrics
    # (the database's figures; the pace per receiver, read from Redis, stays with
    # `outbox metrics`).
    from outbox.telemetry.metrics_server import metrics_registry  # noqa: PLC0415

    registry, collector = metrics_registry(settings.database_url)
    try:
        serve(settings, args.host, args.port, _stop_on_signals(), registry)
    finally:
        collector.close()
    return 0


def cmd_metrics(settings: Settings, args: argparse.Namespace) -> int:
    from outbox.pacing.gauges import PaceCollector  # noqa: PLC0415
    from outbox.pacing.pacer import pacer_for  # noqa: PLC0415
    from outbox.telemetry.metrics_server import serve  # noqa: PLC0415

    port = args.port or int(os.environ.get("PORT") or settings.metrics_port)
    pacer = pacer_for(settings)  # pace figures only where a rate is configured
    serve(
        settings.database_url,
        host=settings.metrics_host,
        port=port,
        stop=_stop_on_signals(),
        extra=[PaceCollector(pacer)] if pacer else [],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
