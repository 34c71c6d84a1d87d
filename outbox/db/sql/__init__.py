"""The named queries and the migrations, named in OUTBOX_SCHEMA.

Each module that runs SQL keeps its queries in the ``.sql`` file of its own
name beside it (``outbox/db/store/relaying.sql`` for
:mod:`outbox.db.store.relaying`) and reads them once, at import, with
:func:`load_queries`. In a file, ``-- name --`` opens each query and the
comment lines right after it say what it does.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import LiteralString, cast

from outbox import config
from outbox.db.sql.migration_files import Migration
from outbox.db.sql.schema import qualify
from outbox.errors import ConfigError

# "-- name --" opens a query; the comment lines right after it describe it.
_QUERY_HEADER = re.compile(r"(?:\n|^)-- ([a-z0-9_]+) --\n(?:-- .+\n)*")


def parse_queries(text: str, source: str = "the queries") -> dict[str, LiteralString]:
    parts = _QUERY_HEADER.split(text)
    # parts: [preamble, name1, body1, name2, body2, ...]
    names, bodies = parts[1::2], parts[2::2]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate query name in {source}")
    return {
        name: cast(LiteralString, body.strip()) for name, body in zip(names, bodies, strict=True)
    }


# The schema of this process's outbox: read from OUTBOX_SCHEMA when first
# needed (importing the package reads no setting), or set by use_schema.
_schema: str | None = None


def schema() -> str:
    """The schema every query names its objects in; empty: the connection's search_path."""
    global _schema  # noqa: PLW0603  # one setting per process, read once
    if _schema is None:
        _schema = config.schema_from_env()
    return _schema


@contextlib.contextmanager
def use_schema(name: str) -> Iterator[None]:
    """Run the block with the outbox in schema ``name`` (``""``: the search_path)."""
    global _schema  # noqa: PLW0603
    problem = config.schema_problem(name)
    if problem:
        raise ConfigError(problem)
    before = _schema
    _schema = name
    try:
        yield
    finally:
        _schema = before


def qualified(sql: str) -> str:
    """``sql`` written with bare names, named in this process's schema."""
    return qualify(sql, schema())


class Queries(Mapping[str, LiteralString]):
    """One file's queries by name, each qualified once per schema."""

    def __init__(self, bare: dict[str, LiteralString]) -> None:
        self._bare = bare
        self._cache: dict[tuple[str, str], LiteralString] = {}

    def __getitem__(self, name: str) -> LiteralString:
        key = (schema(), name)
        found = self._cache.get(key)
        if found is None:
            found = qualify(self._bare[name], key[0])
            self._cache[key] = found
        return found

    def in_schema(self, name: str, schema_name: str) -> str:
        """The query named in ``schema_name`` rather than this process's schema."""
        return qualify(self._bare[name], schema_name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._bare)

    def __len__(self) -> int:
        return len(self._bare)


def migrations() -> list[Migration]:
    """Every file in ``migrations/``, in order, named in this process's schema."""
    found = []
    for entry in resources.files(__package__).joinpath("migrations").iterdir():
        match = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if match:
            text = qualified(entry.read_text("utf-8"))
            found.append(Migration(int(match.group(1)), match.group(2), text))
    return sorted(found, key=lambda m: m.version)


def load_queries(module: str) -> Queries:
    """The queries of ``module`` (its ``__name__``): the ``.sql`` file of its name beside it."""
    package, _, name = module.rpartition(".")
    path = resources.files(package).joinpath(f"{name}.sql")
    return Queries(parse_queries(path.read_text("utf-8"), f"{package}/{name}.sql"))
