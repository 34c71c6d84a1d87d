"""What is kept about an address: ``outbox suppress``, ``outbox forget``."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
from dataclasses import dataclass
from typing import Any

from outbox.cli.database import connect
from outbox.cli.input import erasure_pattern, suppression_reason
from outbox.cli.output import JsonResult, Printer, Refused, Result, Said, timestamp
from outbox.config import Settings
from outbox.db.store import connections, data_retention, suppressions
from outbox.redact import recipient_tag
from outbox.validate import normalize_address


@dataclass(frozen=True, slots=True)
class Suppressed:
    """A suppression as shown: its address tagged unless --reveal."""

    address: str
    scope: str
    reason: str
    since: dt.datetime

    @classmethod
    def of(cls, entry: suppressions.Suppression, settings: Settings, *, reveal: bool) -> Suppressed:
        shown = entry.address if reveal else recipient_tag(entry.address, secret=settings.secret)
        return cls(shown, entry.scope, entry.reason, entry.created_at)


@dataclass(frozen=True, slots=True)
class SuppressionCheck(JsonResult):
    """``suppress check``: exits 1 when the address is not suppressed."""

    found: Suppressed | None

    def json(self) -> Any:
        return None if self.found is None else dataclasses.asdict(self.found)

    def text(self) -> str:
        if self.found is None:
            return "not suppressed"
        f = self.found
        return f"suppressed ({f.scope}): {f.reason} since {timestamp(f.since)}"

    def exit_code(self) -> int:
        return 1 if self.found is None else 0


@dataclass(frozen=True, slots=True)
class Suppressions(JsonResult):
    """``suppress list``."""

    entries: list[Suppressed]

    def json(self) -> Any:
        return [dataclasses.asdict(e) for e in self.entries]

    def text(self) -> str:
        if not self.entries:
            return "no address is suppressed"
        return "\n".join(
            f"{e.since:%Y-%m-%d %H:%M}  {e.scope:<4}  {e.reason:<12}  {e.address}"
            for e in self.entries
        )


def suppress(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    if args.action != "list" and not args.address:
        return Refused(f"outbox suppress {args.action} needs an ADDRESS", code=2)
    if args.action == "add":
        address = normalize_address(args.address)
        reason = suppression_reason(args.reason)  # checked before anything is written
    with connect(settings) as conn:
        if args.action == "add":
            added = suppressions.suppress(conn, address, reason=reason, scope=args.scope)
            connections.commit(conn)
            return Said(f"suppressed ({args.scope})" if added else "already suppressed")
        if args.action == "remove":
            removed = suppressions.unsuppress(conn, args.address)
            connections.commit(conn)
            return Said("removed", 0) if removed else Said("not suppressed", 1)
        if args.action == "check":
            found = suppressions.find_suppression(conn, args.address)
            return SuppressionCheck(
                None if found is None else Suppressed.of(found, settings, reveal=False)
            )
        entries = suppressions.list_suppressions(conn)
    return Suppressions([Suppressed.of(e, settings, reveal=args.reveal) for e in entries])


@dataclass(frozen=True, slots=True)
class Forgotten(JsonResult):
    tag: str  # the address's tag: the address itself is what was erased
    forgotten: data_retention.Forgotten

    def json(self) -> Any:
        return {"address": self.tag, **dataclasses.asdict(self.forgotten)}

    def text(self) -> str:
        f = self.forgotten
        if not (f.emails or f.bounces or f.suppression_kept):
            return f"nothing held about {self.tag}"
        kept = "; still suppressed, by its keyed hash" if f.suppression_kept else ""
        return (
            f"erased {self.tag} from {f.emails} emails, {f.attempts} attempts,"
            f" {f.events} events and {f.bounces} bounce reports{kept}"
        )


def forget(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    # "-" reads it from stdin, so the address is not even in the shell history.
    address = sys.stdin.readline().strip() if args.address == "-" else args.address.strip()
    pattern = erasure_pattern(address)
    with connect(settings) as conn:
        forgotten = data_retention.forget(conn, address, pattern=pattern)
        connections.commit(conn)
    return Forgotten(recipient_tag(address, secret=settings.secret), forgotten)
