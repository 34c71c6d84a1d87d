"""The sending domains' authentication, checked again by the relay: at start,
then once a day (within the hour while a check finds an error, so a fix shows).

A thread of its own: DNS and the MTA-STS fetch take seconds and must not hold
up a claim. A run that cannot be made (Postgres away) is said once, until one
succeeds; a warning or an error is logged when first found and when fixed,
not at every run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from outbox.config import Settings
from outbox.db.store import connections, domain_checks
from outbox.domain_auth.checker import DomainPlan, check_all, is_private, plans
from outbox.domain_auth.dns_lookups import DnsLookups
from outbox.domain_auth.findings import Finding, State, worst
from outbox.errors import ConfigError, OutboxError
from outbox.telemetry.log_once import DownOnce

log = logging.getLogger(__name__)

DAY = 24 * 3600.0
HOUR = 3600.0
_RETRY = 600.0  # after a run that could not be saved


def configured_domains(settings: Settings) -> list[str]:
    """The sending domains whose checks are kept (others are only shown)."""
    return [p.domain for p in plans(settings)]


def check_domains(
    settings: Settings,
    domains: Sequence[str] = (),
    *,
    nameserver: str = "",
    expect_include: str = "",
) -> list[Finding]:
    """Every check of the domains named, else of every sending domain configured."""
    lookups = DnsLookups(nameserver or settings.dns_resolver)
    found: list[DomainPlan] = plans(settings, domains, expect_include=expect_include)
    return check_all(found, lookups)


def save_findings(settings: Settings, findings: Sequence[Finding]) -> int:
    """Keep the findings of the configured domains as their last check; how many were kept."""
    kept = [f for f in findings if f.domain in configured_domains(settings)]
    if kept:
        with connections.connect(settings.database_url, timeout=5) as conn:
            domain_checks.save_domain_checks(conn, kept)
    return len(kept)


class DomainRecheck(threading.Thread):
    def __init__(
        self, settings: Settings, stop: threading.Event, *, first_run: float = 0.0
    ) -> None:
        super().__init__(name="outbox-domain-check", daemon=True)
        self.settings = settings
        self.stop = stop
        self.first_run = first_run
        self.saving = DownOnce(log, "the domain check's store (Postgres)")
        self._said: dict[tuple[str, str], State] = {}  # the state last logged, per check

    def run(self) -> None:
        wait = self.first_run
        while not self.stop.wait(wait):
            wait = self.run_once()

    def run_once(self) -> float:
        """Check and save now; the seconds until the next run."""
        try:
            public = [d for d in configured_domains(self.settings) if not is_private(d)]
            findings = check_domains(self.settings, sorted(public)) if public else []
        except ConfigError as exc:  # checked at start; a key file that went away since
            log.warning("domain check: cannot run (%s)", exc)
            return DAY
        if not findings:
            return DAY
        self._log_changes(findings)
        try:
            save_findings(self.settings, findings)
        except OutboxError as exc:
            self.saving.failed(exc)
            return _RETRY
        self.saving.ok()
        return HOUR if worst(findings) is State.ERROR else DAY

    def _log_changes(self, findings: Sequence[Finding]) -> None:
        """A warning or an error is logged when first found, and once more when it is fixed."""
        for finding in findings:
            key = (finding.domain, finding.check)
            before = self._said.get(key, State.OK)
            self._said[key] = finding.state
            if finding.state is not State.OK and finding.state is not before:
                log.warning(
                    "domain check: %s %s %s: %s; fix: %s",
                    finding.domain,
                    finding.check,
                    finding.state.word,
                    finding.found,
                    finding.fix,
                )
            elif finding.state is State.OK and before is not State.OK:
                log.warning("domain check: %s %s is ok again", finding.domain, finding.check)
