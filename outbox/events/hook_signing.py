"""Standard Webhooks signing secrets: made, sealed for the database, used (pure).

A secret is ``whsec_`` and 32 random bytes in base64. It has to sign, so the
database keeps it sealed (Fernet) under a key derived from OUTBOX_SECRET, not
hashed; a copy of the table alone signs nothing. A secret sealed before an
OUTBOX_SECRET rotation still opens with OUTBOX_PREVIOUS_SECRETS.
"""

from __future__ import annotations

import base64
import datetime as dt
import secrets

from cryptography.fernet import Fernet, InvalidToken
from standardwebhooks.webhooks import Webhook

from outbox.errors import ConfigError
from outbox.token_signatures import keyed_digest

PURPOSE = "webhook-secret"
GRACE_SECONDS = 24 * 3600.0  # a rotated-out secret signs this long beside the new one


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def seal(secret: str, *, key: str) -> str:
    """``secret`` sealed under OUTBOX_SECRET ``key``."""
    if not key:
        raise ConfigError("webhook endpoints need OUTBOX_SECRET: it seals their signing secrets")
    return _fernet(key).encrypt(secret.encode("ascii")).decode("ascii")


def unseal(sealed: str, *, keys: tuple[str, ...]) -> str:
    """The secret ``sealed`` holds, opened with the first of ``keys`` that opens it."""
    for key in keys:
        if not key:
            continue
        try:
            return _fernet(key).decrypt(sealed.encode("ascii")).decode("ascii")
        except (InvalidToken, UnicodeError):
            continue
    raise ConfigError(
        "a webhook secret opens with neither OUTBOX_SECRET nor OUTBOX_PREVIOUS_SECRETS"
    )


def headers(
    message_id: str, body: bytes, secrets_: tuple[str, ...], *, now: dt.datetime
) -> dict[str, str]:
    """The Standard Webhooks headers of one request, signed by each secret (a
    receiver accepts any one of the space-separated signatures)."""
    signatures = " ".join(Webhook(s).sign(message_id, now, body) for s in secrets_)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signatures,
        "content-type": "application/json",
    }


def _fernet(key: str) -> Fernet:
    derived = bytes.fromhex(keyed_digest(key, PURPOSE, "fernet"))
    return Fernet(base64.urlsafe_b64encode(derived))
