"""Enqueue's statements as data: SQL text and parameters, for any driver to run.

Intake builds each statement once, in one neutral form: the SQL of
``enqueue_statements.sql`` (beside this module) with named ``%(name)s``
placeholders and a mapping of values.
The executors (:mod:`outbox.db.executors`, :mod:`outbox.db.async_executors`)
render it for their driver's placeholder style and run it on the caller's
connection; nothing here does I/O.

The column lists are not written in the SQL: ``/*columns*/`` and
``/*values*/`` markers are filled from the row's column list, so a column
added to intake's row reaches every statement and every driver unchanged.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from outbox.db.sql import load_queries, schema

queries = load_queries(__name__)

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


@dataclass(frozen=True, slots=True)
class Column:
    field: str  # the attribute of intake's row
    name: str  # the column of email_outbox
    json: bool = False  # the value is JSON text, stored as jsonb
    array: bool = False  # the value is a tuple of text, stored as text[] (empty: NULL)
    timestamp: bool = False  # the value is an aware datetime, stored as timestamptz

    @property
    def sql_type(self) -> str:
        """The column's type, as the enqueue function declares its parameter."""
        if self.json:
            return "jsonb"
        if self.array:
            return "text[]"
        return "timestamptz" if self.timestamp else "text"

    def value(self, given: Any) -> Any:
        """``given`` as every driver binds it: a list for an array, None for an empty one."""
        if self.array:
            return list(given) or None
        return given


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement in the neutral form: ``%(name)s`` placeholders, ``%%`` for ``%``."""

    sql: str
    params: Mapping[str, Any]
    returns_rows: bool = True  # False: a command (SAVEPOINT, UPDATE), nothing to fetch


@dataclass(frozen=True, slots=True)
class Copy:
    """``COPY email_outbox (columns) FROM STDIN`` fed with ``rows`` (consumed once)."""

    table: str
    columns: tuple[str, ...]
    rows: Iterable[tuple[Any, ...]]
    schema: str = ""  # OUTBOX_SCHEMA; empty: the table is found by the search_path


Op = Statement | Copy
Rows = list[tuple[Any, ...]]
T = TypeVar("T")
# What intake does, as a generator: it yields each operation and is sent its
# rows (an executor's error is thrown in). Sync and async executors drive the
# same plan, so the logic exists once.
Plan = Generator[Op, Rows, T]

# The placeholder styles of PEP 249 that the supported drivers use.
PYFORMAT = "pyformat"  # psycopg 3, psycopg2: %(name)s and a mapping
NUMERIC_DOLLAR = "numeric_dollar"  # asyncpg: $1 and a sequence
FORMAT = "format"  # %s and a sequence
NAMED = "named"  # :name and a mapping


def render(statement: Statement, style: str) -> tuple[str, Mapping[str, Any] | tuple[Any, ...]]:
    """``statement`` as SQL and parameters in the placeholder ``style`` of a driver."""
    if style == PYFORMAT:
        return statement.sql, statement.params
    sql, names = _converted(statement.sql, style)
    if style == NAMED:
        return sql, statement.params
    return sql, tuple(statement.params[name] for name in names)


@functools.lru_cache(maxsize=256)
def _converted(sql: str, style: str) -> tuple[str, tuple[str, ...]]:
    """The SQL in ``style`` and the parameter names in the order they are bound."""
    order: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:  # "%%": a literal percent sign
            return "%%" if style == FORMAT else "%"
        if style == NUMERIC_DOLLAR:
            if name not in order:
                order.append(name)
            return f"${order.index(name) + 1}"
        if style == FORMAT:
            order.append(name)  # positional: a name used twice is bound twice
            return "%s"
        if style == NAMED:
            return f":{name}"
        raise ValueError(f"unknown placeholder style {style!r}")

    return _PLACEHOLDER.sub(placeholder, sql), tuple(order)


@functools.lru_cache(maxsize=64)
def _filled(sql: str, columns: tuple[Column, ...], prefix: str = "") -> str:
    names = ", ".join(c.name for c in columns)
    values = ", ".join(f"%({c.field})s" for c in columns)
    given = ", ".join(f"{prefix}{c.name}" for c in columns)
    return sql.replace("/*columns*/", names).replace("/*values*/", values).replace("/*g*/", given)


def insert_message(columns: Sequence[Column], values: Mapping[str, Any]) -> Statement:
    """Insert one row unless its key exists (then the stored row is returned).

    ``values`` maps each column's field to its value; ``key``, ``recipient``
    and ``priority`` must be among them (the suppression check reads them).
    """
    return Statement(_filled(queries["insert_message"], tuple(columns)), values)


@dataclass(frozen=True, slots=True)
class EnqueueFunction:
    """insert_message as a PL/pgSQL function, for drivers that prepare nothing.

    psycopg2 (and Django, and SQLAlchemy on it) sends each statement as text,
    so Postgres plans insert_message on every call; a function's statements
    are planned once per session. ``outbox migrate`` creates it; its name
    carries a hash of its definition, so a release that changes the columns
    gets a function of its own while the one before keeps serving the
    release still running.
    """

    name: str  # qualified in the schema, as it is called
    create: str  # CREATE OR REPLACE FUNCTION ...
    exists: Statement  # one row: whether the function is there
    call_sql: str  # SELECT * FROM name(%(field)s, ...), the columns in order

    def call(self, values: Mapping[str, Any]) -> Statement:
        """The call that inserts one row, with insert_message's result."""
        return Statement(self.call_sql, values)


