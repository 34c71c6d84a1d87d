"""DKIM key records (RFC 6376 section 3.6.1), judged against the key Outbox signs with.

A selector's ``p=`` must be the public half of the signing key: otherwise every
signature fails at the receiver. Keys are compared by fingerprint (SHA-256 of
the SubjectPublicKeyInfo for RSA, of the raw 32 bytes for Ed25519); a mismatch
shows both, and never anything of the private key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from outbox.domain_auth.findings import (
    Answer,
    Finding,
    Problem,
    error,
    judged,
    tags,
    unanswered,
    warning,
)


@dataclass(frozen=True, slots=True)
class PublicKey:
    """The public half of a signing key, as DNS carries it."""

    algorithm: str  # "rsa" | "ed25519" (the record's k=)
    data: bytes  # RSA: DER SubjectPublicKeyInfo; Ed25519: the raw key

    @classmethod
    def of(cls, key: rsa.RSAPublicKey | ed25519.Ed25519PublicKey) -> PublicKey:
        if isinstance(key, ed25519.Ed25519PublicKey):
            raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            return cls("ed25519", raw)
        der = key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return cls("rsa", der)

    @property
    def fingerprint(self) -> str:
        digest = base64.b64encode(hashlib.sha256(self.data).digest()).decode().rstrip("=")
        return f"SHA256:{digest}"

    def record(self) -> str:
        return f"v=DKIM1; k={self.algorithm}; p={base64.b64encode(self.data).decode()}"


def published_key(record: str) -> PublicKey | str:
    """The key a DKIM record publishes, or why it publishes none."""
    found = tags(record)
    if "v" in found and found["v"] != "DKIM1":
        return f"v={found['v']} is not DKIM1"
    algorithm = found.get("k", "rsa").lower()
    if algorithm not in {"rsa", "ed25519"}:
        return f"k={algorithm} is no key type receivers verify"
    if "p" not in found:
        return "has no p= tag"
    if not found["p"]:
        return "p= is empty: the key is revoked"
    try:
        data = base64.b64decode(found["p"], validate=True)
    except (binascii.Error, ValueError):
        return "p= is not base64"
    if algorithm == "ed25519":
        return PublicKey("ed25519", data) if len(data) == 32 else "p= is no Ed25519 key"
    try:
        # RFC 6376 names RSAPublicKey; SubjectPublicKeyInfo is what everyone publishes.
        key = serialization.load_der_public_key(data)
    except ValueError:
        return "p= is no RSA public key"
    if not isinstance(key, rsa.RSAPublicKey):
        return "p= is no RSA public key"
    return PublicKey.of(key)


def judge_dkim(domain: str, name: str, answer: Answer, ours: PublicKey) -> Finding:
    """The DKIM finding of the selector record ``name`` that signs ``domain``'s mail."""
    publish = f'publish TXT at {name}: "{ours.record()}"'
    if answer.failure:
        return judged(domain, "dkim", "", [unanswered(name, answer)])
    records = [r for r in answer.records if "p=" in r.replace(" ", "")]
    if not records:
        return judged(domain, "dkim", "", [error(f"no DKIM key at {name}", publish)])
    if len(records) > 1:
        said = f"{len(records)} DKIM records at {name}: receivers may pick either"
        return judged(domain, "dkim", "", [error(said, f"keep one record at {name}")])
    key = published_key(records[0])
    if isinstance(key, str):
        return judged(domain, "dkim", "", [error(f"the record at {name} {key}", publish)])
    problems: list[Problem] = []
    if key != ours:
        problems.append(
            error(
                f"the published key {key.fingerprint} is not the signing key {ours.fingerprint}",
                publish,
            )
        )
    elif _rsa_bits(key) < 2048:
        problems.append(
            warning("a 1024-bit RSA key", "sign with a 2048-bit key (and publish its record)")
        )
    said = (
        f"{name}: {key.algorithm} key"
        if problems
        else f"{name}: {key.algorithm} key {key.fingerprint}"
    )
    return judged(domain, "dkim", said, problems)


def _rsa_bits(key: PublicKey) -> int:
    """An RSA key's size; Ed25519 counts as strong (its 256 bits match RSA's 3072)."""
    if key.algorithm != "rsa":
        return 3072
    loaded = serialization.load_der_public_key(key.data)
    return loaded.key_size if isinstance(loaded, rsa.RSAPublicKey) else 0
