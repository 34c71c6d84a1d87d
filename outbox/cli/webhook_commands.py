"""``outbox webhooks``: the endpoints events are posted to, and their deliverer."""

from __future__ import annotations

import argparse
import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any

from outbox.cli.database import connect
from outbox.cli.input import parse_since
from outbox.cli.output import Done, JsonResult, Printer, Refused, Result, Said
from outbox.cli.stop_signals import stop_on_signals
from outbox.config import Settings
from outbox.db.store import connections, webhook_rows
from outbox.events import hook_signing
from outbox.events.event_body import checked_types
from outbox.events.hook_delivery import Deliverer
from outbox.events.hook_target import check_url, shown_url
from outbox.telemetry import liveness


@dataclass(frozen=True, slots=True)
class Endpoints(JsonResult):
    """``webhooks list``: every endpoint, its state and why, its figures."""

    endpoints: list[webhook_rows.Endpoint]

    def text(self) -> str:
        if not self.endpoints:
            return "no webhook endpoints (outbox webhooks create URL)"
        return "\n".join(_line(e) for e in self.endpoints)

    def json(self) -> Any:
        return [{**asdict(e), "url": shown_url(e.url)} for e in self.endpoints]


def _line(e: webhook_rows.Endpoint) -> str:
    types = ",".join(e.event_types) if e.event_types else "every event"
    state = e.state + (f" ({e.state_reason})" if e.state_reason else "")
    lag = f", oldest waiting {e.lag_seconds:.0f}s" if e.lag_seconds is not None else ""
    extras = " addresses" if e.addresses else ""
    extras += " two-secrets" if e.two_secrets else ""
    return (
        f"{e.id}  {shown_url(e.url)}  {state}  {types}{extras}  delivered {e.delivered},"
        f" failed attempts {e.failed}, waiting {e.waiting}{lag}"
    )


def webhooks(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    if args.action == "deliver":
        deliverer = Deliverer(settings)
        reporter = liveness.Reporter(
            settings, "webhooks", deliverer.stalled, stale_after=liveness.STALE_AFTER
        ).start()
        try:
            deliverer.run(stop_on_signals())
        finally:
            reporter.stop()
        return Done()
    if args.action in ("create",) and not args.target:
        return Refused("outbox webhooks create needs a URL", code=2)
    if args.action not in ("create", "list") and not (args.target or "").isdigit():
        return Refused(f"outbox webhooks {args.action} needs an endpoint ID", code=2)
    with connect(settings) as conn:
        result = _act(conn, settings, args, out)
        connections.commit(conn)
    return result


def _act(
    conn: connections.Conn, settings: Settings, args: argparse.Namespace, out: Printer
) -> Result:
    if args.action == "create":
        return _create(conn, settings, args, out)
    if args.action == "list":
        return Endpoints(webhook_rows.list_endpoints(conn))
    endpoint = int(args.target)
    missing = Said(f"no webhook endpoint {endpoint}", 1)
    if args.action in ("disable", "enable"):
        state = "disabled" if args.action == "disable" else "enabled"
        why = "disabled from the command line" if state == "disabled" else None
        return Said(state) if webhook_rows.set_state(conn, endpoint, state, why) else missing
    if args.action == "rotate-secret":
        secret = hook_signing.new_secret()
        sealed = hook_signing.seal(secret, key=settings.secret)
        grace = hook_signing.GRACE_SECONDS
        if not webhook_rows.rotate_secret(conn, endpoint, sealed=sealed, grace_seconds=grace):
            return missing
        out.note(
            f"endpoint {endpoint}'s new signing secret (the old one signs too for"
            f" {grace / 3600:g} hours): store it now, it is not shown again"
        )
        return Said(secret)
    if not args.since:
        return Refused("outbox webhooks replay needs --since TIME (2h, 7d, ISO)", code=2)
    since = parse_since(args.since, dt.datetime.now(dt.UTC))
    count = webhook_rows.replay(conn, endpoint, since=since)
    if count is None:
        return Said(f"no webhook endpoint {endpoint} that is not disabled", 1)
    return Said(f"{count} events to deliver again to endpoint {endpoint}")


def _create(
    conn: connections.Conn, settings: Settings, args: argparse.Namespace, out: Printer
) -> Result:
    try:
        url = check_url(args.target)
        types = checked_types(args.events)
    except ValueError as exc:
        return Refused(str(exc), code=2)
    secret = hook_signing.new_secret()
    sealed = hook_signing.seal(secret, key=settings.secret)
    endpoint = webhook_rows.create_endpoint(
        conn, url=url, types=types, addresses=args.addresses, sealed=sealed
    )
    out.note(
        f"webhook endpoint {endpoint} and its signing secret: store the secret now,"
        " it is not shown again"
    )
    return Said(f"{endpoint} {secret}")
