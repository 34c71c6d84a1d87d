"""DKIM signatures checked by dkimpy's verifier, the key served by a local dnsfunc."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from collections.abc import Callable
from functools import cache
from pathlib import Path

import dkim as dkimpy
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from dkim.canonicalization import CanonicalizationPolicy
from hypothesis import given
from hypothesis import strategies as st

from outbox import preflight
from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.message import list_unsubscribe as unsubscribe
from outbox.message.build import Attachment, Envelope, build_message
from outbox.message.dkim import Signer, public_record, relaxed_body

DATE = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


@cache
def rsa_pem() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def ed25519_pem() -> bytes:
    return ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def dns_for(signer: Signer) -> Callable[..., bytes]:
    """Answers only the signer's selector record: no lookup leaves the process."""
    expected = f"{signer.selector}._domainkey.{signer.domain}.".encode()
    record = public_record(signer).encode()

    def lookup(name: bytes, timeout: int = 5) -> bytes | None:
        return record if name == expected else None

    return lookup


def bulk_message() -> bytes:
    headers = unsubscribe.headers(
        42, base_url="https://mail.shop.example/unsubscribe", secret="k", mailto=None
    )
    envelope = Envelope(
        "Shop <no-reply@shop.example>",
        "alice@example.com",
        "Grüße: news",
        "<abc@shop.example>",
        DATE,
        headers,
    )
    return build_message(
        envelope,
        "Hello  Alice \n\n",
        "<p>Hello Alice</p>" * 200,
        [Attachment("a.pdf", "application/pdf", b"%PDF" * 500)],
    )


@pytest.mark.parametrize("pem", [rsa_pem, ed25519_pem], ids=["rsa-sha256", "ed25519-sha256"])
def test_signature_verifies(pem: Callable[[], bytes]) -> None:
    signer = Signer.from_pem("s2026", "shop.example", pem())
    signed = signer.sign(bulk_message())
    assert signed.startswith(b"DKIM-Signature: v=1; a=" + signer.algorithm + b"; c=relaxed/relaxed")
    assert dkimpy.verify(signed, dnsfunc=dns_for(signer))


def test_signed_headers_cover_what_receivers_check() -> None:
    signer = Signer.from_pem("s2026", "shop.example", rsa_pem())
    signed = signer.sign(bulk_message())
    tags = dkimpy.util.parse_tag_value(signed.split(b"\r\n\r\n")[0].split(b"DKIM-Signature:")[1])
    names = [n.strip() for n in b"".join(tags[b"h"].split()).split(b":")]
    for name in (
        b"from",
        b"to",
        b"subject",
        b"date",
        b"message-id",
        b"mime-version",
        b"content-type",
        b"list-unsubscribe",
        b"list-unsubscribe-post",
    ):
        assert name in names
    # Oversigned: one more entry than the message has, so none can be added.
    assert names.count(b"from") == 2
    assert names.count(b"list-unsubscribe") == 2
    first, *rest = signed.split(b"\r\n")
    folded = [first, *itertools.takewhile(lambda line: line.startswith(b" "), rest)]
    assert all(len(line) <= 78 for line in folded)  # the DKIM-Signature header's lines


@pytest.mark.parametrize(
    "tamper",
    [
        lambda m: m.replace(b"Subject:", b"Subject: Re:", 1),
        lambda m: m.replace(b"\r\n\r\n", b"\r\nFrom: evil@example.net\r\n\r\n", 1),
        lambda m: m.replace(
            b"\r\n\r\n", b"\r\nList-Unsubscribe: <https://evil.example>\r\n\r\n", 1
        ),
        lambda m: m.replace(b"Hello  Alice", b"Hello Mallory", 1),
    ],
    ids=["subject", "second-from", "added-list-unsubscribe", "body"],
)
def test_a_changed_message_does_not_verify(tamper: Callable[[bytes], bytes]) -> None:
    signer = Signer.from_pem("s2026", "shop.example", rsa_pem())
    signed = signer.sign(bulk_message())
    assert not dkimpy.verify(tamper(signed), dnsfunc=dns_for(signer))


def test_key_from_settings(tmp_path: Path) -> None:
    base = Settings(dkim_selector="s1", dkim_domain="shop.example")
    assert Signer.from_settings(Settings()) is None
    key_file = tmp_path / "dkim.pem"
    key_file.write_bytes(rsa_pem())
    from_path = Signer.from_settings(dataclasses.replace(base, dkim_private_key=str(key_file)))
    inline = rsa_pem().decode()
    from_pem = Signer.from_settings(dataclasses.replace(base, dkim_private_key=inline))
    escaped = inline.replace("\n", "\\n")
    from_escaped = Signer.from_settings(dataclasses.replace(base, dkim_private_key=escaped))
    records = {public_record(s) for s in (from_path, from_pem, from_escaped) if s is not None}
    assert len(records) == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"dkim_selector": "s1"}, "needs"),
        ({"dkim_domain": "x", "dkim_selector": "s1", "dkim_private_key": "/no/such/key"}, "read"),
        ({"dkim_domain": "x", "dkim_selector": "s1", "dkim_private_key": "-----BEGIN x"}, "PEM"),
    ],
)
def test_bad_key_settings(changes: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Signer.from_settings(Settings(**changes))


@given(st.text(alphabet=" \tab=\n", max_size=200))
def test_fast_relaxed_body_matches_dkimpy(text: str) -> None:
    body = text.replace("\n", "\r\n").encode()
    policy = CanonicalizationPolicy.from_c_value(b"relaxed/relaxed")
    assert relaxed_body(body) == policy.canonicalize_body(body)


def _pem_body(key: str) -> str:
    return "".join(line for line in key.splitlines() if not line.startswith("-----"))


@pytest.mark.parametrize(
    "mangle",
    [
        _pem_body,  # the key body alone
        lambda pem: pem.replace("-----BEGIN", "BEGIN"),  # a mangled first line
        lambda pem: "x" + pem,  # something in front
        lambda pem: pem[: len(pem) // 2],  # cut off
        lambda pem: pem.replace("A", "!", 3),  # not base64 any more
    ],
)
def test_regression_a_misquoted_dkim_key_is_a_config_error_that_never_shows_it(
    mangle: object,
) -> None:
    """Finding 3: the error message carried the whole key into logs, rows and traces."""
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    value = mangle(pem)  # type: ignore[operator]
    env = {
        "OUTBOX_DKIM_SELECTOR": "s1",
        "OUTBOX_DKIM_DOMAIN": "shop.example",
        "OUTBOX_DKIM_PRIVATE_KEY": value,
    }
    # Every process and command checks it at start, before any message.
    (message,) = preflight.common_problems(Settings.from_env(env))
    assert "OUTBOX_DKIM_PRIVATE_KEY" in message
    body = _pem_body(pem)
    assert not any(body[i : i + 12] in message for i in range(0, len(body) - 12))


def test_a_quoted_pem_is_read() -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    settings = Settings.from_env(
        {
            "OUTBOX_DKIM_SELECTOR": "s1",
            "OUTBOX_DKIM_DOMAIN": "shop.example",
            "OUTBOX_DKIM_PRIVATE_KEY": '"' + pem.replace("\n", "\\n") + '"',
        }
    )
    assert Signer.from_settings(settings) is not None
