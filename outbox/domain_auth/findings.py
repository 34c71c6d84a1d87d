"""What one check of one domain found: ok, warning or error, and what to publish."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class State(enum.IntEnum):
    """Ordered: the worst of several is their maximum (the metric's value too)."""

    OK = 0
    WARNING = 1
    ERROR = 2

    @property
    def word(self) -> str:
        return self.name.lower()


# The checks, in the order they are shown.
CHECKS = ("spf", "dkim", "dmarc", "mta_sts", "tls_rpt", "bounce_mx")


@dataclass(frozen=True, slots=True)
class Finding:
    """One check of one domain.

    ``found`` says what DNS (or the policy) holds; ``fix`` is the one line
    saying what to publish or change, empty when nothing needs doing.
    """

    domain: str
    check: str
    state: State
    found: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "domain": self.domain,
            "check": self.check,
            "state": self.state.word,
            "found": self.found,
            "fix": self.fix,
        }


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong (or to improve) in a record, on the way to a finding."""

    state: State
    said: str
    fix: str


def judged(domain: str, check: str, found: str, problems: Iterable[Problem]) -> Finding:
    """The finding of a check: its worst problem decides the state and the fix.

    Every problem is said in ``found``; the fix shown is the worst one's, the
    first of them when several are as bad, so one line says what to do first.
    """
    listed = list(problems)
    if not listed:
        return Finding(domain, check, State.OK, found)
    worst = max(listed, key=lambda p: p.state)
    said = "; ".join(p.said for p in listed)
    return Finding(domain, check, worst.state, f"{found}: {said}" if found else said, worst.fix)


def finding_lines(findings: Iterable[Finding], *, only_fixes: bool = False) -> list[str]:
    """Each finding on a line, and under it the one line of what to publish."""
    lines = []
    for f in findings:
        if only_fixes and not f.fix:
            continue
        lines.append(f"  {f.state.word:<8} {f.check:<10} {f.found}")
        if f.fix:
            lines.append(f"  {'':<8} {'':<10} fix: {f.fix}")
    return lines


def worst(findings: Iterable[Finding]) -> State:
    return max((f.state for f in findings), default=State.OK)


def ok(said: str) -> Problem:
    """Not a problem: a note said with the finding (state ok)."""
    return Problem(State.OK, said, "")


def warning(said: str, fix: str) -> Problem:
    return Problem(State.WARNING, said, fix)


def error(said: str, fix: str) -> Problem:
    return Problem(State.ERROR, said, fix)


def tags(record: str) -> dict[str, str]:
    """``k=v; k=v`` tag lists (DKIM, DMARC, TLS-RPT, MTA-STS TXT): names lower case.

    A tag named twice keeps its first value; whitespace around names and
    values is not part of them (RFC 6376 section 3.2).
    """
    found: dict[str, str] = {}
    for part in record.split(";"):
        name, eq, value = part.partition("=")
        name = name.strip().lower()
        if eq and name and name not in found:
            found[name] = "".join(value.split()) if name == "p" else value.strip()
    return found


@dataclass(frozen=True, slots=True)
class Answer:
    """What DNS said for one name and type.

    ``records``: TXT strings (each record's strings joined), MX hosts by
    preference, or addresses; empty for NXDOMAIN or no record of the type.
    ``failure``: why DNS gave no answer at all (timeout, SERVFAIL), else empty.
    """

    records: tuple[str, ...] = ()
    failure: str = ""


def unanswered(name: str, answer: Answer) -> Problem:
    return error(
        f"DNS gave no answer for {name} ({answer.failure})",
        f"make {name} answer from the domain's name servers, then check again",
    )
