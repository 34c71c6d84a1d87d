"""DMARC records (RFC 7489), judged: found at the From domain or its
organisational domain, a policy, its pct and rua, and whether the DKIM
signing domain and the Return-Path domain align with the From domain.

Organisational domains come from the Public Suffix List as the
``publicsuffixlist`` package ships it (no download at run time).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from publicsuffixlist import PublicSuffixList

from outbox.domain_auth.findings import (
    Answer,
    Finding,
    Problem,
    error,
    judged,
    ok,
    tags,
    unanswered,
    warning,
)

POLICIES = ("none", "quarantine", "reject")


@cache
def _suffixes() -> PublicSuffixList:
    return PublicSuffixList()


def organisational_domain(domain: str) -> str:
    """The registered domain above ``domain`` (``mail.shop.co.uk`` -> ``shop.co.uk``)."""
    name = domain.lower().rstrip(".")
    return _suffixes().privatesuffix(name) or name


def aligned(from_domain: str, other: str, mode: str) -> bool:
    """RFC 7489 section 3.1: the same name (``s``), or the same organisational domain (``r``)."""
    a, b = from_domain.lower().rstrip("."), other.lower().rstrip(".")
    if mode == "s":
        return a == b
    return organisational_domain(a) == organisational_domain(b)


def lookup_names(domain: str) -> list[str]:
    """Where receivers look, in order: the From domain, then its organisational domain."""
    org = organisational_domain(domain)
    names = [f"_dmarc.{domain}"]
    return names if org == domain else [*names, f"_dmarc.{org}"]


@dataclass(frozen=True, slots=True)
class Dmarc:
    policy: str  # the one that applies to the From domain (sp= at an organisational record)
    pct: int
    rua: str
    adkim: str
    aspf: str


def parse_dmarc(record: str, *, subdomain: bool) -> Dmarc | str:
    """The record's values, or why receivers would ignore it."""
    if not record.replace(" ", "").upper().startswith("V=DMARC1"):
        return "does not start with v=DMARC1"
    found = {k: v.lower() if k != "rua" else v for k, v in tags(record).items()}
    policy = found.get("p", "")
    if policy not in POLICIES:
        return f"p={policy or '(missing)'} is not none, quarantine or reject"
    if subdomain and found.get("sp", policy) in POLICIES:
        policy = found.get("sp", policy)
    try:
        pct = int(found.get("pct", "100"))
    except ValueError:
        return f"pct={found['pct']} is not a number"
    for mode in ("adkim", "aspf"):
        if found.get(mode, "r") not in {"r", "s"}:
            return f"{mode}={found[mode]} is not r or s"
    return Dmarc(policy, pct, found.get("rua", ""), found.get("adkim", "r"), found.get("aspf", "r"))


def dmarc_record(answers: list[tuple[str, Answer]]) -> tuple[str, str] | Problem:
    """The (name, record) receivers use: the first name with one, as looked up in order."""
    for name, answer in answers:
        if answer.failure:
            return unanswered(name, answer)
        records = [r for r in answer.records if r.replace(" ", "").upper().startswith("V=DMARC1")]
        if len(records) > 1:
            return error(
                f"{len(records)} DMARC records at {name}: receivers apply none",
                f"keep one DMARC record at {name}",
            )
        if records:
            return name, records[0]
    first = answers[0][0]
    return error(
        f"no DMARC record at {' or '.join(n for n, _ in answers)}",
        f'publish TXT at {first}: "v=DMARC1; p=none; rua=mailto:<a mailbox you read>"',
    )


def judge_dmarc(
    domain: str,
    answers: list[tuple[str, Answer]],
    *,
    dkim_domain: str | None,
    return_path_domain: str | None,
) -> Finding:
    """The DMARC finding of From ``domain``; ``answers``: the :func:`lookup_names`' TXT.

    ``dkim_domain``: the d= Outbox signs with (None: Outbox does not sign);
    ``return_path_domain``: the envelope sender's domain (None: the provider's own).
    """
    found = dmarc_record(answers)
    if isinstance(found, Problem):
        return judged(domain, "dmarc", "", [found])
    name, record = found
    parsed = parse_dmarc(record, subdomain=name != f"_dmarc.{domain}")
    if isinstance(parsed, str):
        fix = f"correct the DMARC record at {name}"
        return judged(domain, "dmarc", "", [error(f"the record at {name} {parsed}", fix)])
    problems = _policy(name, parsed) + _alignment(domain, parsed, dkim_domain, return_path_domain)
    said = f"{name}: p={parsed.policy} pct={parsed.pct} adkim={parsed.adkim} aspf={parsed.aspf}"
    return judged(domain, "dmarc", said, problems)


def _policy(name: str, dmarc: Dmarc) -> list[Problem]:
    problems = []
    if dmarc.policy == "none":
        problems.append(
            warning(
                "p=none only monitors: forged mail is still delivered",
                f"at {name}, move to p=quarantine once the reports show only your own mail",
            )
        )
    if dmarc.pct < 100:
        problems.append(
            warning(
                f"pct={dmarc.pct} applies the policy to part of the mail", f"at {name}, pct=100"
            )
        )
    if not dmarc.rua:
        problems.append(
            warning(
                "no rua: nobody receives the aggregate reports",
                f"add rua=mailto:<a mailbox you read> to the record at {name}",
            )
        )
    return problems


def _alignment(
    domain: str, dmarc: Dmarc, dkim_domain: str | None, return_path_domain: str | None
) -> list[Problem]:
    org = organisational_domain(domain)
    dkim_ok = dkim_domain is not None and aligned(domain, dkim_domain, dmarc.adkim)
    spf_ok = return_path_domain is not None and aligned(domain, return_path_domain, dmarc.aspf)
    sign_fix = f"sign mail from {domain} with a key of {org if dmarc.adkim == 'r' else domain}"
    bounce_fix = (
        f"set OUTBOX_BOUNCE_DOMAIN to {domain if dmarc.aspf == 's' else 'a subdomain of ' + org}"
    )
    dkim_said = (
        "Outbox signs no DKIM for it"
        if dkim_domain is None
        else f"DKIM d={dkim_domain} {_verb(dkim_ok)} (adkim={dmarc.adkim})"
    )
    spf_said = (
        "the Return-Path is the provider's"
        if return_path_domain is None
        else f"Return-Path {return_path_domain} {_verb(spf_ok)} (aspf={dmarc.aspf})"
    )
    if dkim_domain is None and return_path_domain is None:
        return [ok(f"{dkim_said}; {spf_said}")]
    if not dkim_ok and not spf_ok:
        return [error(f"DMARC fails: {dkim_said}, {spf_said}", sign_fix)]
    if not dkim_ok:
        return [warning(f"{dkim_said}: DMARC rests on SPF, which forwarding breaks", sign_fix)]
    if not spf_ok and return_path_domain is not None:
        return [warning(f"{spf_said}: DMARC rests on DKIM alone", bounce_fix)]
    return [ok(f"{dkim_said}; {spf_said}")]


def _verb(aligns: bool) -> str:
    return "aligns" if aligns else "does not align"
