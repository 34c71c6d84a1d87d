"""One run of every check for each sending domain, from the settings that
decide what receivers will see: the DKIM key and selector that sign a
domain's mail, the Return-Path (bounce) domain, the transport."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from outbox.config import Settings
from outbox.domain_auth import dmarc, mta_sts
from outbox.domain_auth.dkim_record import PublicKey, judge_dkim
from outbox.domain_auth.findings import Answer, Finding, State, judged, ok
from outbox.domain_auth.mta_sts import PolicyFetch
from outbox.domain_auth.spf import judge_spf
from outbox.fields.senders import ascii_domain
from outbox.message.dkim import Signers

# Names no public DNS holds (RFC 6761, RFC 6762): a development setup's
# outbox.localhost is neither re-checked by the relay nor warned about at start.
PRIVATE_TLDS = frozenset({"localhost", "test", "invalid", "local"})

# The SPF domain each provider's documentation asks its senders to include.
TRANSPORT_SPF = {"ses": "amazonses.com", "postmark": "spf.mtasv.net", "resend": "amazonses.com"}


class Lookups(Protocol):
    def txt(self, name: str) -> Answer: ...
    def mx(self, name: str) -> Answer: ...
    def policy(self, domain: str) -> PolicyFetch: ...


@dataclass(frozen=True, slots=True)
class DomainPlan:
    """What one sending domain's mail carries, as the settings make it."""

    domain: str
    selector_name: str | None  # <selector>._domainkey.<signing domain>; None: Outbox signs none
    signing_domain: str | None
    public_key: PublicKey | None
    return_path_domain: str | None  # None: the provider's own
    bounce_domain: str | None  # where DSNs come back; None: the provider receives them
    expect_include: tuple[str, bool] | None  # (SPF domain, asked for explicitly)
    transport: str


def plans(
    settings: Settings, domains: Sequence[str] = (), *, expect_include: str = ""
) -> list[DomainPlan]:
    """The plan of each domain named, else of every sending domain configured."""
    signers = Signers.from_settings(settings)
    names = [ascii_domain(d) for d in (domains or settings.sender_domain_list())]
    own_return_path = settings.transport == "smtp"
    include = (
        (expect_include.lower(), True)
        if expect_include
        else (TRANSPORT_SPF[settings.transport], False)
        if settings.transport in TRANSPORT_SPF
        else None
    )
    found = []
    for domain in dict.fromkeys(names):
        signer = signers.for_domain(domain)
        bounce = settings.bounce_domain.lower() or (domain if own_return_path else "")
        found.append(
            DomainPlan(
                domain=domain,
                selector_name=f"{signer.selector}._domainkey.{signer.domain}" if signer else None,
                signing_domain=signer.domain if signer else None,
                public_key=PublicKey.of(signer.key.public_key()) if signer else None,
                return_path_domain=(bounce or None) if own_return_path else None,
                bounce_domain=bounce or None,
                expect_include=include,
                transport=settings.transport,
            )
        )
    return found


def check_domain(plan: DomainPlan, lookups: Lookups) -> list[Finding]:
    """Every finding for one domain, in :data:`~outbox.domain_auth.findings.CHECKS` order."""
    domain = plan.domain
    mx = lookups.mx(domain)
    sts_txt = lookups.txt(f"_mta-sts.{domain}")
    has_sts = any(r.replace(" ", "").startswith("v=STSv1") for r in sts_txt.records)
    return [
        judge_spf(domain, lookups.txt(domain), lookups.txt, expect=plan.expect_include),
        _dkim(plan, lookups),
        dmarc.judge_dmarc(
            domain,
            [(name, lookups.txt(name)) for name in dmarc.lookup_names(domain)],
            dkim_domain=plan.signing_domain,
            return_path_domain=plan.return_path_domain,
        ),
        mta_sts.judge_mta_sts(domain, sts_txt, lookups.policy(domain) if has_sts else None, mx),
        mta_sts.judge_tls_rpt(domain, lookups.txt(f"_smtp._tls.{domain}")),
        _bounce_mx(plan, lookups),
    ]


def _dkim(plan: DomainPlan, lookups: Lookups) -> Finding:
    if plan.selector_name is None or plan.public_key is None:
        if plan.transport != "smtp":
            return judged(
                plan.domain, "dkim", "", [ok(f"{plan.transport} signs (not checked here)")]
            )
        return Finding(
            plan.domain,
            "dkim",
            State.ERROR,
            "no DKIM key signs its mail",
            f"set OUTBOX_DKIM_KEYS={plan.domain}=<selector>:/path/key.pem, publish its record",
        )
    return judge_dkim(
        plan.domain, plan.selector_name, lookups.txt(plan.selector_name), plan.public_key
    )


def _bounce_mx(plan: DomainPlan, lookups: Lookups) -> Finding:
    if plan.bounce_domain is None:
        return judged(plan.domain, "bounce_mx", "", [ok(f"{plan.transport} receives the bounces")])
    return mta_sts.judge_bounce_mx(plan.domain, plan.bounce_domain, lookups.mx(plan.bounce_domain))


def check_all(plans_: Sequence[DomainPlan], lookups: Lookups) -> list[Finding]:
    return [finding for plan in plans_ for finding in check_domain(plan, lookups)]


def is_private(domain: str) -> bool:
    return domain.rpartition(".")[2] in PRIVATE_TLDS


def setting_warnings(settings: Settings) -> list[str]:
    """What the settings alone say receivers will hold against a sending domain.

    Said at a sending process's start, which goes on: DNS may be right for
    mail another system signs, and the relay checks DNS itself.
    """
    found = []
    for plan in plans(settings):
        domain = plan.domain
        if is_private(domain):
            continue
        if plan.signing_domain is None and plan.transport == "smtp":
            found.append(
                f"mail from {domain} is not signed with DKIM, which Gmail, Yahoo and Microsoft "
                "require: set OUTBOX_DKIM_KEYS"
            )
        elif plan.signing_domain and not dmarc.aligned(domain, plan.signing_domain, "r"):
            found.append(
                f"mail from {domain} is signed for {plan.signing_domain}, which does not align "
                f"with it: DMARC fails on DKIM; give {domain} a key in OUTBOX_DKIM_KEYS"
            )
        rp = plan.return_path_domain
        if rp and not dmarc.aligned(domain, rp, "r"):
            found.append(
                f"OUTBOX_BOUNCE_DOMAIN {rp} does not align with {domain}: DMARC rests on DKIM "
                "alone for its mail"
            )
    return found
