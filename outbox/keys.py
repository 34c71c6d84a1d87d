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
import re
from collections import Counter

from outbox.errors import ConfigError

MIN_BYTES = 32
MIN_DISTINCT = 8  # a 32-byte value of fewer symbols is a pattern, not a key
MIN_ENTROPY_BITS = 88.0  # estimated from symbol frequencies; 32 random hex digits give ~115
_LONGEST_RUN = 7  # "aaaaaaa", "abcdefg", "7654321"
# Words (lower, Capitalised or UPPER, whole: never cut out of a longer run of
# letters), numbers and the separators between them.
_WORDS = re.compile(
    r"(?:(?P<word>[A-Z]?[a-z]{2,14}(?![a-z])|[A-Z]{2,14}(?![A-Za-z]))|(?P<number>[0-9]+)"
    r"|[^A-Za-z0-9])+"
)
_WORD = re.compile(r"[A-Z]?[a-z]{2,14}(?![a-z])|[A-Z]{2,14}(?![A-Za-z])")
_NOT_HEX = re.compile(r"[g-zG-Z]")
_VOWEL = re.compile(r"[aeiouyAEIOUY]")
# What a person's choice of word is worth: a guesser tries a vocabulary of a
# thousand or so, the product's and the company's names first.
_BITS_PER_WORD = 10.0


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
    if _word_bits(value) < MIN_ENTROPY_BITS:
        return "is made of words and numbers a guesser tries first, not random material"
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


def _word_bits(value: str) -> float:
    """What ``value`` is worth read as words and numbers (infinite when it is not made of them).

    Its characters alone overrate it: ``shop-example-outbox-production-secret-2026``
    has 42 of them, and five words and a year.
    """
    if not _WORDS.fullmatch(value) or not _NOT_HEX.search(value):
        return math.inf  # hex digits alone are what a generator prints, not words
    found = _WORD.findall(value)
    if not all(_VOWEL.search(word) for word in found):
        return math.inf  # "Nws", "Hdjc": random letters, not words
    words = len(found)
    digits = sum(c.isdigit() for c in value)
    return words * _BITS_PER_WORD + digits * math.log2(10)


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
