from __future__ import annotations

import re
from pathlib import Path

import pytest

from outbox.db.sql import Queries, load_queries, migrations, parse_queries
from outbox.db.store import relaying

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "outbox"


def query_files() -> list[Path]:
    """Every file of named queries (the migrations are files of another kind)."""
    return sorted(p for p in PACKAGE.rglob("*.sql") if "migrations" not in p.parts)


def module_of(path: Path) -> str:
    """The module whose queries ``path`` holds: the one of its name beside it."""
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def every_query() -> list[tuple[str, Queries]]:
    """(module, its queries) of every module that has a file of queries."""
    return [(module_of(p), load_queries(module_of(p))) for p in query_files()]


def test_parser_splits_named_queries() -> None:
    text = "-- one --\n-- what it does\nSELECT 1;\n\n-- two --\nSELECT 2;\n"
    assert parse_queries(text) == {"one": "SELECT 1;", "two": "SELECT 2;"}


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match=r"duplicate query name in a\.sql"):
        parse_queries("-- a --\nSELECT 1;\n-- a --\nSELECT 2;\n", "a.sql")


def test_a_module_loads_the_queries_of_its_own_file() -> None:
    assert set(relaying.queries) == set(load_queries("outbox.db.store.relaying"))
    assert "claim_due" in relaying.queries


@pytest.mark.parametrize("path", query_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_query_file_is_read_by_the_module_beside_it_which_uses_every_query(
    path: Path,
) -> None:
    module = path.with_suffix(".py")
    assert module.exists(), f"{path.name} has no module of its name beside it"
    used = set(re.findall(r'(?<![\w.])queries\["([a-z0-9_]+)"\]', module.read_text()))
    assert "load_queries(__name__)" in module.read_text()
    named = set(parse_queries(path.read_text()))
    assert used - named == set(), f"{module.name} uses queries {path.name} lacks"
    assert named - used == set(), f"{path.name} has queries {module.name} never runs"


def test_only_a_module_with_a_query_file_runs_named_queries() -> None:
    owners = {p.with_suffix(".py") for p in query_files()}
    for module in PACKAGE.rglob("*.py"):
        text = module.read_text()
        if "load_queries(__name__)" in text or re.search(r'(?<![\w.])queries\["', text):
            assert module in owners, f"{module} runs queries but has no .sql file beside it"


@pytest.mark.parametrize("path", query_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_query_is_described(path: Path) -> None:
    text = path.read_text()
    names = parse_queries(text)
    assert names, f"{path.name} holds no named query"
    for name in names:
        assert re.search(rf"-- {name} --\n-- \S", text), name
    # Nothing but named queries: text before the first name would be lost.
    assert re.match(r"-- [a-z0-9_]+ --\n", text), f"{path.name} starts with no query's name"


def test_migrations_are_numbered_without_gaps() -> None:
    versions = [m.version for m in migrations()]
    assert versions == list(range(1, len(versions) + 1))
