"""Reading a migration file: its statements, its mode, and what would lock traffic.

Pure text handling, so the runner (``store.migrate``) only executes and the
checks that keep a migration safe on a large, busy table are unit-tested.

A file whose first line is ``-- outbox:no-transaction`` runs one statement at
a time outside a transaction: ``CREATE INDEX CONCURRENTLY`` refuses to run in
one, and a ``VALIDATE CONSTRAINT`` must commit apart from the ``NOT VALID``
constraint it checks, or the strong lock of the latter is held while the whole
table is read. Such a file must be safe to run again from the top (``IF NOT
EXISTS``, ``IF EXISTS``): an interrupted run is resumed by running it again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NO_TRANSACTION = "-- outbox:no-transaction"

_CONCURRENT_INDEX = re.compile(
    r"^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    r"(?P<name>[a-z_][a-z0-9_]*)\s+ON\s",
    re.IGNORECASE,
)
_CREATE_INDEX = re.compile(
    r"^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?P<concurrently>CONCURRENTLY\s+)?"
    r"(?:IF\s+NOT\s+EXISTS\s+)?(?:[a-z_][a-z0-9_]*\s+)?ON\s+(?:ONLY\s+)?(?P<table>[a-z_][a-z0-9_]*)",
    re.IGNORECASE,
)
_CREATE_TABLE = re.compile(
    r"^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<table>[a-z_][a-z0-9_]*)", re.IGNORECASE
)
_DROP_INDEX = re.compile(r"^\s*DROP\s+INDEX\s+(?P<concurrently>CONCURRENTLY\s+)?", re.IGNORECASE)
_ALTER_TABLE = re.compile(
    r"^\s*ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?(?P<table>[a-z_][a-z0-9_]*)\s",
    re.IGNORECASE,
)
# A CHECK or FOREIGN KEY added to a table that has rows reads all of them under
# the ACCESS EXCLUSIVE lock, unless it is added NOT VALID and validated apart.
_CONSTRAINT = re.compile(r"\bCHECK\s*\(|\bFOREIGN\s+KEY\b|\bREFERENCES\b", re.IGNORECASE)
_NOT_VALID = re.compile(r"\bNOT\s+VALID\b", re.IGNORECASE)
# Changing a column's type, or SET NOT NULL, rewrites or scans the table locked.
_REWRITE = re.compile(
    r"\bALTER\s+(?:COLUMN\s+)?[a-z_][a-z0-9_]*\s+(?:SET\s+DATA\s+)?TYPE\b|\bSET\s+NOT\s+NULL\b",
    re.IGNORECASE,
)
_VOLATILE_DEFAULT = re.compile(
    r"\bDEFAULT\s+(?:gen_random_uuid|random|clock_timestamp)\s*\(", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def label(self) -> str:
        return f"{self.version:04d}_{self.name}"

    @property
    def transactional(self) -> bool:
        return not self.sql.lstrip().startswith(NO_TRANSACTION)

    def statements(self) -> list[str]:
        return split_statements(self.sql)


def split_statements(sql: str) -> list[str]:
    """The statements of ``sql``, without comments-only pieces.

    Semicolons inside quotes, dollar-quoted bodies and comments do not split.
    """
    statements: list[str] = []
    current: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end == -1 else end
            current.append(sql[i:end])
            i = end
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end == -1 else end + 2
            current.append(sql[i:end])
            i = end
            continue
        if ch in {"'", '"'}:
            end = i + 1
            while end < n:
                if sql[end] == ch:
                    if end + 1 < n and sql[end + 1] == ch:  # a doubled quote is a quote
                        end += 2
                        continue
                    break
                end += 1
            current.append(sql[i : end + 1])
            i = end + 1
            continue
        if ch == "$":
            tag = re.match(r"\$[A-Za-z_]*\$", sql[i:])
            if tag:
                end = sql.find(tag.group(0), i + len(tag.group(0)))
                end = n if end == -1 else end + len(tag.group(0))
                current.append(sql[i:end])
                i = end
                continue
        if ch == ";":
            _flush(current, statements)
            current = []
            i += 1
            continue
        current.append(ch)
        i += 1
    _flush(current, statements)
    return statements


def _flush(parts: list[str], into: list[str]) -> None:
    text = "".join(parts).strip()
    code = "\n".join(line for line in text.splitlines() if not line.strip().startswith("--"))
    if code.strip():
        into.append(text)


def _code(statement: str) -> str:
    """``statement`` without its comment lines (the leading ones describe it)."""
    return "\n".join(
        line for line in statement.splitlines() if not line.strip().startswith("--")
    ).strip()


def concurrent_index_name(statement: str) -> str | None:
    """The index a ``CREATE INDEX CONCURRENTLY`` statement builds, else None.

    An interrupted concurrent build leaves the index behind, INVALID: ``IF NOT
    EXISTS`` would then keep the broken one, so the runner drops it first.
    """
    match = _CONCURRENT_INDEX.match(_code(statement))
    return match.group("name").lower() if match else None


def safety_problems(migration: Migration) -> list[str]:
    """What in ``migration`` would hold a lock that stops traffic on a large table.

    A table created in the same file is empty: anything goes there.
    """
    problems: list[str] = []
    created: set[str] = set()
    for statement in migration.statements():
        code = _code(statement)
        first = " ".join(code.split()[:6])
        if table := _CREATE_TABLE.match(code):
            created.add(table.group("table").lower())
            continue
        if index := _CREATE_INDEX.match(code):
            if index.group("table").lower() in created:
                continue
            if not index.group("concurrently"):
                problems.append(f"{migration.label}: {first}… builds an index without CONCURRENTLY")
            elif migration.transactional:
                problems.append(f"{migration.label}: CONCURRENTLY needs {NO_TRANSACTION}")
            continue
        if drop := _DROP_INDEX.match(code):
            if not drop.group("concurrently"):
                problems.append(f"{migration.label}: {first}… drops an index without CONCURRENTLY")
            elif migration.transactional:
                problems.append(f"{migration.label}: CONCURRENTLY needs {NO_TRANSACTION}")
            continue
        alter = _ALTER_TABLE.match(code)
        if not alter or alter.group("table").lower() in created:
            continue
        if _CONSTRAINT.search(code) and not _NOT_VALID.search(code):
            problems.append(
                f"{migration.label}: {first}… adds a constraint that reads the whole table"
                " under lock: add it NOT VALID, then VALIDATE CONSTRAINT"
            )
        if re.search(r"\bVALIDATE\s+CONSTRAINT\b", code) and migration.transactional:
            problems.append(f"{migration.label}: VALIDATE CONSTRAINT needs {NO_TRANSACTION}")
        if _REWRITE.search(code) or _VOLATILE_DEFAULT.search(code):
            problems.append(f"{migration.label}: {first}… rewrites or scans the table under lock")
    return problems


def is_concurrent(statement: str) -> bool:
    """Whether ``statement`` builds or drops an index CONCURRENTLY."""
    return bool(re.match(r"^\s*(?:CREATE|DROP)\b[^;]*?\bCONCURRENTLY\b", _code(statement), re.I))
