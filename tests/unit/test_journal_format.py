"""The journal's wire format and entries: pure, no Redis."""

from __future__ import annotations

import dataclasses

import orjson

from outbox.db import store
from outbox.delivery.journal import decode, encode, journal_key, resp


def _record() -> store.AttemptRecord:
    return store.AttemptRecord(
        id=7,
        attempt=2,
        status="sent",
        reason="accepted",
        delay_seconds=0.0,
        provider_message_id="Q1",
        verdict="sent",
        stage="body",
        reply_code=250,
        enhanced_status="2.0.0",
        reply_text="2.0.0 Ok: queued as Q1 \u00e9",
        duration_ms=3.5,
        transport="smtp",
        recipients=[{"address": "a@example.org", "kind": "cc", "code": 250, "text": "ok"}],
    )


def test_resp_is_an_array_of_bulk_strings_with_byte_lengths() -> None:
    assert resp(b"DEL", b"k") == b"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"
    assert resp(b"HSET", b"k", b"7", "\u00e9".encode()) == (
        b"*4\r\n$4\r\nHSET\r\n$1\r\nk\r\n$1\r\n7\r\n$2\r\n\xc3\xa9\r\n"
    )
    assert resp(b"SET", b"k", b"") == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"


def test_an_entry_reads_back_as_the_same_result() -> None:
    record = _record()
    assert decode("h:1:t", encode(record)) == ("h:1:t", record)


def test_an_entry_this_version_cannot_read_is_none_not_an_error() -> None:
    assert decode("h:1:t", b"not json") is None
    assert decode("h:1:t", b'{"id": 1, "unknown_field": 2}') is None
    fields = dataclasses.asdict(_record())
    del fields["verdict"]
    assert decode("h:1:t", orjson.dumps(fields)) is None


def test_keys_are_per_namespace_and_thread() -> None:
    assert journal_key("outbox", "host:12:Thread-3") == "outbox:results:host:12:Thread-3"
    assert journal_key("a", "w") != journal_key("b", "w")
