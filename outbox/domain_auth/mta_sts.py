"""MTA-STS (RFC 8461) and TLS-RPT (RFC 8460), judged.

MTA-STS tells senders to reach the domain's MX hosts over verified TLS: a
``_mta-sts`` TXT record with an ``id``, and a policy served over HTTPS at
``mta-sts.<domain>``, whose ``mx`` patterns must cover every MX host (in
``enforce`` mode, mail to a host it does not name is not delivered).
TLS-RPT names where senders report their TLS failures. The bounce domain's
MX is judged here too: like MTA-STS, it is about mail coming to the domain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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

MAX_MAX_AGE = 31_557_600  # RFC 8461 section 3.2: a year
ONE_DAY = 86_400
_ID = re.compile(r"[A-Za-z0-9]{1,32}")


@dataclass(frozen=True, slots=True)
class PolicyFetch:
    """The HTTPS fetch of a policy: its text, or why there is none."""

    text: str = ""
    failure: str = ""


@dataclass(frozen=True, slots=True)
class Policy:
    mode: str
    max_age: int
    mx: tuple[str, ...] = field(default_factory=tuple)


def policy_url(domain: str) -> str:
    return f"https://mta-sts.{domain}/.well-known/mta-sts.txt"


def parse_policy(text: str) -> Policy | str:
    """A policy file's values (RFC 8461 section 3.2), or what is wrong with it."""
    values: dict[str, list[str]] = {}
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.strip():
            continue
        key, colon, value = line.partition(":")
        if not colon:
            return f"line {line[:40]!r} is not key: value"
        values.setdefault(key.strip().lower(), []).append(value.strip())
    if values.get("version") != ["STSv1"]:
        return "has no version: STSv1"
    mode = (values.get("mode") or [""])[0]
    if mode not in {"enforce", "testing", "none"}:
        return f"mode {mode or '(missing)'} is not enforce, testing or none"
    raw_age = (values.get("max_age") or [""])[0]
    if not raw_age.isdigit() or int(raw_age) > MAX_MAX_AGE:
        return f"max_age {raw_age or '(missing)'} is not a number of seconds up to a year"
    patterns = tuple(p.lower().rstrip(".") for p in values.get("mx", []))
    if mode != "none" and not patterns:
        return "names no mx"
    return Policy(mode, int(raw_age), patterns)


def mx_matches(pattern: str, host: str) -> bool:
    """RFC 8461 section 4.1: exact, or ``*.`` standing for exactly one left-most label."""
    host = host.lower().rstrip(".")
    if pattern.startswith("*."):
        first, dot, rest = host.partition(".")
        return bool(first and dot) and rest == pattern[2:]
    return host == pattern


def judge_mta_sts(domain: str, txt: Answer, fetched: PolicyFetch | None, mx: Answer) -> Finding:
    """``fetched`` is None when the policy was not fetched (no TXT record to point to it)."""
    name = f"_mta-sts.{domain}"
    if txt.failure:
        return judged(domain, "mta_sts", "", [unanswered(name, txt)])
    records = [r for r in txt.records if r.replace(" ", "").startswith("v=STSv1")]
    hosts = mx.records
    if not records:
        if not hosts:
            return judged(domain, "mta_sts", "", [ok("no MX, so no inbound mail to protect")])
        return judged(domain, "mta_sts", "", [_missing(domain, name)])
    found_id = tags(records[0]).get("id", "")
    if len(records) > 1 or not _ID.fullmatch(found_id):
        said = f"{name} must be one record with an id of 1 to 32 letters and digits"
        return judged(
            domain, "mta_sts", "", [error(said, f'publish TXT at {name}: "v=STSv1; id=<date>"')]
        )
    url = policy_url(domain)
    serve = f"serve {url} (version: STSv1, mode, mx: per MX host, max_age) over valid HTTPS"
    if fetched is None or fetched.failure:
        why = fetched.failure if fetched else "not fetched"
        return judged(domain, "mta_sts", f"id={found_id}", [error(f"policy: {why}", serve)])
    policy = parse_policy(fetched.text)
    if isinstance(policy, str):
        return judged(domain, "mta_sts", f"id={found_id}", [error(f"the policy {policy}", serve)])
    said = f"id={found_id} mode={policy.mode} max_age={policy.max_age}"
    return judged(domain, "mta_sts", said, _policy_problems(domain, policy, hosts, url))


