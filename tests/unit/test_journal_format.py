"""The journal's wire format and entries: pure, no Redis."""

from __future__ import annotations

import dataclasses
import re

import orjson
import pytest

from outbox.db.store import results
from outbox.delivery.journal import (
    Drop,
    commands,
    decode,
    encode,
    journal_key,
    process_of,
    resp,
)
from outbox.delivery.writer import Pending


def _record() -> results.AttemptRecord:
    return results.AttemptRecord(
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


def test_an_entry_reads_back_as_the_same_result_and_thread() -> None:
    record = _record()
    assert decode(encode("h:1:Thread-2 (work)", record)) == ("h:1:Thread-2 (work)", record)


def _positions(statement: str) -> dict[str, int]:
    """Each column a statement reads from an entry (``e->>N ... AS name``), by position."""
    found = re.findall(r"\(?e->>?(\d+)\)?(?:::\w+)?(?:, 'null'\))? AS (\w+)", statement)
    return {name: int(place) for place, name in found}


def test_record_results_reads_each_place_of_an_entry_as_the_field_it_holds() -> None:
    places = _positions(results.queries["record_results"])
    assert places == {name: i for i, name in enumerate(results.ENTRY_FIELDS)}
    refused = _positions(results.queries["suppress_refused"])
    assert refused == {n: results.ENTRY_FIELDS.index(n) for n in refused}
    assert set(refused) == {"id", "reply_code", "enhanced_status", "suppress"}


def test_an_entry_holds_every_field_of_an_attempt_after_its_worker() -> None:
    entry = orjson.loads(encode("h:1:t", _record()))
    assert results.ENTRY_FIELDS[0] == "worker"
    assert dict(zip(results.ENTRY_FIELDS, entry, strict=True)) == {
        "worker": "h:1:t",
        **dataclasses.asdict(_record()),
    }


def test_an_entry_of_an_earlier_version_still_reads_back() -> None:
    record = _record()
    pair = orjson.dumps(["h:1:Thread-2", dataclasses.asdict(record)])  # [worker, fields]
    assert decode(pair) == ("h:1:Thread-2", record)
    named = orjson.dumps({"worker": "h:1:Thread-2", **dataclasses.asdict(record)})  # an object
    assert decode(named) == ("h:1:Thread-2", record)


def test_an_entry_holds_its_texts_as_postgres_can_store_them() -> None:
    hostile = dataclasses.replace(
        _record(), reason="a\x00b", reply_text="\udcff", provider_message_id=None
    )
    stored = dataclasses.replace(hostile, reason="a\ufffdb", reply_text="\ufffd" * 3)
    assert decode(encode("h:1:t", hostile)) == ("h:1:t", stored)
    clean = _record()
    assert results.storable_attempt(clean) is clean  # no copy for a reply that needs none


@pytest.mark.parametrize("field", ["reason", "reply_text", "provider_message_id"])
@pytest.mark.parametrize(
    ("text", "stored"), [("a\x00b", "a\ufffdb"), ("x\udcff", "x\ufffd\ufffd\ufffd")]
)
def test_each_text_of_an_entry_is_made_storable(field: str, text: str, stored: str) -> None:
    hostile = dataclasses.replace(_record(), **{field: text})
    assert decode(encode("h:1:t", hostile)) == (
        "h:1:t",
        dataclasses.replace(_record(), **{field: stored}),
    )


def test_an_entry_this_version_cannot_read_is_none_not_an_error() -> None:
    assert decode(b"not json") is None
    assert decode(b'{"id": 1}') is None  # not a (thread, result) pair
    assert decode(b'["h:1:t", {"id": 1, "unknown_field": 2}]') is None
    assert decode(b'[1, {"id": 1}]') is None
    assert decode(b'["h:1:t"]') is None
    assert decode(orjson.dumps([1, *dataclasses.astuple(_record())])) is None  # no worker
    assert decode(orjson.dumps(["h:1:t", *dataclasses.astuple(_record())][:-1])) is None
    fields = dataclasses.asdict(_record())
    del fields["verdict"]
    assert decode(orjson.dumps(["h:1:t", fields])) is None


def test_keys_are_per_namespace_and_process() -> None:
    assert process_of("host:12:Thread-3 (work)") == "host:12"
    assert process_of("host:12:a:b") == "host:12"  # a thread's name may hold colons
    assert journal_key("outbox", "host:12") == "outbox:results:host:12"
    assert journal_key("a", "h:1") != journal_key("b", "h:1")


def _sent(record_id: int, worker: str = "h:1:a", entry: bytes | None = None) -> Pending:
    """A result as the journal buffers it: the writer's item, ``entry`` set if encoded."""
    item = Pending(worker, dataclasses.replace(_record(), id=record_id))
    item.entry = entry
    return item


def _key_of(worker: str) -> bytes:
    return worker.partition(":")[0].encode()  # "k:1:a" -> k: one key per host here


EXPIRE_K = resp(b"EXPIRE", b"k", b"604800")


def test_a_buffer_of_several_results_is_one_hset_with_its_expiry() -> None:
    armed: set[bytes] = set()
    out = commands([_sent(1, "k:1:a", b"one"), _sent(2, "k:1:b", b"two")], _key_of, armed)
    assert out == resp(b"HSET", b"k", b"1", b"one", b"2", b"two") + EXPIRE_K
    assert armed == {b"k"}


def test_a_key_whose_expiry_is_set_gets_none_until_a_drop_may_have_deleted_it() -> None:
    armed: set[bytes] = set()
    commands([_sent(1, "k:1:a", b"one")], _key_of, armed)
    # The hash is there with its expiry: later results add to it, no EXPIRE.
    later = commands([_sent(2, "k:1:a", b"two")], _key_of, armed)
    assert later == resp(b"HSET", b"k", b"2", b"two")
    # A drop may empty (delete) the hash: the HSET that makes it again re-arms it.
    out = commands([Drop("k:1:a", b"1 2"), _sent(3, "k:1:a", b"three")], _key_of, armed)
    assert out == resp(b"HDEL", b"k", b"1", b"2") + resp(b"HSET", b"k", b"3", b"three") + EXPIRE_K
    # A drop last: the next send's HSET carries the expiry.
    assert commands([Drop("k:1:a", b"3")], _key_of, armed) == resp(b"HDEL", b"k", b"3")
    assert armed == set()
    assert commands([_sent(4, "k:1:a", b"four")], _key_of, armed).endswith(EXPIRE_K)


def test_a_drop_keeps_its_place_between_the_results_around_it() -> None:
    # Results written before the drop, dropped, then a result after it: in that order.
    buffered = [_sent(1, "k:1:a", b"one"), Drop("k:1:b", b"1 2"), _sent(3, "k:1:a", b"three")]
    out = commands([*buffered, _sent(4, "j:1:a", b"x")], _key_of, set())
    assert out == b"".join(
        [
            resp(b"HSET", b"k", b"1", b"one"),
            EXPIRE_K,
            resp(b"HDEL", b"k", b"1", b"2"),
            resp(b"HSET", b"k", b"3", b"three"),
            EXPIRE_K,
            resp(b"HSET", b"j", b"4", b"x"),
            resp(b"EXPIRE", b"j", b"604800"),
        ]
    )


def test_a_result_is_encoded_once_when_it_is_sent_and_keeps_its_entry() -> None:
    item = _sent(7)
    out = commands([item], _key_of, set())
    assert isinstance(item.record, results.AttemptRecord)
    assert item.entry == encode("h:1:a", item.record)
    assert resp(b"HSET", b"h", b"7", item.entry) in out
    # One the writer encoded first goes as it is, never encoded again.
    kept = _sent(8, entry=b"written-first")
    assert resp(b"HSET", b"h", b"8", b"written-first") in commands([kept], _key_of, set())
    assert kept.entry == b"written-first"


def test_a_result_that_cannot_be_json_is_left_out_and_the_others_go() -> None:
    unjson = [{"address": "a@example.org", "code": 2**70}]  # beyond 64 bits: orjson refuses
    bad = Pending("h:1:a", dataclasses.replace(_record(), id=1, recipients=unjson))
    out = commands([bad, _sent(2, entry=b"two")], _key_of, set())
    assert bad.entry is None  # its thread waits for Postgres instead
    assert out == resp(b"HSET", b"h", b"2", b"two") + resp(b"EXPIRE", b"h", b"604800")


def test_a_row_handed_back_untried_is_not_journaled() -> None:
    back = Pending("h:1:a", results.Unattempted(5, "h:1:a", "transport down", 0.0))
    assert commands([back], _key_of, set()) == b""


def test_an_empty_buffer_is_no_command() -> None:
    assert commands([], _key_of, set()) == b""
