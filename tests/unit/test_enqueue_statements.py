"""Enqueue's statements as data: built once, rendered per driver's placeholder style."""

from __future__ import annotations

import dataclasses
import re

import orjson
import pytest

from outbox import intake
from outbox.db import enqueue_statements
from outbox.db.enqueue_statements import FORMAT, NAMED, NUMERIC_DOLLAR, PYFORMAT, Column, Statement
from outbox.db.row import Row, named_values, values

SQL = "SELECT %(a)s, %(b)s, lower(%(a)s), 'x%%'"
PARAMS = {"a": 1, "b": "two"}


def test_pyformat_is_the_neutral_form_unchanged() -> None:
    assert enqueue_statements.render(Statement(SQL, PARAMS), PYFORMAT) == (SQL, PARAMS)


def test_numeric_dollar_numbers_each_name_once_in_order_of_appearance() -> None:
    sql, params = enqueue_statements.render(Statement(SQL, PARAMS), NUMERIC_DOLLAR)
    assert sql == "SELECT $1, $2, lower($1), 'x%'"
    assert params == (1, "two")


def test_format_binds_a_name_used_twice_twice() -> None:
    sql, params = enqueue_statements.render(Statement(SQL, PARAMS), FORMAT)
    assert sql == "SELECT %s, %s, lower(%s), 'x%%'"
    assert params == (1, "two", 1)


def test_named_style() -> None:
    sql, params = enqueue_statements.render(Statement(SQL, PARAMS), NAMED)
    assert sql == "SELECT :a, :b, lower(:a), 'x%'"
    assert params == PARAMS


def test_an_unknown_style_is_refused() -> None:
    with pytest.raises(ValueError, match="qmark"):
        enqueue_statements.render(Statement(SQL, PARAMS), "qmark")


def test_a_missing_parameter_is_a_key_error_not_a_shifted_binding() -> None:
    with pytest.raises(KeyError):
        enqueue_statements.render(Statement(SQL, {"a": 1}), NUMERIC_DOLLAR)


def test_every_query_of_intake_renders_for_asyncpg_without_a_percent_left() -> None:
    values = {c.field: "v" for c in intake.COLUMNS}
    for built in (
        enqueue_statements.insert_message(intake.COLUMNS, values),
        enqueue_statements.insert_rows(intake.COLUMNS, [tuple("v" for _ in intake.COLUMNS)]),
        enqueue_statements.find_by_key("k", "h"),
        enqueue_statements.existing_keys(["k"]),
        enqueue_statements.copied_rows(1, 2),
        enqueue_statements.suppress_copied([1], ["r"]),
        enqueue_statements.notify_due("bulk"),
        enqueue_statements.schedule_new([1]),
        enqueue_statements.drop_suppressed_copies([1]),
        enqueue_statements.store_attachment_blobs({"h": b"c"}),
        enqueue_statements.use_attachments([(1, "h")]),
        enqueue_statements.cancel("k", reason="r", by="b"),
        enqueue_statements.store_template_version(
            version="h", name="n", files={}, compiled_html=None, compiled_text="t"
        ),
    ):
        sql, params = enqueue_statements.render(built, NUMERIC_DOLLAR)
        assert "%" not in sql
        assert "/*" not in sql
        assert isinstance(params, tuple)
        assert len(params) == len(set(enqueue_statements._converted(built.sql, NUMERIC_DOLLAR)[1]))


COLS = (Column("key", "idempotency_key"), Column("params", "params", json=True), Column("x", "x"))


def test_insert_message_lists_the_row_columns_and_their_placeholders() -> None:
    built = enqueue_statements.insert_message(COLS, {"key": "k", "params": "{}", "x": None})
    assert (
        "INSERT INTO email_outbox (idempotency_key, params, x, status, status_reason, "
        "next_attempt_at)" in built.sql
    )
    assert "SELECT %(key)s, %(params)s, %(x)s," in built.sql
    assert built.params == {"key": "k", "params": "{}", "x": None}


def test_an_array_column_binds_a_list_and_an_empty_one_as_null() -> None:
    cc = Column("cc", "cc", array=True)
    assert cc.value(("a@example.com", "b@example.com")) == ["a@example.com", "b@example.com"]
    assert cc.value(()) is None
    assert Column("x", "x").value(("kept",)) == ("kept",)


def test_insert_rows_sends_one_json_array_with_json_columns_embedded() -> None:
    built = enqueue_statements.insert_rows(
        COLS, [("k1", '{"a": [1, 2]}', None), ("k2", None, "é\n")]
    )
    assert "SELECT g.idempotency_key, g.params, g.x," in built.sql
    assert list(built.params) == ["rows"]
    assert orjson.loads(built.params["rows"]) == [
        {"idempotency_key": "k1", "params": {"a": [1, 2]}, "x": None},
        {"idempotency_key": "k2", "params": None, "x": "é\n"},
    ]


