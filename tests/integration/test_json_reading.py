"""The pool reads json and jsonb with orjson, and reads every value as psycopg's default did."""

from __future__ import annotations

import json

import psycopg
import pytest
from psycopg.pq import Format

from outbox.config import Settings
from outbox.db.store import connections

VALUES = [
    '{"name": "Zoë", "n": 3, "ok": true, "none": null, "list": [1.5, -2, "x"]}',
    '{"big": 18446744073709551615, "small": -9223372036854775808}',
    '{"escaped": "a\\u00e9\\n\\"b\\"", "emoji": "\\ud83d\\udce7"}',
    '{"past a double": 1e400}',  # orjson refuses it: json reads it, as before
    "[]",
    '"text"',
]


@pytest.mark.parametrize("text", VALUES)
def test_jsonb_reads_as_the_json_module_reads_it(settings: Settings, text: str) -> None:
    with psycopg.connect(settings.database_url) as plain:
        expected = plain.execute("SELECT %s::jsonb, %s::json", (text, text)).fetchone()
    with (
        connections.Pool(settings.database_url, name="json-test") as pool,
        pool.connection() as conn,
    ):
        found = conn.execute("SELECT %s::jsonb, %s::json", (text, text)).fetchone()
    assert found == expected
    assert found is not None
    assert found[1] == json.loads(text)


def test_the_pool_reads_jsonb_with_orjson(settings: Settings) -> None:
    jsonb = psycopg.adapters.types["jsonb"].oid
    with (
        connections.Pool(settings.database_url, name="json-test") as pool,
        pool.connection() as conn,
    ):
        loader = conn.adapters.get_loader(jsonb, Format.TEXT)
    with psycopg.connect(settings.database_url) as plain:
        default = plain.adapters.get_loader(jsonb, Format.TEXT)
    assert loader is not None
    assert default is not None
    assert loader(jsonb, conn).load(b'{"a": 1}') == {"a": 1}
    assert getattr(loader, "_loads", None) is connections._json_loads
    assert getattr(default, "_loads", None) is json.loads  # the application's stay as they were
