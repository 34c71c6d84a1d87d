"""Signatures and keyed digests: HMAC-SHA256 under a key derived per purpose."""

from __future__ import annotations

import hashlib
import hmac

from outbox.token_signatures import SIGNATURE_LENGTH, keyed_digest, sign, verify


def _reference(secret: str, purpose: str, payload: bytes) -> str:
    """The construction written out with the standard library's hmac objects."""
    key = hmac.new(secret.encode(), purpose.encode(), hashlib.sha256).digest()
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def test_a_keyed_digest_is_hmac_sha256_under_the_purposes_key() -> None:
    for secret, purpose, payload in [
        ("s3cret", "message-id", "example.com\x00order-42"),
        ("another", "message-id", ""),
        ("s3cret", "recipient", "ünïcode ✉"),
    ]:
        assert keyed_digest(secret, purpose, payload) == _reference(
            secret, purpose, payload.encode()
        )


def test_a_lone_surrogate_is_digested_not_refused() -> None:
    # A key decoded from bytes with surrogateescape still identifies its email.
    payload = "key-\udc80"
    expected = _reference("s", "p", payload.encode("utf-8", "surrogatepass"))
    assert keyed_digest("s", "p", payload) == expected


def test_the_purpose_and_the_secret_each_change_the_result() -> None:
    base = keyed_digest("s", "verp", "x")
    assert keyed_digest("s", "unsubscribe", "x") != base
    assert keyed_digest("t", "verp", "x") != base
    assert sign("s", "verp", "x") != sign("s", "unsubscribe", "x")


def test_a_signature_is_the_digests_first_hex_characters_and_verifies() -> None:
    signature = sign("s", "verp", "a@example.org")
    assert len(signature) == SIGNATURE_LENGTH
    assert signature == _reference("s", "verp", b"a@example.org")[:SIGNATURE_LENGTH]
    assert verify("s", "verp", "a@example.org", signature.upper())
    assert not verify("s", "verp", "b@example.org", signature)
    assert verify("new", "verp", "a@example.org", signature, previous=["s"])
    assert not verify("new", "verp", "a@example.org", signature)