_PARAMETER = re.compile(r"%\((\w+)\)s")


@functools.lru_cache(maxsize=8)
def enqueue_function(columns: tuple[Column, ...], schema_name: str) -> EnqueueFunction:
    """The enqueue function of this column list, in ``schema_name`` ("": search_path)."""
    fields = {c.field for c in columns}
    body = _filled(queries.in_schema("insert_message", schema_name), columns)
    used = set(_PARAMETER.findall(body))
    if not used <= fields:
        raise ValueError(f"insert_message uses values that are no column: {sorted(used - fields)}")
    body = _PARAMETER.sub(lambda m: f"p_{m.group(1)}", body).replace("%%", "%")
    parameters = ", ".join(f"p_{c.field} {c.sql_type}" for c in columns)
    # The output names are variables in PL/pgSQL: the query's columns win.
    definition = (
        f"({parameters})\nRETURNS TABLE (id bigint, message_id text, content_hash text,"
        f" created boolean, status text, notified text)\nLANGUAGE plpgsql AS $enqueue$\n"
        f"#variable_conflict use_column\nBEGIN\nRETURN QUERY\n{body.rstrip().rstrip(';')};\n"
        f"END\n$enqueue$"
    )
    digest = hashlib.sha256(definition.encode()).hexdigest()[:12]
    name = f"email_enqueue_{digest}"
    qualified_name = f'"{schema_name}".{name}' if schema_name else name
    signature = f"{qualified_name}({', '.join(c.sql_type for c in columns)})"
    arguments = ", ".join(f"%({c.field})s" for c in columns)
    return EnqueueFunction(
        name=qualified_name,
        create=f"CREATE OR REPLACE FUNCTION {qualified_name}{definition}",
        exists=Statement(queries["enqueue_function_exists"], {"signature": signature}),
        # The name is a hash and a checked schema name; the arguments are placeholders.
        call_sql=f"SELECT * FROM {qualified_name}({arguments})",  # noqa: S608
    )


def find_by_key(key: str, content_hash: str) -> Statement:
    """The stored row of ``key``, or its tombstone (``content_hash`` is compared to its prefix)."""
    return Statement(queries["find_by_key"], {"key": key, "content_hash": content_hash})


def insert_rows(columns: Sequence[Column], rows: Iterable[Sequence[Any]]) -> Statement:
    """Many rows in one statement, for drivers without COPY and for a batch with known keys.

    ``rows`` hold the columns' values in order. They travel as one JSON array
    of objects shaped like ``email_outbox`` (Postgres reads them with the
    table's own column types), so the statement has one parameter whatever the
    driver and the batch size. JSON columns are embedded as JSON, not as text.
    """
    cols = tuple(columns)
    objects = [
        {
            c.name: orjson.Fragment(v) if c.json and v is not None else v
            for c, v in zip(cols, row, strict=True)
        }
        for row in rows
    ]
    return Statement(
        _filled(queries["insert_rows"], cols, "g."), {"rows": orjson.dumps(objects).decode()}
    )


