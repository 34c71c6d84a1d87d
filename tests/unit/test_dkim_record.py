"""DKIM key records judged against the signing key: fingerprints, both shown on a mismatch."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from outbox.domain_auth.dkim_record import PublicKey, judge_dkim, published_key
from outbox.domain_auth.findings import Answer, Finding, State
from outbox.message.dkim import Signer, public_record

NAME = "s1._domainkey.shop.example"
RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_1024 = rsa.generate_private_key(public_exponent=65537, key_size=1024)
ED = ed25519.Ed25519PrivateKey.generate()
OURS = PublicKey.of(RSA.public_key())


def judge(*records: str, ours: PublicKey = OURS) -> Finding:
    return judge_dkim("shop.example", NAME, Answer(records), ours)


def test_the_record_outbox_prints_is_the_key_it_signs_with() -> None:
    for key in (RSA, ED):
        signer = Signer("s1", "shop.example", key)
        assert published_key(public_record(signer)) == PublicKey.of(key.public_key())


def test_the_published_signing_key_is_ok_with_its_fingerprint() -> None:
    found = judge(OURS.record())
    assert found.state is State.OK
    assert found.found == f"{NAME}: rsa key {OURS.fingerprint}"
    assert OURS.fingerprint.startswith("SHA256:")
    assert "=" not in OURS.fingerprint


def test_a_record_in_pkcs1_form_is_the_same_key() -> None:
    pkcs1 = RSA.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.PKCS1
    )
    assert judge(f"k=rsa; p={base64.b64encode(pkcs1).decode()}").state is State.OK


def test_spaces_inside_p_do_not_matter() -> None:
    key = base64.b64encode(OURS.data).decode()
    spaced = " ".join(key[i : i + 60] for i in range(0, len(key), 60))
    assert judge(f"v=DKIM1;  k = rsa ; p={spaced}").state is State.OK


def test_another_key_is_an_error_showing_both_fingerprints_and_the_record() -> None:
    other = PublicKey.of(ED.public_key())
    found = judge(other.record())
    assert found.state is State.ERROR
    assert other.fingerprint in found.found
    assert OURS.fingerprint in found.found
    assert found.fix == f'publish TXT at {NAME}: "{OURS.record()}"'


def test_an_ed25519_key_is_compared_raw() -> None:
    ours = PublicKey.of(ED.public_key())
    assert judge(ours.record(), ours=ours).state is State.OK
    assert judge(OURS.record(), ours=ours).state is State.ERROR


@pytest.mark.parametrize(
    ("record", "said"),
    [
        ("v=DKIM1; k=rsa; p=", "p= is empty: the key is revoked"),
        ("v=DKIM1; k=rsa; p=!!!", "p= is not base64"),
        ("v=DKIM1; k=rsa; p=AAAA", "p= is no RSA public key"),
        ("v=DKIM1; k=ed25519; p=AAAA", "p= is no Ed25519 key"),
        ("v=DKIM1; k=dsa; p=AAAA", "k=dsa is no key type receivers verify"),
        ("v=DKIM2; p=AAAA", "v=DKIM2 is not DKIM1"),
    ],
)
def test_a_record_without_a_usable_key_is_an_error(record: str, said: str) -> None:
    found = judge(record)
    assert found.state is State.ERROR
    assert said in found.found
    assert found.fix.startswith(f"publish TXT at {NAME}")


def test_an_ed25519_key_in_an_rsa_record_is_no_rsa_key() -> None:
    ed_spki = ED.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert published_key(f"p={base64.b64encode(ed_spki).decode()}") == "p= is no RSA public key"
    assert published_key("v=DKIM1; k=rsa") == "has no p= tag"


def test_no_record_and_two_records_are_errors() -> None:
    assert "no DKIM key at" in judge().found
    assert judge("some=thing").state is State.ERROR
    two = judge(OURS.record(), OURS.record())
    assert two.state is State.ERROR
    assert "2 DKIM records" in two.found


def test_an_unanswered_lookup_is_an_error() -> None:
    found = judge_dkim("shop.example", NAME, Answer(failure="Timeout"), OURS)
    assert found.state is State.ERROR
    assert "DNS gave no answer" in found.found


def test_a_1024_bit_key_that_matches_is_a_warning() -> None:
    ours = PublicKey.of(RSA_1024.public_key())
    found = judge(ours.record(), ours=ours)
    assert found.state is State.WARNING
    assert found.fix.startswith("sign with a 2048-bit key")
