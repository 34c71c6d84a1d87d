from __future__ import annotations

import re
from pathlib import Path

import pytest

from outbox.db.sql import migrations, parse_queries, queries

ROOT = Path(__file__).resolve().parents[2]


def test_parser_splits_named_queries() -> None:
    text = "-- one --\n-- what it does\nSELECT 1;\n\n-- two --\nSELECT 2;\n"
    assert parse_queries(text) == {"one": "SELECT 1;", "two": "SELECT 2;"}


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        parse_queries("-- a --\nSELECT 1;\n-- a --\nSELECT 2;\n")


def test_every_query_used_in_code_exists_and_every_query_is_used() -> None:
    used = set()
    for path in [*ROOT.joinpath("outbox").rglob("*.py")]:
        used |= set(re.findall(r'queries\["([a-z0-9_]+)"\]', path.read_text()))
    assert used - set(queries) == set()
    assert set(queries) - used == set()


def test_every_query_is_described() -> None:
    text = ROOT.joinpath("outbox/db/sql/queries.sql").read_text()
    for name in queries:
        assert re.search(rf"-- {name} --\n-- \S", text), name


def test_migrations_are_numbered_without_gaps() -> None:
    versions = [m.version for m in migrations()]
    assert versions == list(range(1, len(versions) + 1))
