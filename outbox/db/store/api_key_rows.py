"""The HTTP API's keys: stored as a token's hash, listed, revoked, and found by
the hash of a presented token."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors
from outbox.errors import DuplicateKey, StoreError

queries = load_queries(__name__)


def create_api_key(
    conn: Conn,
    *,
    name: str,
    token_hash: str,
    prefix: str,
    scopes: Sequence[str],
    owner: str | None = None,  # None: the default owner
    operator: bool = False,  # reads and cancels every owner's emails
) -> tuple[int, dt.datetime]:
    args = {
        "name": name,
        "token_hash": token_hash,
        "prefix": prefix,
        "scopes": list(scopes),
        "owner": owner,
        "operator": operator,
    }
    try:
        row = conn.execute(queries["create_api_key"], args).fetchone()
    except psycopg.errors.UniqueViolation as exc:
        raise DuplicateKey(f"a live API key named {name!r} exists") from exc
    except psycopg.Error as exc:
        raise StoreError(f"database error: {exc}") from exc
    if row is None:
        raise StoreError("the API key was not stored")
    return int(row[0]), row[1]


def list_api_keys(conn: Conn) -> list[dict[str, Any]]:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["list_api_keys"]).fetchall()


def revoke_api_key(conn: Conn, name: str) -> bool:
    """Whether a live key of that name was there (and is revoked now)."""
    with translate_errors():
        return conn.execute(queries["revoke_api_key"], {"name": name}).fetchone() is not None


@dataclass(frozen=True, slots=True)
class FoundKey:
    id: int
    name: str
    scopes: list[str]
    owner: str | None  # None: the default owner
    operator: bool


def find_api_key(conn: Conn, token_hash: str) -> FoundKey | None:
    """The live key whose token hashes to ``token_hash``."""
    with translate_errors():
        row = conn.execute(queries["find_api_key"], {"token_hash": token_hash}).fetchone()
    if row is None:
        return None
    return FoundKey(int(row[0]), str(row[1]), list(row[2]), row[3], bool(row[4]))
