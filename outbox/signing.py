"""Short HMAC signatures for tokens that travel in addresses and links (pure).

Each purpose ("verp", "unsubscribe", …) gets its own key derived from
OUTBOX_SECRET, so a token minted for one purpose never verifies for another.
Signatures are lowercase hex: some MTAs lowercase the local part of an address.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_LENGTH = 16  # hex characters: 64 bits


def sign(secret: str, purpose: str, payload: str) -> str:
    key = hmac.new(secret.encode(), purpose.encode(), hashlib.sha256).digest()
    return hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()[:SIGNATURE_LENGTH]


def verify(secret: str, purpose: str, payload: str, signature: str) -> bool:
    return hmac.compare_digest(sign(secret, purpose, payload), signature.lower())
