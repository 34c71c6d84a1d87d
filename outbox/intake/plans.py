"""The statements of an enqueue, as plans any executor runs on the caller's connection.

A plan is a generator of :mod:`outbox.db.enqueue_statements` operations: it yields
each and is sent its rows. One email is one insert (or a call of the
function ``outbox migrate`` made of it); a batch streams into the outbox by
COPY in a savepoint where it can, else takes one multi-row insert. What new
rows need once they exist (copies taken off, files stored, versions kept,
workers woken) follows in the same transaction.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from outbox.db import enqueue_statements, sql
from outbox.db.enqueue_statements import Plan, Rows
from outbox.db.row import COLUMNS, Row, named_values
from outbox.db.row import values as row_values
from outbox.errors import DuplicateKey, IdempotencyConflict, StoreError
from outbox.intake.checked_rows import Ready
from outbox.message import versions as template_versions
from outbox.message.render import Template

# A row as returned by a plan: key, id, Message-ID, created, status.
Written = tuple[str, int, str, bool, str]


def _store_versions(templates: Iterable[Template], database: object) -> Plan[None]:
    """Keep each template version in the caller's transaction until known committed."""
    for template in templates:
        if not template_versions.is_stored(database, template.version):
            written = yield template_versions.store_statement(template)
            template_versions.stored(database, template.version, written=bool(written))


def after_insert(created: Iterable[tuple[Row, int]], *, copied: bool) -> Plan[None]:
    """What new rows need once they exist, in the same transaction.

    Suppressed cc and bcc recipients are taken off (and recorded), files given
    by content are stored once each, and rows written by COPY (which cannot
    compute next_attempt_at) are scheduled for their send_at.
    """
    new = list(created)
    with_copies = [id_ for row, id_ in new if row.cc or row.bcc]
    if with_copies:
        yield enqueue_statements.drop_suppressed_copies(with_copies)
    scheduled = [id_ for row, id_ in new if row.send_at is not None]
    if copied and scheduled:
        yield enqueue_statements.schedule_new(scheduled)
    uses = [(id_, f) for row, id_ in new for f in row.files]
    if uses:
        # In hash order: transactions storing the same files wait for each other
        # in one order, so they cannot deadlock.
        files_by_hash = {f.sha256: f.content for _, f in sorted(uses, key=lambda u: u[1].sha256)}
        yield enqueue_statements.store_attachment_blobs(files_by_hash)
        yield enqueue_statements.use_attachments([(id_, f.sha256) for id_, f in uses])


def one_plan(
    row: Row, template: Template | None, database: object, *, prepares: bool
) -> Plan[tuple[Any, ...]]:
    values = named_values(row)
    found = yield from _insert(values, database, prepares=prepares)
    if not found:
        # The key exists: a new statement sees it, even when another transaction
        # inserted it after the insert's snapshot (ON CONFLICT waited for it).
        found = yield enqueue_statements.find_by_key(row.key, row.content_hash)
    if not found:
        raise StoreError(f"idempotency key {row.key!r} neither inserted nor found")
    if found[0][3]:  # created
        yield from after_insert([(row, found[0][0])], copied=False)
    # After the row, as enqueue_many does: transactions that wait on each other's
    # keys and versions take them in one order, so they cannot deadlock.
    yield from _store_versions([template] if template else [], database)
    return found[0]


# Whether a database has this release's enqueue function: True once seen (a
# running release's function is never dropped), else when to look again.
_functions: dict[tuple[object, str], bool | float] = {}
_LOOK_AGAIN_SECONDS = 60.0


def _insert(values: dict[str, Any], database: object, *, prepares: bool) -> Plan[Rows]:
    """Insert one row: insert_message, or on a driver that prepares nothing (and
    so would plan it on every call) the function ``outbox migrate`` made of it."""
    if not prepares:
        function = enqueue_statements.enqueue_function(COLUMNS, sql.schema())
        if (yield from _has_function(database, function)):
            return (yield function.call(values))
    return (yield enqueue_statements.insert_message(COLUMNS, values))


def _has_function(database: object, function: enqueue_statements.EnqueueFunction) -> Plan[bool]:
    # Only a database named by value is remembered: a connection object is not kept.
    key = (database, function.name)
    known = _functions.get(key) if isinstance(database, tuple) else None
    if known is True:
        return True
    if isinstance(known, float) and time.monotonic() < known:
        return False
    rows = yield function.exists
    there = bool(rows and rows[0][0])
    if isinstance(database, tuple):
        _functions[key] = True if there else time.monotonic() + _LOOK_AGAIN_SECONDS
    return there


