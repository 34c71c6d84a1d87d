"""Message-IDs derived from the idempotency key (pure).

The same key always yields the same Message-ID, so every attempt and every
re-enqueue of one business event carries one identity that relays and mail
clients de-duplicate on. The key is hashed, not embedded: keys often carry
order or user numbers that should not travel in a header.

With OUTBOX_SECRET the hash is an HMAC: keys are guessable
(``order-1001-confirmation``), and an unkeyed hash would let anyone compute a
customer's Message-ID, or recover the order number behind one they saw.
Only new rows get keyed ids; a stored Message-ID is never recomputed. Either
way a Message-ID authorises nothing (:mod:`outbox.bounce_receiving.policy`).
"""

from __future__ import annotations

import hashlib

from outbox.token_signatures import keyed_digest

PURPOSE = "message-id"


def message_id(idempotency_key: str, domain: str, secret: str = "") -> str:
    """Return ``<digest@domain>`` for a key, as RFC 5322 section 3.6.4 writes it.

    The digest covers the domain too, so two deployments that share keys but
    not domains never share Message-IDs.
    """
    payload = f"{domain}\x00{idempotency_key}"
    if secret:
        digest = keyed_digest(secret, PURPOSE, payload)
    else:
        digest = hashlib.sha256(payload.encode()).hexdigest()
    return f"<{digest[:32]}@{domain}>"
