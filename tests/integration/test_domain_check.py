"""``outbox domain check`` against an authoritative DNS server on loopback,
serving a domain set up right and one broken in every check, and HTTPS
servers of their MTA-STS policies with a private CA (SSL_CERT_FILE)."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from outbox.config import Settings
from outbox.db.store import domain_checks
from outbox.domain_auth.dkim_record import PublicKey
from outbox.domain_auth.dns_lookups import DnsLookups
from outbox.domain_auth.findings import Finding, State
from outbox.domain_auth.mta_sts import PolicyFetch
from outbox.relay.domain_recheck import HOUR, DomainRecheck, check_domains
from outbox.telemetry.metrics_server import OutboxCollector
from tests.integration.dns_server import ZoneServer
from tests.integration.policy_server import PolicyServer, ca_file
from tests.integration.test_cli import outbox
from tests.keys import SECRET

GOOD_POLICY = "version: STSv1\r\nmode: enforce\r\nmx: *.good.example\r\nmax_age: 604800\r\n"
BROKEN_POLICY = "version: STSv1\nmode: testing\nmx: mx.elsewhere.example\nmax_age: 3600\n"


def _txt(text: str) -> str:
    """A TXT value as master-file strings of at most 255 bytes (a DKIM key is longer)."""
    return " ".join(f'"{text[i : i + 255]}"' for i in range(0, len(text), 255))


def _zone(origin: str, records: str) -> str:
    return (
        f"$ORIGIN {origin}.\n$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\n{records}"
    )


@dataclasses.dataclass
class World:
    settings: Settings
    nameserver: str
    ca_file: str
    signing: PublicKey  # good.example's key
    broken_key: PublicKey  # the key broken.example signs with (not the one it publishes)
    published: PublicKey  # the key broken.example publishes


def _pem(key: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey, path: Path) -> str:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(path)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    where = tmp_path_factory.mktemp("domains")
    good_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    broken_key = ed25519.Ed25519PrivateKey.generate()
    stale_key = ed25519.Ed25519PrivateKey.generate()
    signing, broken_public, published = (
        PublicKey.of(k.public_key()) for k in (good_key, broken_key, stale_key)
    )
    ca = trustme.CA()
    good_sts = PolicyServer(ca, ["mta-sts.good.example"], GOOD_POLICY)
    # The certificate names another host: a sender cannot verify the policy.
    broken_sts = PolicyServer(ca, ["www.broken.example"], BROKEN_POLICY)
    good = _zone(
        "good.example",
        f"""
@ MX 10 mx1
@ MX 20 mx2
@ TXT "v=spf1 include:_spf.good.example mx -all"
_spf TXT "v=spf1 ip4:192.0.2.0/24 include:relay.example ~all"
s1._domainkey TXT {_txt(signing.record())}
_dmarc TXT "v=DMARC1; p=reject; rua=mailto:dmarc@good.example; adkim=r; aspf=r"
_mta-sts TXT "v=STSv1; id=20260101"
mta-sts A {good_sts.address}
_smtp._tls TXT "v=TLSRPTv1; rua=mailto:tls@good.example"
bounces MX 10 mx1
mx1 A 192.0.2.10
mx2 A 192.0.2.11
""",
    )
    relay = _zone("relay.example", '@ TXT "v=spf1 ip4:198.51.100.0/24 -all"\n')
    many = "".join(f'i{n} TXT "v=spf1 a mx -all"\n' for n in range(6))
    includes = " ".join(f"include:i{n}.broken.example" for n in range(6))
    broken = _zone(
        "broken.example",
        f"""
