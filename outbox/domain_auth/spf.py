"""SPF records (RFC 7208), judged: one record, at most 10 DNS-querying terms
once every include and redirect is followed, ending in ``~all`` or ``-all``.

Pure: the records come from ``txt``, a function the caller gives (DNS in
production, a dict in tests).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from outbox.domain_auth.findings import (
    Answer,
    Finding,
    Problem,
    error,
    judged,
    ok,
    unanswered,
    warning,
)

MAX_LOOKUPS = 10  # RFC 7208 section 4.6.4
MAX_VOID_LOOKUPS = 2
# Counting goes on past the limit, to say by how much, up to here (a loop-proof bound).
_COUNT_UPTO = 50
_MECHANISMS = frozenset({"all", "include", "a", "mx", "ptr", "ip4", "ip6", "exists"})
_QUERYING = frozenset({"include", "a", "mx", "ptr", "exists"})
_TERM = re.compile(r"(?P<qualifier>[+\-~?]?)(?P<name>[a-z0-9][a-z0-9_.-]*)(?P<rest>[:/=].*)?", re.I)

Txt = Callable[[str], Answer]


@dataclass(frozen=True, slots=True)
class Term:
    qualifier: str  # + - ~ ?
    name: str  # lower case: a mechanism or a modifier's name
    value: str  # after ":" or "=", "" when none
    modifier: bool


class SpfSyntax(ValueError):
    """A term an SPF evaluator would refuse (permerror)."""


def is_spf(text: str) -> bool:
    return text.lower() == "v=spf1" or text.lower().startswith("v=spf1 ")


def parse_spf(record: str) -> list[Term]:
    """The terms of a ``v=spf1`` record; :class:`SpfSyntax` for one that is not SPF."""
    words = record.split()
    if not words or words[0].lower() != "v=spf1":
        raise SpfSyntax("does not start with v=spf1")
    terms = []
    for word in words[1:]:
        match = _TERM.fullmatch(word)
        if match is None:
            raise SpfSyntax(f"{word!r} is not a term")
        name, rest = match["name"].lower(), match["rest"] or ""
        modifier = rest.startswith("=")
        if modifier and match["qualifier"]:
            raise SpfSyntax(f"{word!r}: a modifier takes no qualifier")
        if not modifier and name not in _MECHANISMS:
            raise SpfSyntax(f"{word!r} is no SPF mechanism")
        value = rest[1:] if rest[:1] in {":", "="} else rest
        terms.append(Term(match["qualifier"] or "+", name, value, modifier))
    redirects = [t for t in terms if t.modifier and t.name == "redirect"]
    if len(redirects) > 1:
        raise SpfSyntax("redirect= appears twice")
    for term in terms:
        if term.name in {"include", "exists"} and not term.modifier and not term.value:
            raise SpfSyntax(f"{term.name} needs a domain")
    return terms


@dataclass
class Walk:
    """What following a record's includes and redirects found."""

    lookups: int = 0
    void: int = 0
    includes: list[str] = field(default_factory=list)  # every domain included, in order
    problems: list[Problem] = field(default_factory=list)
    final_all: str | None = None  # the qualifier of the top record's all (after redirects)
    ptr: bool = False
    macros: bool = False


def spf_record(name: str, answer: Answer) -> tuple[str | None, Problem | None]:
    """The one SPF record among ``name``'s TXT records, or why there is none to use."""
    if answer.failure:
        return None, unanswered(name, answer)
    records = [r for r in answer.records if is_spf(r.strip())]
    if not records:
        return None, error(
            f"no SPF record at {name}",
            f'publish TXT at {name}: "v=spf1 include:<your relay\'s SPF domain> ~all"',
        )
    if len(records) > 1:
        return None, error(
            f"{len(records)} SPF records at {name} (receivers treat that as permerror)",
            f"merge the SPF records at {name} into one",
        )
    return records[0].strip(), None


def walk(domain: str, record: str, txt: Txt) -> Walk:
    """Follow ``record`` of ``domain`` through its includes and redirect, counting lookups."""
    found = Walk()
    _follow(domain, record, txt, found, seen={domain.lower()}, top=True)
    return found


