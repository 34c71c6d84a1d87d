"""OUTBOX_SECRET and the secrets it replaced: strength and rotation (pure).

One secret signs (VERP return paths, unsubscribe tokens, keyed Message-IDs
and recipient tags); the previous ones, from ``OUTBOX_PREVIOUS_SECRETS``,
are still accepted when a token is verified, so a rotation does not break the
links and return paths already out in the world. Every one of them must look
like key material: a short or patterned value can be recovered from a single
signed token by guessing offline (``k3`` fell in 426 guesses).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

from outbox.errors import ConfigError

MIN_BYTES = 32
MIN_DISTINCT = 8  # a 32-byte value of fewer symbols is a pattern, not a key
MIN_ENTROPY_BITS = 88.0  # estimated from symbol frequencies; 32 random hex digits give ~115
_LONGEST_RUN = 7  # "aaaaaaa", "abcdefg", "7654321"


def weakness(value: str) -> str | None:
    """Why ``value`` is no usable secret, or None. Never includes the value."""
    size = len(value.encode("utf-8", "surrogatepass"))
    if size < MIN_BYTES:
        return f"is {size} bytes; use at least {MIN_BYTES} random bytes"
    if value != value.strip():
        return "starts or ends with whitespace (a quoting mistake?)"
    if len(set(value)) < MIN_DISTINCT:
        return f"uses fewer than {MIN_DISTINCT} different characters"
    if _estimated_bits(value) < MIN_ENTROPY_BITS:
        return "looks like a pattern, not random material"
    if _periodic(value):
        return "repeats a shorter value"
    if _longest_run(value) > _LONGEST_RUN:
        return "contains a long run of repeated or consecutive characters"
    return None


def check(name: str, value: str) -> None:
    """Raise a ConfigError naming ``name`` (never showing the value) if it is weak."""
    problem = weakness(value)
    if problem is not None:
        raise ConfigError(
            f"{name} {problem}; generate one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )


def previous(raw: str) -> tuple[str, ...]:
    """``OUTBOX_PREVIOUS_SECRETS``: comma-separated, oldest last; blanks dropped."""
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def _estimated_bits(value: str) -> float:
    counts = Counter(value)
    total = len(value)
    per_symbol = -sum(n / total * math.log2(n / total) for n in counts.values())
    return per_symbol * total


def _periodic(value: str) -> bool:
    # A string is a repetition of a shorter one exactly when it occurs in itself doubled.
    return (value + value).find(value, 1) != len(value)


def _longest_run(value: str) -> int:
    longest = run = 1
    step = 0
    for before, after in itertools.pairwise(value):
        delta = ord(after) - ord(before)
        if delta in (-1, 0, 1) and (run == 1 or delta == step):
            run += 1
        else:
            run = 2 if delta in (-1, 0, 1) else 1
        step = delta
        longest = max(longest, run)
    return longest
