"""Short HMAC signatures for tokens that travel in addresses and links (pure).

Each purpose ("verp", "unsubscribe", …) gets its own key derived from
OUTBOX_SECRET, so a token minted for one purpose never verifies for another.
Signatures are lowercase hex: some MTAs lowercase the local part of an address.
The current secret signs; ``previous`` secrets (OUTBOX_PREVIOUS_SECRETS) still
verify, so rotating the secret does not break tokens already sent out.
"""

from __future__ import annotations

import functools
import hmac
from collections.abc import Sequence

SIGNATURE_LENGTH = 16  # hex characters: 64 bits


@functools.lru_cache(maxsize=64)
def _purpose_key(secret: str, purpose: str) -> bytes:
    """The purpose's own key: derived once per secret, not once per message."""
    return hmac.digest(secret.encode(), purpose.encode(), "sha256")


def sign(secret: str, purpose: str, payload: str) -> str:
    digest = hmac.digest(_purpose_key(secret, purpose), payload.encode(), "sha256")
    return digest.hex()[:SIGNATURE_LENGTH]


def verify(
    secret: str, purpose: str, payload: str, signature: str, previous: Sequence[str] = ()
) -> bool:
    given = signature.lower()
    # Every candidate is compared, so the time taken does not tell which one matched.
    matches = [
        hmac.compare_digest(sign(key, purpose, payload), given) for key in (secret, *previous)
    ]
    return any(matches)


def keyed_digest(secret: str, purpose: str, payload: str) -> str:
    """A full-length HMAC-SHA256 (hex) under the purpose's key: for identifiers, not tokens."""
    # One-shot HMAC (C, no hmac object per call): enqueue derives a Message-ID per email.
    payload_bytes = payload.encode("utf-8", "surrogatepass")
    return hmac.digest(_purpose_key(secret, purpose), payload_bytes, "sha256").hex()