def many_plan(
    rows: Iterator[Row], ready: Ready, *, copy: bool, database: object
) -> Plan[list[Written]]:
    written: list[Row] = []
    result = (yield from _copy_plan(rows, written)) if copy else None
    copied = result is not None
    if result is None:
        written.extend(rows)  # the rows not yet streamed when the COPY failed
        result = yield from _insert_rows_plan(written)
    new = [(row, w[1]) for row, w in zip(written, result, strict=True) if w[3]]
    yield from after_insert(new, copied=copied)
    # After the rows, in the same transaction: no statement may run during a COPY.
    yield from _store_versions(ready.values(), database)
    for priority in sorted({row.priority for row in written}):
        yield enqueue_statements.notify_due(priority)
    return result


def _copy_plan(rows: Iterator[Row], written: list[Row]) -> Plan[list[Written] | None]:
    """The common case, keys never seen: one COPY straight into the outbox, in a savepoint.

    A known key makes the COPY fail on the unique index, and a purged key
    (its tombstone) is found right after it: the savepoint is rolled back and
    None says to take the multi-row insert instead.
    """

    def tracked() -> Iterator[tuple[Any, ...]]:
        for row in rows:
            written.append(row)
            yield row_values(row)

    # Read before the savepoint, this also opens the caller's transaction when
    # none is open yet.
    found = yield enqueue_statements.outbox_id_mark()
    mark = int(found[0][0]) if found else 0
    yield enqueue_statements.SAVEPOINT
    try:
        yield enqueue_statements.copy_outbox(COLUMNS, tracked())
        last = yield enqueue_statements.outbox_id_last()
        copied = yield enqueue_statements.copied_rows(mark, last[0][0] if last else 0)
        if len(copied) != len(written):
            raise StoreError(f"copied {len(written)} rows but found {len(copied)}")
        if any(purged for _, _, purged in copied):
            # A purged key is a taken key, yet its row is gone, so the COPY took
            # it: undone, and the multi-row insert answers with its tombstone.
            raise DuplicateKey("an idempotency key of the batch was taken by a purged email")
        suppressed = [(id_, reason) for id_, reason, _ in copied if reason]
        if suppressed:
            ids, reasons = zip(*suppressed, strict=True)
            yield enqueue_statements.suppress_copied(ids, reasons)
    except DuplicateKey:
        yield enqueue_statements.ROLLBACK_TO_SAVEPOINT
        yield enqueue_statements.RELEASE_SAVEPOINT
        return None
    except Exception:
        # A refused row: the caller's transaction lives on.
        yield enqueue_statements.ROLLBACK_TO_SAVEPOINT
        yield enqueue_statements.RELEASE_SAVEPOINT
        raise
    yield enqueue_statements.RELEASE_SAVEPOINT
    return [
        (row.key, id_, row.message_id, True, "suppressed" if reason else "pending")
        for row, (id_, reason, _) in zip(written, copied, strict=True)
    ]


def _insert_rows_plan(rows: list[Row]) -> Plan[list[Written]]:
    """One multi-row INSERT: known keys come back as they are stored."""
    found = yield enqueue_statements.insert_rows(COLUMNS, map(row_values, rows))
    conflicts = [r[0] for r in found if r[5]]
    if conflicts:  # nothing was written
        raise IdempotencyConflict(
            "keys used before for emails with different content: " + ", ".join(conflicts[:5])
        )
    result: list[Written] = [(k, i, m, c, s) for k, i, m, c, s, _ in found]
    late = [r[0] for r in result if r[1] is None]
    if late:  # inserted by a concurrent transaction after this statement's snapshot
        hashes = {row.key: row.content_hash for row in rows}
        stored = {
            k: (i, m, s, h) for k, i, m, s, h in (yield enqueue_statements.existing_keys(late))
        }
        # A tombstone keeps the first 16 hex digits of the hash: a prefix of the same content's.
        changed = [k for k in late if k in stored and not hashes[k].startswith(stored[k][3])]
        if changed:
            raise IdempotencyConflict(
                "keys used meanwhile for emails with different content: " + ", ".join(changed[:5])
            )
        missing = [k for k in late if k not in stored]
        if missing:  # existed at the insert, gone a moment later: deleted by hand meanwhile
            raise StoreError(f"rows of keys {missing[:5]} were deleted while being enqueued")
        result = [
            r
            if r[1] is not None
            else (r[0], stored[r[0]][0], stored[r[0]][1], False, stored[r[0]][2])
            for r in result
        ]
    return result
