"""``outbox domain check``: what receivers find in DNS for each sending domain."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, ClassVar

from outbox.cli.output import JsonResult, Printer, Redaction, Result
from outbox.config import Settings
from outbox.domain_auth.findings import Finding, State, finding_lines, worst
from outbox.errors import OutboxError
from outbox.relay.domain_recheck import check_domains, save_findings


@dataclass(frozen=True, slots=True)
class DomainReport(JsonResult):
    """Each domain's findings; exit status 1 when any is an error."""

    findings: list[Finding]
    json_indent: ClassVar[int | None] = 2

    def by_domain(self) -> dict[str, list[Finding]]:
        grouped: dict[str, list[Finding]] = {}
        for finding in self.findings:
            grouped.setdefault(finding.domain, []).append(finding)
        return grouped

    def json(self) -> Any:
        return {
            "state": worst(self.findings).word,
            "domains": [
                {"domain": d, "state": worst(fs).word, "checks": [f.as_dict() for f in fs]}
                for d, fs in self.by_domain().items()
            ],
        }

    def text(self) -> str:
        lines = []
        for domain, found in self.by_domain().items():
            lines.append(f"{domain}: {worst(found).word}")
            lines += finding_lines(found)
        return "\n".join(lines)

    def exit_code(self) -> int:
        return 1 if worst(self.findings) is State.ERROR else 0

    def redaction(self) -> Redaction:
        return Redaction.ADDRESSES  # a record's rua= names a mailbox


def check(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    findings = check_domains(
        settings, args.domains, nameserver=args.nameserver, expect_include=args.expect_include
    )
    try:
        save_findings(settings, findings)
    except OutboxError as exc:
        out.note(f"outbox: the findings are not kept for `outbox status` ({exc})")
    return DomainReport(findings)