def existing_keys(keys: Sequence[str]) -> Statement:
    return Statement(queries["existing_keys"], {"keys": list(keys)})


ENQUEUED = "enqueued"  # the status_reason of a new row, as insert_message and insert_rows write it


def copy_outbox(columns: Sequence[Column], rows: Iterable[tuple[Any, ...]]) -> Copy:
    """COPY new rows; suppressed ones become audit rows afterwards (suppress_copied)."""
    names = (*(c.name for c in columns), "status_reason")
    return Copy("email_outbox", names, ((*row, ENQUEUED) for row in rows), schema())


def copy_sql(copy: Copy) -> str:
    """``copy`` as a COPY statement (for drivers that take one)."""
    table = f'"{copy.schema}".{copy.table}' if copy.schema else copy.table
    return f"COPY {table} ({', '.join(copy.columns)}) FROM STDIN"


def outbox_id_mark() -> Statement:
    return Statement(queries["outbox_id_mark"], {})


def outbox_id_last() -> Statement:
    return Statement(queries["outbox_id_last"], {})


def copied_rows(after: int, last: int) -> Statement:
    return Statement(queries["copied_rows"], {"after": after, "last": last})


def suppress_copied(ids: Sequence[int], reasons: Sequence[str]) -> Statement:
    return Statement(
        queries["suppress_copied"], {"ids": list(ids), "reasons": list(reasons)}, returns_rows=False
    )


def notify_due(priority: str) -> Statement:
    return Statement(queries["notify_due"], {"priority": priority})


def schedule_new(ids: Sequence[int]) -> Statement:
    """Rows just copied with a send_at wait until then (COPY writes no computed column)."""
    return Statement(queries["schedule_new"], {"ids": list(ids)}, returns_rows=False)


def drop_suppressed_copies(ids: Sequence[int]) -> Statement:
    """Take the suppressed cc and bcc recipients off new rows ``ids``, each one recorded."""
    return Statement(queries["drop_suppressed_copies"], {"ids": list(ids)})


def store_attachment_blobs(files: Mapping[str, bytes]) -> Statement:
    """Keep each file (by SHA-256) once: a file stored already is not written again."""
    return Statement(
        queries["store_attachment_blobs"],
        {"hashes": list(files), "contents": list(files.values())},
        returns_rows=False,
    )


def use_attachments(uses: Sequence[tuple[int, str]]) -> Statement:
    """Note which new rows (id, sha256) use which files."""
    return Statement(
        queries["use_attachments"],
        {"ids": [i for i, _ in uses], "hashes": [h for _, h in uses]},
        returns_rows=False,
    )


def cancel(key: str, *, reason: str | None, by: str | None) -> Statement:
    """Cancel the key's email while no worker has it: (id, status before, cancelled now).

    ``reason`` None: none recorded; ``by`` None: the connection's application name."""
    return Statement(queries["cancel"], {"key": key, "reason": reason, "by": by})


# Around the COPY: a failed COPY (a known key, a row refused while streaming)
# leaves the caller's transaction as it was.
SAVEPOINT = Statement(queries["copy_savepoint"], {}, returns_rows=False)
ROLLBACK_TO_SAVEPOINT = Statement(queries["copy_savepoint_rollback"], {}, returns_rows=False)
RELEASE_SAVEPOINT = Statement(queries["copy_savepoint_release"], {}, returns_rows=False)


def store_template_version(
    *,
    version: str,
    name: str,
    files: Mapping[str, str],
    compiled_html: str | None,
    compiled_text: str | None,
) -> Statement:
    """Keep a template version; the row comes back only when this statement wrote it."""
    return Statement(
        queries["store_template_version"],
        {
            "hash": version,
            "name": name,
            "files": orjson.dumps(dict(files)).decode(),
            "compiled_html": compiled_html,
            "compiled_text": compiled_text,
        },
    )
