"""Reading migration files: statements, mode, and what would stop traffic."""

from __future__ import annotations

import pytest

from outbox.db.sql import migrations
from outbox.db.sql.migration_files import (
    NO_TRANSACTION,
    Migration,
    concurrent_index_name,
    is_concurrent,
    safety_problems,
    split_statements,
)


def test_statements_split_on_semicolons_outside_quotes_and_bodies() -> None:
    sql = (
        "-- a comment; not a split\n"
        "CREATE TABLE t (a text DEFAULT 'x;y', \"we;ird\" int);\n"
        "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        "BEGIN INSERT INTO t VALUES ('1'); RETURN NULL; END $$;\n"
        "/* block; comment */ SELECT 'it''s; fine';\n"
        "-- trailing comment only\n"
    )
    assert split_statements(sql) == [
        "-- a comment; not a split\nCREATE TABLE t (a text DEFAULT 'x;y', \"we;ird\" int)",
        "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        "BEGIN INSERT INTO t VALUES ('1'); RETURN NULL; END $$",
        "/* block; comment */ SELECT 'it''s; fine'",
    ]


def test_tagged_dollar_quotes_do_not_split() -> None:
    assert split_statements("DO $body$ BEGIN PERFORM 1; END $body$; SELECT 2") == [
        "DO $body$ BEGIN PERFORM 1; END $body$",
        "SELECT 2",
    ]


def test_the_marker_on_the_first_line_makes_a_file_non_transactional() -> None:
    assert not Migration(1, "a", f"{NO_TRANSACTION}\nSELECT 1;").transactional
    assert not Migration(1, "a", f"\n  {NO_TRANSACTION}\nSELECT 1;").transactional
    assert Migration(1, "a", f"SELECT 1;\n{NO_TRANSACTION}\n").transactional
    assert Migration(7, "unsent_age", "").label == "0007_unsent_age"


@pytest.mark.parametrize(
    ("statement", "name"),
    [
        ("CREATE INDEX CONCURRENTLY IF NOT EXISTS ix ON t (a)", "ix"),
        ("-- why\nCREATE UNIQUE INDEX CONCURRENTLY ix_2 ON t (a)", "ix_2"),
        ("create index concurrently Ix on t (a)", "ix"),
        ("CREATE INDEX IF NOT EXISTS ix ON t (a)", None),
        ("DROP INDEX CONCURRENTLY IF EXISTS ix", None),
    ],
)
def test_the_index_a_concurrent_build_makes(statement: str, name: str | None) -> None:
    assert concurrent_index_name(statement) == name


@pytest.mark.parametrize(
    ("statement", "concurrent"),
    [
        ("CREATE INDEX CONCURRENTLY ix ON t (a)", True),
        ("DROP INDEX CONCURRENTLY IF EXISTS ix", True),
        ("-- built CONCURRENTLY\nCREATE INDEX ix ON t (a)", False),
        ("ALTER TABLE t ADD COLUMN concurrently_seen text", False),
    ],
)
def test_concurrent_statements_are_told_apart(statement: str, concurrent: bool) -> None:
    assert is_concurrent(statement) is concurrent


def _problems(sql: str) -> list[str]:
    return safety_problems(Migration(14, "x", sql))


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("CREATE INDEX ix ON email_outbox (a);", "without CONCURRENTLY"),
        ("CREATE INDEX CONCURRENTLY ix ON email_outbox (a);", "needs -- outbox:no-transaction"),
        ("DROP INDEX IF EXISTS ix;", "drops an index without CONCURRENTLY"),
        ("ALTER TABLE email_outbox ADD COLUMN b text CHECK (b <> '');", "NOT VALID"),
        (
            "ALTER TABLE email_outbox ADD CONSTRAINT c FOREIGN KEY (a) REFERENCES t (id);",
            "NOT VALID",
        ),
        ("ALTER TABLE email_outbox VALIDATE CONSTRAINT c;", "needs -- outbox:no-transaction"),
        ("ALTER TABLE email_outbox ALTER COLUMN a TYPE bigint;", "rewrites"),
        ("ALTER TABLE email_outbox ALTER COLUMN a SET NOT NULL;", "rewrites"),
        ("ALTER TABLE email_outbox ADD COLUMN u uuid DEFAULT gen_random_uuid();", "rewrites"),
    ],
)
def test_what_would_stop_traffic_is_found(sql: str, problem: str) -> None:
    (found,) = _problems(sql)
    assert problem in found
    assert found.startswith("0014_x: ")


@pytest.mark.parametrize(
    "sql",
    [
        f"{NO_TRANSACTION}\nCREATE INDEX CONCURRENTLY IF NOT EXISTS ix ON email_outbox (a);",
        f"{NO_TRANSACTION}\nDROP INDEX CONCURRENTLY IF EXISTS ix;",
        "ALTER TABLE email_outbox ADD CONSTRAINT c CHECK (a > 0) NOT VALID;",
        f"{NO_TRANSACTION}\nALTER TABLE email_outbox VALIDATE CONSTRAINT c;",
        "ALTER TABLE email_outbox ADD COLUMN b text DEFAULT 'constant';",
        "CREATE TABLE t (a int CHECK (a > 0));\nCREATE INDEX ix ON t (a);\n"
        "ALTER TABLE t ADD CONSTRAINT c CHECK (a < 9);",
    ],
)
def test_safe_statements_pass(sql: str) -> None:
    assert _problems(sql) == []


def test_every_migration_after_the_first_is_safe_on_a_large_busy_table() -> None:
    # The first creates the tables: there is nothing to lock out yet.
    problems = [p for m in migrations() if m.version > 1 for p in safety_problems(m)]
    assert problems == []


def test_every_non_transactional_migration_can_run_again() -> None:
    # An interrupted run is resumed by running the file from the top.
    for m in migrations():
        if m.transactional:
            continue
        for statement in m.statements():
            code = " ".join(line for line in statement.splitlines() if not line.startswith("--"))
            assert "IF NOT EXISTS" in code or "IF EXISTS" in code or "VALIDATE" in code, (
                m.label,
                statement,
            )
