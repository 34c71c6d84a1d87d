"""What enqueue's plan runs once new rows exist (plans.after_insert), without a database."""

from __future__ import annotations

import datetime as dt
from typing import Any

from outbox.db import enqueue_statements
from outbox.db.row import Row
from outbox.fields.files import check_files
from outbox.intake import plans

FILES = check_files(
    [{"filename": "b.txt", "content": b"bbb"}, {"filename": "a.txt", "content": b"aaa"}],
    max_bytes=100,
)


def row(key: str, **fields: Any) -> Row:
    base = {
        "key": key,
        "recipient": "a@example.com",
        "template": "(inline)",
        "params": "{}",
        "content_hash": "h",
        "message_id": f"<{key}@example.com>",
        "priority": "bulk",
        "template_version": None,
    }
    return Row(**{**base, **fields})


def ran(created: list[tuple[Row, int]], *, copied: bool) -> list[enqueue_statements.Statement]:
    plan = plans.after_insert(created, copied=copied)
    ops: list[enqueue_statements.Statement] = []
    try:
        op = next(plan)
        while True:
            assert isinstance(op, enqueue_statements.Statement)
            ops.append(op)
            op = plan.send([])
    except StopIteration:
        return ops


def test_plain_rows_need_nothing_more() -> None:
    assert ran([(row("a"), 1), (row("b"), 2)], copied=True) == []
    assert ran([], copied=False) == []


def test_copies_are_checked_for_the_rows_that_have_them() -> None:
    (op,) = ran([(row("a", cc=("c@x.org",)), 1), (row("b"), 2), (row("c", bcc=("d@x.org",)), 3)],
                copied=False)  # fmt: skip
    assert op.sql == enqueue_statements.queries["drop_suppressed_copies"]
    assert op.params == {"ids": [1, 3]}


def test_only_copied_rows_are_scheduled_afterwards() -> None:
    later = dt.datetime(2099, 1, 1, tzinfo=dt.UTC)
    created = [(row("a", send_at=later), 1), (row("b"), 2)]
    assert ran(created, copied=False) == []  # the insert wrote next_attempt_at itself
    (op,) = ran(created, copied=True)
    assert (op.sql, op.params) == (enqueue_statements.queries["schedule_new"], {"ids": [1]})


def test_files_are_stored_once_each_in_hash_order_and_each_use_noted() -> None:
    blobs, uses = ran([(row("a", files=FILES), 1), (row("b", files=FILES[:1]), 2)], copied=True)
    hashes = sorted(f.sha256 for f in FILES)
    assert blobs.params["hashes"] == hashes
    by_hash = {f.sha256: f.content for f in FILES}
    assert blobs.params["contents"] == [by_hash[h] for h in hashes]
    assert sorted(zip(uses.params["ids"], uses.params["hashes"], strict=True)) == sorted(
        [(1, FILES[0].sha256), (1, FILES[1].sha256), (2, FILES[0].sha256)]
    )
