"""Message-IDs derived from the idempotency key (pure).

The same key always yields the same Message-ID, so every attempt and every
re-enqueue of one business event carries one identity that relays and mail
clients de-duplicate on. The key is hashed, not embedded: keys often carry
order or user numbers that should not travel in a header.
"""

from __future__ import annotations

import hashlib


def message_id(idempotency_key: str, domain: str) -> str:
    """Return ``<digest@domain>`` for a key, as RFC 5322 section 3.6.4 writes it.

    The digest covers the domain too, so two deployments that share keys but
    not domains never share Message-IDs.
    """
    digest = hashlib.sha256(f"{domain}\x00{idempotency_key}".encode()).hexdigest()
    return f"<{digest[:32]}@{domain}>"