def test_insert_rows_refuses_a_row_of_the_wrong_width() -> None:
    with pytest.raises(ValueError, match="zip"):
        enqueue_statements.insert_rows(COLS, [("k1", "{}")])


def test_copy_names_the_columns() -> None:
    copy = enqueue_statements.copy_outbox(COLS, iter([("k", "{}", None)]))
    assert enqueue_statements.copy_sql(copy) == (
        "COPY email_outbox (idempotency_key, params, x, status_reason) FROM STDIN"
    )
    assert list(copy.rows) == [("k", "{}", None, "enqueued")]  # as insert_message writes it


def test_the_columns_follow_the_row_fields() -> None:
    # Every field but the attachments' bytes, stored apart once the row exists.
    fields = [f.name for f in dataclasses.fields(Row) if f.name != "files"]
    assert [c.field for c in intake.COLUMNS] == fields
    assert intake.COLUMNS[0] == Column("key", "idempotency_key")
    assert [c.name for c in intake.COLUMNS if c.json] == [
        "params", "headers", "metadata", "attachments"
    ]  # fmt: skip
    assert [c.name for c in intake.COLUMNS if c.array] == ["reply_to", "tags", "cc", "bcc"]


def test_template_files_travel_as_json_text() -> None:
    built = enqueue_statements.store_template_version(
        version="h", name="n", files={"a.txt": "x"}, compiled_html=None, compiled_text="t"
    )
    assert orjson.loads(built.params["files"]) == {"a.txt": "x"}


def test_savepoint_commands_fetch_nothing() -> None:
    for command in (
        enqueue_statements.SAVEPOINT,
        enqueue_statements.ROLLBACK_TO_SAVEPOINT,
        enqueue_statements.RELEASE_SAVEPOINT,
    ):
        assert not command.returns_rows
        assert "outbox_copy" in command.sql


def test_the_enqueue_function_is_insert_message_with_typed_parameters() -> None:
    function = enqueue_statements.enqueue_function(intake.COLUMNS, "")
    assert re.fullmatch(r"email_enqueue_[0-9a-f]{12}", function.name)
    assert function.create.startswith(f"CREATE OR REPLACE FUNCTION {function.name}(p_key text,")
    assert "%(" not in function.create  # every value became a parameter
    for column in ("params jsonb", "reply_to text[]", "send_at timestamptz", "locale text"):
        assert f"p_{column}" in function.create
    # Called with the columns in order, in the neutral placeholder form.
    names = [c.field for c in intake.COLUMNS]
    assert function.call_sql == (
        f"SELECT * FROM {function.name}(" + ", ".join(f"%({n})s" for n in names) + ")"
    )
    assert function.call({"key": "k"}).params == {"key": "k"}
    signature = function.exists.params["signature"]
    assert signature.startswith(f"{function.name}(text, text, text, jsonb,")


def test_the_enqueue_functions_name_follows_its_definition_and_schema() -> None:
    function = enqueue_statements.enqueue_function(intake.COLUMNS, "")
    assert enqueue_statements.enqueue_function(intake.COLUMNS, "") == function  # the same release
    in_schema = enqueue_statements.enqueue_function(intake.COLUMNS, "mail")
    assert in_schema.name.startswith('"mail".email_enqueue_')
    assert in_schema.name.split(".")[1] != function.name  # the body names the schema too
    assert '"mail".email_outbox' in in_schema.create
    # A release with one more column gets a function of its own.
    more = (*intake.COLUMNS, Column("extra", "extra"))
    with pytest.raises(ValueError, match="no column"):
        enqueue_statements.enqueue_function(more[:3], "")  # insert_message needs more than these
    assert enqueue_statements.enqueue_function(more, "").name != function.name


def test_a_rows_values_are_its_columns_as_every_driver_binds_them() -> None:
    row = Row(key="k", recipient="a@example.org", template="t", params="{}",
              content_hash="h", message_id="<m@x>", priority="bulk", template_version="v",
              reply_to=("r@example.org",), tags=())  # fmt: skip
    expected = tuple(c.value(getattr(row, c.field)) for c in intake.COLUMNS)
    assert values(row) == expected
    assert expected[[c.field for c in intake.COLUMNS].index("reply_to")] == ["r@example.org"]
    assert expected[[c.field for c in intake.COLUMNS].index("tags")] is None  # empty: NULL
    assert named_values(row) == {c.field: v for c, v in zip(intake.COLUMNS, expected, strict=True)}
