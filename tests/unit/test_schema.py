"""OUTBOX_SCHEMA: which names are qualified, and which names may be a schema."""

from __future__ import annotations

import re

import pytest

from outbox import config
from outbox.db import sql
from outbox.db.enqueue_statements import copy_outbox, copy_sql
from outbox.db.sql import migrations
from outbox.db.sql.schema import FUNCTIONS, TABLES, qualify
from outbox.db.store import relaying
from outbox.errors import ConfigError
from tests.unit.test_sql import every_query

_CREATED_TABLE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_]+)", re.I)
_CREATED_FUNCTION = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([a-z_]+)", re.I)


def test_the_lists_hold_every_table_and_function_the_migrations_create() -> None:
    text = "\n".join(m.sql for m in migrations())
    assert set(_CREATED_TABLE.findall(text)) | {"outbox_schema_migration"} == TABLES
    assert set(_CREATED_FUNCTION.findall(text)) == FUNCTIONS


def test_no_schema_leaves_the_text_as_written() -> None:
    text = "SELECT * FROM email_outbox JOIN email_attempt USING (id)"
    assert qualify(text, "") == text


def test_tables_functions_and_dropped_indexes_are_qualified() -> None:
    text = (
        "INSERT INTO email_event SELECT email_key_hash(k) FROM email_outbox o"
        " WHERE o.id = email_suppression.id AND 'email_outbox'::regclass IS NOT NULL;"
        " DROP INDEX CONCURRENTLY IF EXISTS email_outbox_recipient;"
        " CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_due ON email_outbox (id);"
        " DROP TRIGGER IF EXISTS email_outbox_deleted ON email_outbox;"
    )
    assert qualify(text, "billing") == (
        'INSERT INTO "billing".email_event SELECT "billing".email_key_hash(k)'
        ' FROM "billing".email_outbox o WHERE o.id = "billing".email_suppression.id'
        " AND '\"billing\".email_outbox'::regclass IS NOT NULL;"
        ' DROP INDEX CONCURRENTLY IF EXISTS "billing".email_outbox_recipient;'
        ' CREATE INDEX CONCURRENTLY IF NOT EXISTS email_outbox_due ON "billing".email_outbox (id);'
        ' DROP TRIGGER IF EXISTS email_outbox_deleted ON "billing".email_outbox;'
    )


def test_longer_names_and_columns_that_contain_a_table_name_stay_whole() -> None:
    # email_outbox_record_update is a function of its own, outbox_id a column,
    # email_outbox_parked an index (created bare), x.email_outbox already qualified.
    text = (
        "EXECUTE FUNCTION email_outbox_record_update(); SELECT outbox_id, email_outboxes"
        " FROM x.email_outbox; CREATE INDEX email_outbox_parked ON email_outbox (id)"
    )
    assert qualify(text, "s") == (
        'EXECUTE FUNCTION "s".email_outbox_record_update(); SELECT outbox_id, email_outboxes'
        ' FROM x.email_outbox; CREATE INDEX email_outbox_parked ON "s".email_outbox (id)'
    )


def test_every_query_and_migration_names_nothing_of_ours_bare_under_a_schema() -> None:
    bare = re.compile(r"(?<![\w.\"])(" + "|".join(TABLES | FUNCTIONS) + r")(?![\w\"])")
    with sql.use_schema("billing"):
        texts = [q[name] for _, q in every_query() for name in q] + [m.sql for m in migrations()]
    for text in texts:
        # comments may name a table in prose; code may not
        code = "\n".join(line.split("--")[0] for line in text.splitlines())
        assert not bare.search(code), code


def test_queries_follow_the_schema_in_use_and_return_to_it() -> None:
    plain = relaying.queries["claim_due"]
    with sql.use_schema("billing"):
        assert '"billing".email_outbox' in relaying.queries["claim_due"]
        assert sql.schema() == "billing"
    assert relaying.queries["claim_due"] == plain
    assert '"' not in plain


def test_copy_names_the_table_in_the_schema() -> None:
    with sql.use_schema("billing"):
        copy = copy_outbox([], [])
    assert copy.schema == "billing"
    assert copy_sql(copy) == 'COPY "billing".email_outbox (status_reason) FROM STDIN'
    assert copy_sql(copy_outbox([], [])) == "COPY email_outbox (status_reason) FROM STDIN"


@pytest.mark.parametrize(
    "name",
    ["Billing", "1abc", "bad-name", "a b", 'x"y', "pg_outbox", "information_schema", "a" * 64],
)
def test_a_schema_postgres_would_need_quoted_or_keeps_for_itself_is_refused(name: str) -> None:
    assert config.schema_problem(name) is not None
    with pytest.raises(ConfigError, match="OUTBOX_SCHEMA"):
        config.schema_from_env({"OUTBOX_SCHEMA": name})
    with pytest.raises(ConfigError, match="OUTBOX_SCHEMA"):
        config.Settings.from_env({"OUTBOX_SCHEMA": name})
    with pytest.raises(ConfigError, match="OUTBOX_SCHEMA"), sql.use_schema(name):
        pass


@pytest.mark.parametrize("name", ["", "outbox", "billing_2", "_mail", "a" * 63])
def test_ordinary_schema_names_are_taken(name: str) -> None:
    assert config.schema_problem(name) is None
    assert config.schema_from_env({"OUTBOX_SCHEMA": name}) == name
    assert config.Settings.from_env({"OUTBOX_SCHEMA": name}).schema == name
