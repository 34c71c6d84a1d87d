"""Fast phrase matching: regexes guarded by a required literal.

Python's ``re`` tries every position for a pattern that starts with ``\\b`` or an
alternation, so a table of a hundred phrase patterns costs close to a millisecond
per short notice.  Each pattern here carries the literal text it cannot match
without ("quota", "user unknown", ...), found once at import; a plain substring test
on that literal skips the regex for the great majority of texts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# Long notices (HTML turned into text, pasted transcripts) say what matters early on.
MAX_TEXT = 16_000
_LITERAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789 '-,:<>/;=_@#!\"%&")
_ESCAPED_LITERALS = frozenset(".()[]?*+{}|\\$^")


@dataclass(frozen=True)
class Rule:
    """A lower-case regex and literals of which at least one must occur for a match."""

    pattern: re.Pattern[str]
    triggers: tuple[str, ...]

    def search(self, low: str) -> bool:
        return any(t in low for t in self.triggers) and self.pattern.search(low) is not None


@dataclass(frozen=True)
class Manual:
    """A pattern with hand-listed triggers, for branches with no fixed literal."""

    source: str
    triggers: tuple[str, ...]


@lru_cache(maxsize=64)
def prepare(text: str) -> str:
    """Lower-cased text with runs of white space (line breaks included) made one space."""
    return " ".join(text[:MAX_TEXT].lower().split())


def _skip_class(source: str, index: int) -> int:
    """Index just past the ``[...]`` character class starting at ``index``."""
    j = index + 1
    if j < len(source) and source[j] == "^":
        j += 1
    if j < len(source) and source[j] == "]":
        j += 1
    while j < len(source) and source[j] != "]":
        j += 2 if source[j] == "\\" else 1
    return j + 1


def split_alternatives(source: str) -> list[str]:
    """Split a regex source at its top-level ``|``."""
    out: list[str] = []
    current: list[str] = []
    depth = 0
    i = 0
    while i < len(source):
        char = source[i]
        if char == "\\":
            current.append(source[i : i + 2])
            i += 2
            continue
        if char == "[":
            end = _skip_class(source, i)
            current.append(source[i:end])
            i = end
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "|" and depth == 0:
            out.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    out.append("".join(current))
    return out


def required_literal(source: str) -> str | None:
    """Longest run of literal characters every match of ``source`` must contain.

    Only characters outside groups count, and a character made optional by ``?``,
    ``*`` or ``{0,n}`` ends the run; ``None`` if no run of three or more is found.
    """
    runs: list[str] = []
    run: list[str] = []
    depth = 0
    i = 0

    def close() -> None:
        if run:
            runs.append("".join(run))
            run.clear()

    while i < len(source):
        char = source[i]
        after = source[i + 1 : i + 2]
        if char == "\\":
            # An escaped metacharacter is a literal; a following quantifier is
            # handled below like any other character's.
            if depth == 0 and after and after in _ESCAPED_LITERALS:
                run.append(after)
            else:
                close()
            i += 2
        elif char == "[":
            close()
            i = _skip_class(source, i)
        elif char == "(":
            close()
            depth += 1
            i += 1
        elif char == ")":
            depth -= 1
            i += 1
        elif depth > 0:
            i += 1
        elif char in "?*":
            if run:
                run.pop()
            close()
            i += 1
        elif char == "{":
            if run and after == "0":
                run.pop()
            close()
            end = source.find("}", i)
            i = len(source) if end < 0 else end + 1
        elif char in _LITERAL_CHARS:
            run.append(char)
            i += 1
        else:
            close()
            i += 1
    close()
    candidates = [r for r in runs if len(r.strip()) >= 3]
    return max(candidates, key=len) if candidates else None


def rules(*parts: str | Manual) -> tuple[Rule, ...]:
    """Compile phrase patterns (lower case) into guarded rules.

    Raises ``ValueError`` at import time for a pattern without a usable literal, so a
    new phrase cannot silently become a full scan.
    """
    compiled: list[Rule] = []
    for part in parts:
        if isinstance(part, Manual):
            compiled.append(Rule(re.compile(part.source), part.triggers))
            continue
        for branch in split_alternatives(part):
            literal = required_literal(branch)
            if literal is None:
                raise ValueError(f"no required literal in {branch!r}; use Manual(...)")
            compiled.append(Rule(re.compile(branch), (literal,)))
    return tuple(compiled)
