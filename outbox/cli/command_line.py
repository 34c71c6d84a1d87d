"""The ``outbox`` command: its parser, and :func:`main`, which runs the command chosen."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from outbox import redact
from outbox.cli.output import Printer, Result
from outbox.config import Settings, default_settings
from outbox.errors import OutboxError, first_line
from outbox.preflight import common_problems, settings_or_exit

# What runs a command: its settings, its arguments, the printer of its notes.
Command = Callable[[Settings, argparse.Namespace, Printer], Result]

# `outbox bounces classify` only parses: a module of its own, which loads no database driver.
BOUNCES = {
    "classify": "bounce_classify_command:classify",
    **dict.fromkeys(("serve", "ingest", "reprocess"), "bounce_commands:bounces"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    logging.basicConfig(
        level=os.environ.get("OUTBOX_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # pika narrates every connection at INFO (a dozen lines per `outbox status`).
    logging.getLogger("pika").setLevel(logging.WARNING)
    process = getattr(args, "process", None)
    if args.command == "bounces" and args.action == "serve":
        process = "bounces"
    if args.command == "webhooks" and args.action == "deliver":
        process = "webhooks"
    if process:
        settings_or_exit(process)  # a long-running process checks everything it needs first
    try:
        settings = default_settings()
    except OutboxError as exc:
        print(f"outbox: {exc}", file=sys.stderr)  # ConfigError never shows a secret value
        return 2
    redact.install(settings)  # no secret, no address in clear in any log line
    redactor = redact.Redactor.from_settings(settings)
    if args.command != "config":  # `outbox config check` lists them instead
        for line in common_problems(settings):
            print(f"outbox: {line}", file=sys.stderr)  # names the variable, never its value
            return 2
    out = Printer(as_json=getattr(args, "json", False), redactor=redactor)
    try:
        return out.show(_command(args)(settings, args, out))
    except OutboxError as exc:
        print(f"outbox: {redactor.text(first_line(exc))}", file=sys.stderr)
        return 2


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    found = parser()
    args, extra = found.parse_known_args(argv)
    # argparse fills a "*" positional before it reads the options after it, so
    # `bounces ingest --to RCPT -` would leave "-" over: it is one of the files.
    if extra and hasattr(args, "files") and not any(e.startswith("--") for e in extra):
        args.files = [*args.files, *extra]
    elif extra:
        found.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _command(args: argparse.Namespace) -> Command:
    """The function that runs the command ``args`` name.

    Its module is imported now, for this command alone: most commands load the
    database driver, a server or the template compiler (a second or more), which
    `outbox config`, `outbox bounces classify` and `outbox --help` do without.
    """
    runs = args.runs if isinstance(args.runs, str) else args.runs[args.action]
    module, name = runs.split(":")
    command: Command = getattr(importlib.import_module(f"outbox.cli.{module}"), name)
    return command


def _version() -> str:
    try:
        return version("outbox-email")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def parser() -> argparse.ArgumentParser:  # noqa: PLR0915 (one statement per command)
    found = argparse.ArgumentParser(prog="outbox", description="The ``outbox`` command.")
    found.add_argument("--version", action="version", version=f"outbox {_version()}")
    commands = found.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, runs: str | dict[str, str], help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(command=name, runs=runs)
        return sub

    migrate = command(
        "migrate",
        "maintenance_commands:migrate",
        "create or update the schema (safe while workers run)",
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
    config = command(
        "config", "config_command:config", "the effective settings; `check`: every problem"
    )
    config.add_argument("action", nargs="?", choices=["show", "check"], default="show")
    config.add_argument(
        "--process",
        dest="only",
        action="append",
        choices=["app", "relay", "worker", "web", "bounces", "metrics", "webhooks"],
        help="check: only these processes (default: all)",
    )
    config.add_argument("--json", action="store_true", help="show: machine-readable output")
    relay = command(
        "relay", "relay_command:relay", "publish due rows to the broker and sweep stuck ones"
    )
    relay.set_defaults(process="relay")
    relay.add_argument(
        "--priority",
        action="append",
        choices=["high", "bulk"],
        help="only these priorities (default both); a high-only relay keeps codes fast",
    )
    sweep = command(
        "sweep", "maintenance_commands:sweep", "return rows stuck in queued or sending, once"
    )
    sweep.add_argument("--json", action="store_true", help="machine-readable output")
    sweep.add_argument(
        "--force",
        action="store_true",
        help="sweep sending rows even when Postgres or every process was just silent",
    )
    status = command(
        "status", "status_command:status", "rows per status and priority, oldest unsent age"
    )
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--tag", help="count only the emails enqueued with this tag")
    show = command("show", "email_commands:show", "one email with its attempts and status changes")
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
    requeue = command("requeue", "email_commands:requeue", "send failed, dead or held emails again")
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
    cancel = command("cancel", "email_commands:cancel", "call off an email no worker has taken yet")
    cancel.add_argument("key", metavar="KEY", help="the email's idempotency key")
    cancel.add_argument("--reason", help="why (recorded in its history); default: none")
    cancel.add_argument("--by", help="who (recorded); default: cli:<login name>")
    suppress = command("suppress", "address_commands:suppress", "manage the suppression list")
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
    purge = command(
        "purge",
        "maintenance_commands:purge",
        "delete finished emails past retention; keys stay taken",
    )
    purge.add_argument("--older-than", required=True, metavar="AGE", help="e.g. 30d, 12h")
    purge.add_argument("--dry-run", action="store_true", help="count them, delete nothing")
    purge.add_argument("--batch", type=int, default=5000, help=argparse.SUPPRESS)
    purge.add_argument("--json", action="store_true", help="machine-readable output")
    forget = command(
        "forget", "address_commands:forget", "erase an address from every table (erasure request)"
    )
    forget.add_argument(
        "address", metavar="ADDRESS", help="the address, or - to read it from stdin"
    )
    forget.add_argument("--json", action="store_true", help="machine-readable output")
    bounces = command("bounces", BOUNCES, "receive, ingest and classify bounces")
    bounces.add_argument("action", choices=["serve", "ingest", "classify", "reprocess"])
    bounces.add_argument("files", nargs="*", metavar="FILE", help="a message file, or - for stdin")
    bounces.add_argument(
        "--to", metavar="ADDRESS", help="ingest: the envelope recipient (an MTA's ${recipient})"
    )
    bounces.add_argument(
        "--reveal", action="store_true", help="classify: recipients in clear (support only)"
    )
    bounces.add_argument("--json", action="store_true", help="reprocess: machine-readable output")
    demo = command(
        "demo", "demo_command:demo", "send a login code and a newsletter through the pipeline"
    )
    demo.add_argument("--newsletter", type=int, default=1000, help="newsletter recipients")
    demo.add_argument("--timeout", type=float, default=180.0, help="seconds to wait")
    demo.add_argument(
        "--keep", action="store_true", help="keep the demo's schema to look at it afterwards"
    )
    templates = command(
        "templates", "template_commands:templates", "compile, check and preview the templates"
    )
    templates.add_argument("action", choices=["check", "preview"])
    templates.add_argument("name", nargs="?", help="preview: the template")
    templates.add_argument("--params", help="preview: params as JSON (default: the example)")
    templates.add_argument("--to", default="recipient@example.com", help="preview: recipient")
    templates.add_argument("--priority", choices=["high", "bulk"], help="preview: priority")
    templates.add_argument("--locale", help="preview: the language, e.g. de-AT (its folder)")
    templates.add_argument("--out", type=Path, default=Path(), help="preview: output folder")
    templates.add_argument("--json", action="store_true", help="check: machine-readable output")
    api_keys = command(
        "api-keys", "api_key_commands:api_keys", "keys of the HTTP API (`outbox web`, /v1/)"
    )
    api_keys.add_argument("action", choices=["create", "list", "revoke"])
    api_keys.add_argument("name", nargs="?", help="create, revoke: the key's name")
    api_keys.add_argument(
        "--scope",
        action="append",
        choices=["send", "read"],
        help="create: send (enqueue, look up with the recipient redacted; the default), "
        "read (look up with the recipient in clear); repeat for both",
    )
    api_keys.add_argument(
        "--owner",
        help="create: the service whose emails the key reaches (its keys share them; "
        "default: the key's name; `default`: the owner of in-process emails)",
    )
    api_keys.add_argument(
        "--operator",
        action="store_true",
        help="create: the key reads and cancels every owner's emails",
    )
    console = command(
        "console", "console_command:console", "the web console's users (see docs/console.md)"
    )
    console.add_argument("action", choices=["hash-password"])
    web = command(
        "web", "web_command:web", "the HTTP API, unsubscribe links, bounce webhooks and the console"
    )
    web.set_defaults(process="web")
    # PORT is the platform's (Heroku-like hosts), not an Outbox setting.
    web.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 8000))
    web.add_argument("--host", default="0.0.0.0", help="listen address")  # noqa: S104
    metrics = command(
        "metrics", "metrics_command:metrics", "the Prometheus exporter (outbox_* metrics)"
    )
    metrics.set_defaults(process="metrics")
    metrics.add_argument("--port", type=int, help="default: PORT, else OUTBOX_METRICS_PORT")
    worker = command(
        "worker",
        "worker_command:worker",
        "a send pool (high: login codes, bulk), or all: the relay and both pools",
    )
    worker.set_defaults(process="worker")
    worker.add_argument("pool", choices=["high", "bulk", "all"])
    worker.add_argument(
        "-p",
        "--processes",
        type=int,
        help="worker processes (default OUTBOX_HIGH_PROCESSES, 1; "
        "OUTBOX_BULK_PROCESSES, one per CPU)",
    )
    worker.add_argument(
        "-t",
        "--threads",
        type=int,
        help="threads per process (default OUTBOX_WORKER_THREADS, 8; all: "
        "OUTBOX_HIGH_THREADS and OUTBOX_BULK_THREADS, 2 each)",
    )
    health = command(
        "health", "health_command:health", "liveness (and with --ready, readiness) for probes"
    )
    health.add_argument(
        "--process",
        dest="names",
        action="append",
        required=True,
        metavar="NAME",
        help="relay, relay-high, relay-bulk, worker-high, worker-bulk, bounces, web, metrics,"
        " webhooks",
    )
    health.add_argument(
        "--ready", action="store_true", help="also Postgres and, if it uses one, the broker"
    )
    domain = command(
        "domain", {"check": "domain_commands:check"}, "SPF, DKIM, DMARC, MTA-STS of sending domains"
    )
    domain.add_argument("action", choices=["check"])
    domain.add_argument("domains", nargs="*", metavar="DOMAIN", help="default: every sending one")
    domain.add_argument("--nameserver", default="", metavar="HOST:PORT", help="the DNS to ask")
    domain.add_argument(
        "--expect-include", default="", metavar="DOMAIN", help="SPF must include this domain"
    )
    domain.add_argument("--json", action="store_true", help="machine-readable output")
    hooks = command(
        "webhooks", "webhook_commands:webhooks", "signed event webhooks (see docs/events.md)"
    )
    hooks.add_argument(
        "action",
        choices=["create", "list", "disable", "enable", "rotate-secret", "replay", "deliver"],
    )
    hooks.add_argument("target", nargs="?", metavar="URL|ID", help="create: URL; else: the ID")
    hooks.add_argument("--events", metavar="TYPE,…", help="create: only these event types")
    hooks.add_argument(
        "--addresses", action="store_true", help="create: `to` in clear, not the keyed tag"
    )
    hooks.add_argument("--since", metavar="TIME", help="replay: events since (2h, 7d, ISO)")
    hooks.add_argument("--json", action="store_true", help="list: machine-readable output")
    return found