def _missing(domain: str, name: str) -> Problem:
    return warning(
        f"no MTA-STS record at {name}: mail to {domain} may be read or changed in transit",
        f'publish TXT at {name}: "v=STSv1; id=<date>" and a policy at {policy_url(domain)}',
    )


def _policy_problems(
    domain: str, policy: Policy, hosts: tuple[str, ...], url: str
) -> list[Problem]:
    problems: list[Problem] = []
    uncovered = [h for h in hosts if not any(mx_matches(p, h) for p in policy.mx)]
    if uncovered and policy.mode != "none":
        said = f"MX {', '.join(uncovered)} not named by the policy's mx"
        fix = f"add mx: {uncovered[0]} to {url} and change the TXT id"
        problems.append(error(said, fix) if policy.mode == "enforce" else warning(said, fix))
    if policy.mode == "testing":
        problems.append(
            warning(
                "mode testing: senders report but still deliver without TLS",
                f"mode: enforce at {url}",
            )
        )
    elif policy.mode == "none":
        problems.append(warning("mode none: the policy is withdrawn", f"mode: enforce at {url}"))
    if policy.max_age < ONE_DAY and policy.mode != "none":
        problems.append(
            warning(
                f"max_age {policy.max_age} s: senders re-fetch within a day",
                f"max_age: 604800 at {url}",
            )
        )
    return problems


def judge_tls_rpt(domain: str, answer: Answer) -> Finding:
    name = f"_smtp._tls.{domain}"
    publish = f'publish TXT at {name}: "v=TLSRPTv1; rua=mailto:<a mailbox you read>"'
    if answer.failure:
        return judged(domain, "tls_rpt", "", [unanswered(name, answer)])
    records = [r for r in answer.records if r.replace(" ", "").startswith("v=TLSRPTv1")]
    if not records:
        said = f"no TLS-RPT record at {name}: nobody hears of failed TLS to {domain}"
        return judged(domain, "tls_rpt", "", [warning(said, publish)])
    if len(records) > 1:
        return judged(
            domain, "tls_rpt", "", [error(f"{len(records)} TLS-RPT records at {name}", publish)]
        )
    rua = tags(records[0]).get("rua", "")
    targets = [t.strip() for t in rua.split(",") if t.strip()]
    if not targets or not all(t.startswith(("mailto:", "https:")) for t in targets):
        return judged(
            domain, "tls_rpt", "", [error(f"rua={rua!r} is no mailto: or https: URI", publish)]
        )
    return judged(domain, "tls_rpt", f"{name}: rua={rua}", [])


def judge_bounce_mx(domain: str, bounce_domain: str, answer: Answer) -> Finding:
    """Bounces come back to the Return-Path domain only through its MX."""
    if answer.failure:
        return judged(domain, "bounce_mx", "", [unanswered(bounce_domain, answer)])
    hosts = [h for h in answer.records if h != "."]
    if not hosts:
        said = (
            f"{bounce_domain} refuses mail (null MX)"
            if answer.records
            else f"{bounce_domain} has no MX"
        )
        fix = f"publish MX at {bounce_domain}: 10 <the host where `outbox bounces serve` listens>"
        return judged(domain, "bounce_mx", "", [error(f"{said}: bounces cannot come back", fix)])
    return judged(domain, "bounce_mx", f"{bounce_domain} MX {', '.join(hosts)}", [])