def _follow(domain: str, record: str, txt: Txt, found: Walk, *, seen: set[str], top: bool) -> None:
    try:
        terms = parse_spf(record)
    except SpfSyntax as exc:
        found.problems.append(
            error(f"the SPF record of {domain} {exc}", f"correct the SPF record at {domain}")
        )
        return
    redirect = _redirect(terms)
    for term in terms:
        if term.modifier and term is not redirect:
            continue  # exp= and unknown modifiers cost no lookup here
        _tally(term, found)
        if term.name == "include" and not term.modifier and "%" not in term.value:
            found.includes.append(term.value.lower().rstrip("."))
            _descend(term.value, txt, found, seen=seen, top=False)
        if term.name == "all" and top:
            found.final_all = term.qualifier
    if redirect is not None and "%" not in redirect.value:
        _descend(redirect.value, txt, found, seen=seen, top=top)


def _redirect(terms: list[Term]) -> Term | None:
    """RFC 7208 section 6.1: a redirect applies (and costs a lookup) only without an all."""
    if any(t.name == "all" and not t.modifier for t in terms):
        return None
    return next((t for t in terms if t.modifier and t.name == "redirect"), None)


def _tally(term: Term, found: Walk) -> None:
    if term.name in _QUERYING or term.modifier:
        found.lookups += 1
    found.ptr |= term.name == "ptr"
    found.macros |= "%" in term.value  # expands per message: cannot be followed here


def _descend(target: str, txt: Txt, found: Walk, *, seen: set[str], top: bool) -> None:
    name = target.lower().rstrip(".")
    if name in seen:
        found.problems.append(
            error(f"{name} includes itself (a loop)", f"remove the loop through {name}")
        )
        return
    if found.lookups > _COUNT_UPTO:
        return
    answer = txt(name)
    record, problem = spf_record(name, answer)
    if problem is not None and answer.failure:
        found.problems.append(problem)
        return
    if record is None:
        found.void += not answer.records
        found.problems.append(
            error(
                f"{name} (included or redirected to) has no usable SPF record",
                f"remove {name} from the SPF record or have it publish one",
            )
        )
        return
    _follow(name, record, txt, found, seen=seen | {name}, top=top)


def judge_spf(domain: str, answer: Answer, txt: Txt, *, expect: tuple[str, bool] | None) -> Finding:
    """The SPF finding of ``domain``; ``expect``: (an SPF domain to include, whether it
    was asked for explicitly, so that its absence is an error rather than a warning)."""
    record, problem = spf_record(domain, answer)
    if record is None:
        assert problem is not None
        return judged(domain, "spf", "", [problem])
    found = walk(domain, record, txt)
    problems = list(found.problems)
    problems += _ending(domain, found)
    if found.lookups > MAX_LOOKUPS:
        problems.append(
            error(
                f"{found.lookups} DNS-querying terms after expansion (limit {MAX_LOOKUPS})",
                "flatten includes you do not send through, or replace a/mx with ip4:/ip6:",
            )
        )
    if found.void > MAX_VOID_LOOKUPS:
        problems.append(
            error(
                f"{found.void} includes find nothing (limit {MAX_VOID_LOOKUPS})",
                "remove the includes whose domains publish no SPF",
            )
        )
    if found.ptr:
        problems.append(warning("uses ptr (slow, RFC 7208 says do not)", "replace ptr with ip4:"))
    if expect is not None:
        problems += _expected(domain, found, *expect)
    if found.macros:
        problems.append(ok("macros not followed"))
    return judged(domain, "spf", f'"{record}" ({found.lookups} lookups)', problems)


def _ending(domain: str, found: Walk) -> list[Problem]:
    if found.final_all in {"-", "~"}:
        return []
    if found.final_all == "+":
        return [
            error(
                "+all lets any host on the internet send as this domain",
                f"end the SPF record at {domain} with ~all or -all",
            )
        ]
    said = "ends in ?all" if found.final_all == "?" else "has no all"
    return [warning(f"{said} (neutral: forgeries pass)", f"end the SPF at {domain} with ~all")]


def _expected(domain: str, found: Walk, include: str, asked: bool) -> list[Problem]:
    if include.lower() in found.includes:
        return []
    said = f"does not include {include}"
    fix = f"add include:{include} to the SPF record at {domain}, before its all"
    return [error(said, fix) if asked else warning(f"{said} (the transport's SPF domain)", fix)]
