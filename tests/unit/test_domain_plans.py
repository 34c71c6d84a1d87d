"""What each sending domain's mail carries, as the settings make it, and one run
of every check over answers given as a table."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from outbox.config import Settings
from outbox.domain_auth.checker import check_domain, is_private, plans
from outbox.domain_auth.dkim_record import PublicKey
from outbox.domain_auth.findings import CHECKS, Answer, State
from outbox.domain_auth.mta_sts import PolicyFetch
from outbox.relay.domain_recheck import DAY, DomainRecheck
from tests.keys import SECRET

KEY = ed25519.Ed25519PrivateKey.generate()


@pytest.fixture
def key_file(tmp_path: Path) -> str:
    path = tmp_path / "key.pem"
    path.write_bytes(
        KEY.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(path)


def test_every_sending_domain_is_planned_with_the_key_that_signs_it(key_file: str) -> None:
    settings = Settings(
        sender="A <a@shop.example>",
        sender_domains="shop.example,news.shop.example,other.example",
        dkim_keys=f"shop.example=s1:{key_file}",
        bounce_domain="bounces.shop.example",
        secret=SECRET,
    )
    shop, news, other = plans(settings)
    assert shop.selector_name == "s1._domainkey.shop.example"
    assert shop.public_key == PublicKey.of(KEY.public_key())
    assert news.selector_name == "s1._domainkey.shop.example"  # the parent's key signs it
    assert news.signing_domain == "shop.example"
    assert other.selector_name is None
    assert {p.return_path_domain for p in (shop, news, other)} == {"bounces.shop.example"}
    assert shop.expect_include is None  # SMTP: only --expect-include names one


def test_without_a_bounce_domain_the_from_domain_is_the_return_path() -> None:
    (plan,) = plans(Settings(sender="A <a@shop.example>"))
    assert plan.return_path_domain == "shop.example"
    assert plan.bounce_domain == "shop.example"


@pytest.mark.parametrize(
    ("transport", "include"),
    [("ses", "amazonses.com"), ("postmark", "spf.mtasv.net"), ("resend", "amazonses.com")],
)
def test_a_provider_names_its_spf_include_and_keeps_its_return_path(
    transport: str, include: str
) -> None:
    (plan,) = plans(Settings(sender="A <a@shop.example>", transport=transport))
    assert plan.expect_include == (include, False)
    assert plan.return_path_domain is None
    assert plan.bounce_domain is None
    (asked,) = plans(
        Settings(sender="A <a@shop.example>", transport=transport), expect_include="X.example"
    )
    assert asked.expect_include == ("x.example", True)


def test_named_domains_are_checked_once_in_their_ascii_form() -> None:
    named = plans(Settings(), ["Bücher.example", "xn--bcher-kva.example", "shop.example"])
    assert [p.domain for p in named] == ["xn--bcher-kva.example", "shop.example"]


class Table:
    """DNS answers and policies as a table: the checks' questions, answered."""

    def __init__(self, txt: dict[str, tuple[str, ...]], mx: dict[str, tuple[str, ...]]) -> None:
        self.txt_records, self.mx_records = txt, mx
        self.fetched: list[str] = []

    def txt(self, name: str) -> Answer:
        return Answer(self.txt_records.get(name, ()))

    def mx(self, name: str) -> Answer:
        return Answer(self.mx_records.get(name, ()))

    def policy(self, domain: str) -> PolicyFetch:
        self.fetched.append(domain)
        return PolicyFetch("version: STSv1\nmode: enforce\nmx: mx.shop.example\nmax_age: 604800\n")


def test_one_run_gives_every_check_in_order(key_file: str) -> None:
    settings = Settings(sender="A <a@shop.example>", dkim_keys=f"shop.example=s1:{key_file}")
    (plan,) = plans(settings)
    assert plan.public_key is not None
    table = Table(
        {
            "shop.example": ("v=spf1 mx -all",),
            "s1._domainkey.shop.example": (plan.public_key.record(),),
            "_dmarc.shop.example": ("v=DMARC1; p=quarantine; rua=mailto:r@shop.example",),
            "_mta-sts.shop.example": ("v=STSv1; id=1",),
            "_smtp._tls.shop.example": ("v=TLSRPTv1; rua=mailto:t@shop.example",),
        },
        {"shop.example": ("mx.shop.example",)},
    )
    found = check_domain(plan, table)
    assert [f.check for f in found] == list(CHECKS)
    assert [f.state for f in found] == [State.OK] * 6, found
    assert table.fetched == ["shop.example"]


def test_no_mta_sts_record_fetches_no_policy_and_unsigned_smtp_mail_is_an_error() -> None:
    (plan,) = plans(Settings(sender="A <a@shop.example>"))
    table = Table({}, {})
    found = {f.check: f for f in check_domain(plan, table)}
    assert table.fetched == []
    assert found["dkim"].state is State.ERROR
    assert found["dkim"].fix.startswith("set OUTBOX_DKIM_KEYS=shop.example=<selector>:")
    assert found["bounce_mx"].state is State.ERROR


def test_a_provider_that_signs_is_noted_not_judged() -> None:
    (plan,) = plans(Settings(sender="A <a@shop.example>", transport="postmark"))
    found = {f.check: f for f in check_domain(plan, Table({}, {}))}
    assert found["dkim"].state is State.OK
    assert found["dkim"].found == "postmark signs (not checked here)"
    assert found["bounce_mx"].found == "postmark receives the bounces"


def test_the_relay_leaves_names_no_public_dns_holds_alone() -> None:
    assert is_private("outbox.localhost")
    assert is_private("shop.test")
    assert not is_private("shop.example")
    # The default sender's domain: no DNS asked, nothing kept, checked again in a day.
    assert DomainRecheck(Settings(), threading.Event()).run_once() == DAY
