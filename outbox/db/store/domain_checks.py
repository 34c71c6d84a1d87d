"""The last authentication check of each sending domain: written whole per
domain by each run, read by ``outbox status``, the console and the exporter."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors
from outbox.domain_auth.findings import Finding, State

queries = load_queries(__name__)


@dataclass(frozen=True, slots=True)
class StoredCheck:
    finding: Finding
    checked_at: dt.datetime
    seconds_ago: float


def save_domain_checks(conn: Conn, findings: Sequence[Finding]) -> None:
    """Replace the stored findings of every domain in ``findings``, in one transaction."""
    with translate_errors(), conn.transaction():
        for domain in dict.fromkeys(f.domain for f in findings):
            conn.execute(queries["forget_domain_checks"], {"domain": domain})
        for finding in findings:
            conn.execute(queries["save_domain_check"], finding.as_dict())


def last_domain_checks(conn: Conn) -> list[StoredCheck]:
    with translate_errors():
        rows = conn.execute(queries["last_domain_checks"]).fetchall()
    return [
        StoredCheck(Finding(r[0], r[1], State[str(r[2]).upper()], r[3], r[4]), r[5], float(r[6]))
        for r in rows
    ]
