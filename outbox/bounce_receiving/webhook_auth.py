"""Is a webhook call really from the provider? (pure)

Postmark sends the HTTP basic-auth credentials configured with the webhook URL.
Resend signs every call the Svix way: ``svix-signature`` holds ``v1,<base64>``
HMAC-SHA256 signatures of ``"{svix-id}.{svix-timestamp}.{body}"`` under the
base64 key after ``whsec_``; a timestamp more than five minutes off is refused
so a captured call cannot be replayed later.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

SVIX_TOLERANCE_SECONDS = 300


def basic_auth_matches(header: str | None, expected: str) -> bool:
    """``header`` is the Authorization value; ``expected`` is ``user:password``."""
    if not header or not expected:
        return False
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        given = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    return hmac.compare_digest(given, expected.encode("utf-8"))


def scrape_authorized(header: str | None, expected: str) -> bool:
    """The Authorization of a /metrics scrape: basic ``user:password`` when ``expected``
    has a colon, else ``Bearer <expected>``. Nothing is authorized without ``expected``."""
    if not header or not expected:
        return False
    if ":" in expected:
        return basic_auth_matches(header, expected)
    scheme, _, token = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        token.strip().encode("utf-8"), expected.encode("utf-8")
    )


def svix_signature_valid(
    secret: str,
    *,
    msg_id: str | None,
    timestamp: str | None,
    signatures: str | None,
    body: bytes,
    now: float,
    tolerance: float = SVIX_TOLERANCE_SECONDS,
) -> bool:
    if not (secret and msg_id and timestamp and signatures):
        return False
    try:
        sent_at = int(timestamp)
        key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except (ValueError, binascii.Error):
        return False
    if abs(now - sent_at) > tolerance:
        return False
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    for item in signatures.split():
        version, _, value = item.partition(",")
        if version == "v1" and hmac.compare_digest(value.encode(), expected):
            return True
    return False
