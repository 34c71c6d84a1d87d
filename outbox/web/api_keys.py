"""API keys of the HTTP API: random tokens, kept as their SHA-256 (pure).

A token is ``obx_`` and 32 random bytes (43 URL-safe characters). Only its
SHA-256 is stored. A slow password hash (argon2, bcrypt) exists to make
guessing a *low-entropy* secret from its hash expensive; nobody can search the
2^256 possible tokens, so a plain SHA-256 is as safe here and lets each request
find its key by one indexed lookup, with no per-request hashing cost worth
measuring. The hash is looked up, never compared in Python, so there is no
comparison whose timing could leak.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable

PREFIX = "obx_"
SCOPES = ("send", "read")  # send: POST and GET (recipient redacted); read: GET in clear
_SHOWN = 8  # characters of the token kept to recognise it in `api-keys list`


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def shown_prefix(token: str) -> str:
    return token[: len(PREFIX) + _SHOWN]


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, if it is one of ours."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(PREFIX) or len(token) > 200:
        return None
    return token


def checked_scopes(scopes: Iterable[str]) -> list[str]:
    """The scopes in a fixed order, or ValueError naming the unknown one."""
    given = set(scopes)
    unknown = given - set(SCOPES)
    if unknown:
        raise ValueError(f"unknown scope {sorted(unknown)[0]!r}: use send or read")
    return [s for s in SCOPES if s in given] or ["send"]