@ MX 10 mx1
@ TXT "v=spf1 {includes} ?all"
{many}
s2._domainkey TXT {_txt(published.record())}
_mta-sts TXT "v=STSv1; id=1"
mta-sts A {broken_sts.address}
_smtp._tls TXT "v=TLSRPTv1; rua=tls@broken.example"
mx1 A 192.0.2.20
""",
    )
    settings = Settings(
        sender="Shop <shop@good.example>",
        sender_domains="good.example,broken.example",
        dkim_keys=(
            f"good.example=s1:{_pem(good_key, where / 'good.pem')},"
            f"broken.example=s2:{_pem(broken_key, where / 'broken.pem')}"
        ),
        bounce_domain="bounces.good.example",
        secret=SECRET,
    )
    with ZoneServer(good, broken, relay) as dns, good_sts, broken_sts:
        yield World(settings, dns.address, ca_file(ca, where), signing, broken_public, published)


@pytest.fixture
def trusted(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv("SSL_CERT_FILE", world.ca_file)
    return world


def _by_check(findings: list[Finding], domain: str) -> dict[str, Finding]:
    return {f.check: f for f in findings if f.domain == domain}


def test_a_domain_set_up_right_passes_every_check(trusted: World) -> None:
    found = _by_check(
        check_domains(trusted.settings, ["good.example"], nameserver=trusted.nameserver),
        "good.example",
    )
    assert list(found) == ["spf", "dkim", "dmarc", "mta_sts", "tls_rpt", "bounce_mx"]
    assert {f.state for f in found.values()} == {State.OK}, found
    assert "(3 lookups)" in found["spf"].found  # include, mx, and the include's include
    assert trusted.signing.fingerprint in found["dkim"].found
    assert "p=reject" in found["dmarc"].found
    assert "aligns (adkim=r)" in found["dmarc"].found
    assert "Return-Path bounces.good.example aligns" in found["dmarc"].found
    assert "mode=enforce max_age=604800" in found["mta_sts"].found
    assert found["bounce_mx"].found == "bounces.good.example MX mx1.good.example"


def test_a_broken_domain_gets_an_error_or_warning_per_check_with_what_to_publish(
    trusted: World,
) -> None:
    found = _by_check(
        check_domains(trusted.settings, ["broken.example"], nameserver=trusted.nameserver),
        "broken.example",
    )
    spf, dkim, dmarc = found["spf"], found["dkim"], found["dmarc"]
    assert spf.state is State.ERROR
    assert "18 DNS-querying terms after expansion (limit 10)" in spf.found
    assert "ends in ?all" in spf.found
    assert dkim.state is State.ERROR
    # Both fingerprints, and the record to publish instead.
    assert trusted.published.fingerprint in dkim.found
    assert trusted.broken_key.fingerprint in dkim.found
    assert (
        dkim.fix == f'publish TXT at s2._domainkey.broken.example: "{trusted.broken_key.record()}"'
    )
    assert dmarc.state is State.ERROR
    assert "no DMARC record at _dmarc.broken.example" in dmarc.found
    assert dmarc.fix.startswith('publish TXT at _dmarc.broken.example: "v=DMARC1; p=none;')
    sts = found["mta_sts"]
    assert sts.state is State.ERROR
    assert "CERTIFICATE_VERIFY_FAILED" in sts.found or "certificate" in sts.found.lower()
    assert found["tls_rpt"].state is State.ERROR
    assert "rua='tls@broken.example' is no mailto: or https: URI" in found["tls_rpt"].found


def test_a_policy_host_the_ca_file_does_not_vouch_for_is_an_error(world: World) -> None:
    # No SSL_CERT_FILE: the private CA is unknown, the good policy cannot be trusted.
    found = _by_check(
        check_domains(world.settings, ["good.example"], nameserver=world.nameserver),
        "good.example",
    )
    assert found["mta_sts"].state is State.ERROR
    assert "policy: https://mta-sts.good.example/ failed" in found["mta_sts"].found


def test_the_command_exits_1_on_an_error_and_keeps_the_last_check(
    settings: Settings, trusted: World
) -> None:
    configured = dataclasses.replace(
        trusted.settings, database_url=settings.database_url, redis_url=settings.redis_url
    )
    env = {"SSL_CERT_FILE": trusted.ca_file}
    good = outbox(
        configured, "domain", "check", "good.example", "--nameserver", trusted.nameserver, env=env
    )
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("good.example: ok\n  ok       spf        ")
    both = outbox(
        configured, "domain", "check", "--nameserver", trusted.nameserver, "--json", env=env
    )
    assert both.returncode == 1, both.stderr
    report = json.loads(both.stdout)
    assert report["state"] == "error"
    assert [(d["domain"], d["state"]) for d in report["domains"]] == [
        ("good.example", "ok"),
        ("broken.example", "error"),
    ]
    # The DMARC record's mailbox is tagged, as every address in CLI output.
    assert "dmarc@good.example" not in both.stdout
    assert SECRET not in both.stdout
    status = outbox(configured, "status", "--json")
    shown = json.loads(status.stdout)["domains"]
    assert shown["broken.example"]["state"] == "error"
    assert shown["good.example"]["checks"]["dkim"]["state"] == "ok"
    text = outbox(configured, "status").stdout
    assert "domain broken.example: error" in text
    assert "error    dkim" in text


def test_the_command_keeps_only_configured_domains(settings: Settings, trusted: World) -> None:
    configured = dataclasses.replace(trusted.settings, database_url=settings.database_url)
    env = {"SSL_CERT_FILE": trusted.ca_file}
    outbox(
        configured, "domain", "check", "relay.example", "--nameserver", trusted.nameserver, env=env
    )
    with psycopg.connect(settings.database_url) as conn:
        assert domain_checks.last_domain_checks(conn) == []


def test_an_explicit_spf_include_must_be_there(trusted: World) -> None:
    found = _by_check(
        check_domains(
            trusted.settings,
            ["good.example"],
            nameserver=trusted.nameserver,
            expect_include="spf.mtasv.net",
        ),
        "good.example",
    )
    assert found["spf"].state is State.ERROR
    assert found["spf"].fix.startswith(
        "add include:spf.mtasv.net to the SPF record at good.example"
    )
    found = _by_check(
        check_domains(
            trusted.settings,
            ["good.example"],
            nameserver=trusted.nameserver,
            expect_include="relay.example",
        ),
        "good.example",
    )
    assert found["spf"].state is State.OK  # included by the include


def test_the_relay_rechecks_and_keeps_the_findings(
    settings: Settings, trusted: World, caplog: pytest.LogCaptureFixture
) -> None:
    configured = dataclasses.replace(
        trusted.settings, database_url=settings.database_url, dns_resolver=trusted.nameserver
    )
    recheck = DomainRecheck(configured, threading.Event())
    assert recheck.run_once() == HOUR  # broken.example has errors: again within the hour
    said = [r.getMessage() for r in caplog.records if r.name == "outbox.relay.domain_recheck"]
    assert len(said) == 5  # broken.example's five errors, each with its fix
    assert all(line.startswith("domain check: broken.example ") for line in said)
    caplog.clear()
    assert recheck.run_once() == HOUR
    assert not [r for r in caplog.records if r.name == "outbox.relay.domain_recheck"]  # said once
    with psycopg.connect(settings.database_url) as conn:
        kept = domain_checks.last_domain_checks(conn)
    assert {(c.finding.domain, c.finding.check) for c in kept} >= {
        ("good.example", "dkim"),
        ("broken.example", "spf"),
    }
    assert len(kept) == 12


def test_the_exporter_shows_the_last_check_per_domain_and_check(settings: Settings) -> None:
    findings = [
        Finding("shop.example", "spf", State.OK, "fine"),
        Finding("shop.example", "dkim", State.ERROR, "wrong key", "publish it"),
        Finding("shop.example", "dmarc", State.WARNING, "p=none", "quarantine"),
    ]
    with psycopg.connect(settings.database_url) as conn:
        domain_checks.save_domain_checks(conn, findings)
        domain_checks.save_domain_checks(conn, findings[:2])  # the next run replaces it whole
    collector = OutboxCollector(settings.database_url)
    try:
        got = {
            (s.labels["domain"], s.labels["check"]): s.value
            for family in collector.collect()
            if family.name == "outbox_domain_check"
            for s in family.samples
        }
    finally:
        collector.close()
    assert got == {("shop.example", "spf"): 0, ("shop.example", "dkim"): 2}


@pytest.mark.parametrize(
    ("status", "content_type", "said"),
    [
        (404, "text/plain", "HTTP 404 (it must be 200, no redirect)"),
        (301, "text/plain", "HTTP 301 (it must be 200, no redirect)"),
        (200, "text/html", "Content-Type text/html (it must be text/plain)"),
    ],
)
def test_a_policy_not_served_as_senders_fetch_it_is_not_read(
    status: int, content_type: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = trustme.CA()
    monkeypatch.setenv("SSL_CERT_FILE", ca_file(ca, tmp_path))
    server = PolicyServer(
        ca, ["mta-sts.odd.example"], GOOD_POLICY, status=status, content_type=content_type
    )
    zone = _zone("odd.example", f"mta-sts A {server.address}\n")
    with ZoneServer(zone) as dns, server:
        fetched = DnsLookups(dns.address, timeout=5).policy("odd.example")
    assert fetched == PolicyFetch(failure=said)


def test_a_policy_host_without_an_address_is_said_so() -> None:
    with ZoneServer(_zone("odd.example", "")) as dns:
        fetched = DnsLookups(dns.address, timeout=5).policy("odd.example")
    assert fetched.failure == "mta-sts.odd.example has no address (no A record)"
