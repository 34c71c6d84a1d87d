"""Every runtime query, loaded by name from ``queries.sql``."""

from __future__ import annotations

import re
from importlib import resources
from typing import LiteralString, cast

from outbox.db.sql.statements import Migration

# "-- name --" opens a query; the comment lines right after it describe it.
_QUERY_HEADER = re.compile(r"(?:\n|^)-- ([a-z0-9_]+) --\n(?:-- .+\n)*")


def parse_queries(text: str) -> dict[str, LiteralString]:
    parts = _QUERY_HEADER.split(text)
    # parts: [preamble, name1, body1, name2, body2, ...]
    names, bodies = parts[1::2], parts[2::2]
    if len(set(names)) != len(names):
        raise ValueError("duplicate query name in queries.sql")
    return {
        name: cast(LiteralString, body.strip()) for name, body in zip(names, bodies, strict=True)
    }


def migrations() -> list[Migration]:
    """Every file in ``migrations/``, in order."""
    found = []
    for entry in resources.files(__package__).joinpath("migrations").iterdir():
        match = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    return sorted(found, key=lambda m: m.version)


queries = parse_queries(resources.files(__package__).joinpath("queries.sql").read_text("utf-8"))
