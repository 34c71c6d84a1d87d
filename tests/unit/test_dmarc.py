"""DMARC records judged: discovery, policy, pct, rua, and the alignment of DKIM and Return-Path."""

from __future__ import annotations

import pytest

from outbox.domain_auth.dmarc import (
    Dmarc,
    aligned,
    judge_dmarc,
    lookup_names,
    organisational_domain,
    parse_dmarc,
)
from outbox.domain_auth.findings import Answer, Finding, State

GOOD = "v=DMARC1; p=reject; rua=mailto:d@shop.example"


@pytest.mark.parametrize(
    ("domain", "org"),
    [("shop.example.com", "example.com"), ("mail.shop.co.uk", "shop.co.uk"),
     ("example.com", "example.com"), ("a.b.c.example.org", "example.org"),
     ("news.shop.github.io", "shop.github.io"), ("Mail.Shop.Example.", "shop.example")],
)  # fmt: skip
def test_the_organisational_domain_follows_the_public_suffix_list(domain: str, org: str) -> None:
    assert organisational_domain(domain) == org


@pytest.mark.parametrize(
    ("a", "b", "mode", "result"),
    [("shop.example.com", "shop.example.com", "s", True),
     ("shop.example.com", "bounces.shop.example.com", "s", False),
     ("shop.example.com", "bounces.shop.example.com", "r", True),
     ("shop.example.com", "example.com", "r", True),
     ("shop.example.com", "example.net", "r", False),
     ("a.github.io", "b.github.io", "r", False)],
)  # fmt: skip
def test_alignment_strict_and_relaxed(a: str, b: str, mode: str, result: bool) -> None:
    assert aligned(a, b, mode) is result


def test_receivers_look_at_the_domain_then_its_organisational_domain() -> None:
    assert lookup_names("mail.shop.example.com") == [
        "_dmarc.mail.shop.example.com",
        "_dmarc.example.com",
    ]
    assert lookup_names("example.com") == ["_dmarc.example.com"]


def test_a_record_parses_with_its_defaults() -> None:
    assert parse_dmarc("v=DMARC1; p=quarantine", subdomain=False) == Dmarc(
        "quarantine", 100, "", "r", "r"
    )
    parsed = parse_dmarc(
        "v=DMARC1;p=reject;sp=none;pct=50;adkim=s;aspf=s;rua=mailto:x@y", subdomain=True
    )
    assert parsed == Dmarc("none", 50, "mailto:x@y", "s", "s")


@pytest.mark.parametrize(
    ("record", "said"),
    [("p=reject; v=DMARC1", "does not start with v=DMARC1"),
     ("v=DMARC1; p=block", "p=block is not none, quarantine or reject"),
     ("v=DMARC1", "p=(missing) is not none, quarantine or reject"),
     ("v=DMARC1; p=none; pct=all", "pct=all is not a number"),
     ("v=DMARC1; p=none; adkim=x", "adkim=x is not r or s")],
)  # fmt: skip
def test_records_receivers_ignore(record: str, said: str) -> None:
    assert parse_dmarc(record, subdomain=False) == said


def judge(
    *records: str,
    domain: str = "shop.example",
    at_org: tuple[str, ...] = (),
    dkim: str | None = "shop.example",
    return_path: str | None = "bounces.shop.example",
) -> Finding:
    names = lookup_names(domain)
    answers = [(names[0], Answer(records))] + [(n, Answer(at_org)) for n in names[1:]]
    return judge_dmarc(domain, answers, dkim_domain=dkim, return_path_domain=return_path)


def test_reject_with_reports_and_both_aligned_is_ok() -> None:
    found = judge(GOOD)
    assert found.state is State.OK
    assert found.found.startswith("_dmarc.shop.example: p=reject pct=100 adkim=r aspf=r")
    assert "DKIM d=shop.example aligns" in found.found


def test_no_record_anywhere_is_an_error_saying_what_to_publish() -> None:
    found = judge(domain="mail.shop.example.com")
    assert found.state is State.ERROR
    assert "no DMARC record at _dmarc.mail.shop.example.com or _dmarc.example.com" in found.found
    assert found.fix.startswith('publish TXT at _dmarc.mail.shop.example.com: "v=DMARC1; p=none;')


def test_the_organisational_record_applies_with_its_subdomain_policy() -> None:
    found = judge(
        domain="mail.shop.example.com",
        at_org=("v=DMARC1; p=reject; sp=quarantine; rua=mailto:d@example.com",),
        dkim="example.com",
        return_path="mail.shop.example.com",
    )
    assert found.state is State.OK
    assert found.found.startswith("_dmarc.example.com: p=quarantine")


def test_p_none_pct_and_missing_rua_are_warnings() -> None:
    found = judge("v=DMARC1; p=none")
    assert found.state is State.WARNING
    assert "p=none only monitors" in found.found
    assert "no rua" in found.found
    assert found.fix.startswith("at _dmarc.shop.example, move to p=quarantine")
    assert (
        judge("v=DMARC1; p=reject; pct=20; rua=mailto:d@x").fix == "at _dmarc.shop.example, pct=100"
    )


def test_two_records_and_a_broken_one_are_errors() -> None:
    assert "2 DMARC records" in judge(GOOD, GOOD).found
    broken = judge("v=DMARC1; p=maybe")
    assert broken.state is State.ERROR
    assert broken.fix == "correct the DMARC record at _dmarc.shop.example"


def test_a_failed_lookup_is_an_error() -> None:
    found = judge_dmarc(
        "shop.example",
        [("_dmarc.shop.example", Answer(failure="NoNameservers"))],
        dkim_domain=None,
        return_path_domain=None,
    )
    assert found.state is State.ERROR
    assert "DNS gave no answer for _dmarc.shop.example" in found.found


def test_neither_aligned_fails_dmarc_an_error() -> None:
    found = judge(GOOD, dkim="esp.example", return_path="bounces.esp.example")
    assert found.state is State.ERROR
    assert "DMARC fails" in found.found
    assert found.fix == "sign mail from shop.example with a key of shop.example"


def test_only_spf_aligned_is_a_warning_to_sign() -> None:
    found = judge(GOOD, dkim=None)
    assert found.state is State.WARNING
    assert "Outbox signs no DKIM for it" in found.found
    assert found.fix.startswith("sign mail from shop.example")


def test_only_dkim_aligned_is_a_warning_about_the_bounce_domain() -> None:
    relaxed = judge(GOOD, return_path="bounces.other.example")
    assert relaxed.state is State.WARNING
    assert relaxed.fix == "set OUTBOX_BOUNCE_DOMAIN to a subdomain of shop.example"
    strict = judge("v=DMARC1; p=reject; aspf=s; rua=mailto:d@x")
    assert strict.state is State.WARNING
    assert "Return-Path bounces.shop.example does not align (aspf=s)" in strict.found
    assert strict.fix == "set OUTBOX_BOUNCE_DOMAIN to shop.example"


def test_strict_dkim_alignment_needs_the_same_name() -> None:
    found = judge(
        "v=DMARC1; p=reject; adkim=s; rua=mailto:d@x",
        domain="news.shop.example",
        dkim="shop.example",
        return_path="x.other.example",
    )
    assert found.state is State.ERROR
    assert found.fix == "sign mail from news.shop.example with a key of news.shop.example"


def test_a_provider_that_signs_and_returns_is_not_judged_on_alignment() -> None:
    found = judge(GOOD, dkim=None, return_path=None)
    assert found.state is State.OK
    assert "the Return-Path is the provider's" in found.found
