"""``outbox bounces serve|ingest|reprocess``: bounces received, stored and applied.

``outbox bounces classify`` only parses: it is :mod:`outbox.cli.bounce_classify_command`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from outbox.bounce_receiving import ingest as feedback
from outbox.bounce_receiving.parse_worker import ParseWorker
from outbox.bounce_receiving.smtp_server import serve
from outbox.cli.database import connect
from outbox.cli.output import Done, JsonLines, JsonResult, Printer, Redaction, Result, encode
from outbox.cli.stop_signals import stop_on_signals
from outbox.config import Settings
from outbox.db.store import bounce_reports
from outbox.redact import recipient_tag
from outbox.telemetry import liveness
from outbox.telemetry.setup import setup_tracing


@dataclass(frozen=True, slots=True)
class Ingested(JsonResult):
    """What each message file did: one JSON object a line, the one form an MTA's pipe logs."""

    reports: list[dict[str, Any]]

    def json(self) -> Any:
        return JsonLines(self.reports)

    def text(self) -> str:
        return encode(self.json())

    def redaction(self) -> Redaction:
        # The results name the bounced recipients: tagged, like every other output.
        return Redaction.ADDRESSES


@dataclass(frozen=True, slots=True)
class Reprocessed(JsonResult):
    processed: int  # stored bounces not processed before
    unprocessable: int  # set aside, in all: processing failed or overran its deadline

    def json(self) -> Any:
        return {"processed": self.processed, "unprocessable": self.unprocessable}

    def text(self) -> str:
        return (
            f"processed {self.processed} bounces\n"
            f"{self.unprocessable} stored bounces set aside as unprocessable "
            "(email_bounce.error says why)"
        )


def bounces(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    setup_tracing("outbox-bounces")  # each bounce joins its email's trace
    if args.action == "serve":
        if settings.bounce_domain:
            serve(settings, stop_on_signals())
        else:
            _idle(settings)
        return Done()
    # Parsed in a child process within a deadline, as the bounce server does.
    with connect(settings) as conn, ParseWorker() as parser:
        if args.action == "reprocess":
            processed = feedback.process_pending(conn, settings, parser.parse)
            return Reprocessed(processed, bounce_reports.count_unprocessable_bounces(conn))
        reports = []
        for path in args.files or ["-"]:
            raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
            done = feedback.ingest(conn, raw, settings, envelope_to=args.to, parse=parser.parse)
            reports.append(_report(done, settings))
    return Ingested(reports)


def _report(done: feedback.Processed, settings: Settings) -> dict[str, Any]:
    return {
        "bounce_id": done.bounce_id,
        "link": done.link.via,
        "outbox_id": done.link.outbox_id,
        "forged": done.link.forged,
        "results": [r.to_json() for r in done.results],
        "suppressed": [recipient_tag(a, secret=settings.secret) for a in done.suppressed],
        "unprocessable": done.unprocessable is not None,
    }


def _idle(settings: Settings) -> None:
    """No bounce domain: nothing to receive. The process stays up, so that a Procfile
    started as a whole (honcho, foreman) keeps its other processes running."""
    print(
        "outbox bounces: OUTBOX_BOUNCE_DOMAIN is not set, so no bounces are received:"
        " idle until stopped (set it to receive bounces, or run a provider's webhooks)",
        file=sys.stderr,
        flush=True,
    )
    stop = stop_on_signals()
    reporter = liveness.Reporter(
        settings, "bounces", lambda: None, stale_after=liveness.STALE_AFTER
    ).start()
    try:
        stop.wait()
    finally:
        reporter.stop()
