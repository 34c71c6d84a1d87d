"""enqueue on every driver: the caller's transaction decides, the rows are the same."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import psycopg
import pytest
import sqlalchemy
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import outbox
from outbox.config import Settings
from outbox.db.store import data_retention
from outbox.errors import IdempotencyConflict, InvalidAddress, MissingParams, StoreError
from outbox.message.message_id import message_id
from tests.integration.drivers import ASYNC, SYNC, two_hosts
from tests.integration.helpers import LOGIN, NEWS, query

# Every column but the ones the database fills with the time or a sequence.
# Every column but those each enqueue makes its own: the id, the times, and the
# trace context (the enqueue span's, when a tracer records).
ROW = (
    "SELECT to_jsonb(o) - 'id' - 'created_at' - 'next_attempt_at' - 'trace_context' AS row,"
    " params::text FROM email_outbox o ORDER BY idempotency_key"
)


def execute(settings: Settings, sql: str) -> None:
    with psycopg.connect(settings.database_url) as conn:
        conn.execute(sql.encode())


def count(settings: Settings) -> int:
    return int(query(settings, "SELECT count(*) FROM email_outbox")[0][0])


def login(key: str = "k-1", **kw: Any) -> dict[str, Any]:
    args = {"to": "alice@example.com", "template": "login_code", "params": LOGIN}
    return {"idempotency_key": key, **args, **kw}


def news(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "idempotency_key": f"nl-{i}",
            "to": f"r{i}@example.com",
            "template": "newsletter",
            "params": NEWS,
        }
        for i in range(start, start + n)
    ]


class Base(DeclarativeBase):
    pass


class Order(Base):
    """An application's own table, for the ORM session test."""

    __tablename__ = "app_order"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str]


@pytest.fixture(params=sorted(SYNC))
def driver(request: pytest.FixtureRequest) -> Any:
    return SYNC[request.param]


@pytest.fixture(params=sorted(ASYNC))
def async_driver(request: pytest.FixtureRequest) -> Any:
    return ASYNC[request.param]


def test_commit_rollback_and_savepoint(driver: Any, settings: Settings) -> None:
    with driver(settings.database_url) as h:
        result = outbox.enqueue(h.conn, **login("rolled-back"), settings=settings)
        assert result.created
        assert count(settings) == 0  # not committed: invisible to others
        h.rollback()
        assert count(settings) == 0
        sp = h.savepoint()
        outbox.enqueue(h.conn, **login("in-savepoint"), settings=settings)
        sp.rollback()
        kept = outbox.enqueue(h.conn, **login("kept"), settings=settings)
        h.commit()
    assert [r[0] for r in query(settings, "SELECT idempotency_key FROM email_outbox")] == ["kept"]
    assert kept.message_id == message_id("kept", settings.message_id_domain, settings.secret)
    assert kept.status == "pending"


def test_every_driver_enqueues_on_a_connection_given_several_hosts(
    driver: Any, settings: Settings
) -> None:
    with driver(two_hosts(settings.database_url)) as h:
        one = outbox.enqueue(h.conn, **login(), settings=settings)
        many = outbox.enqueue_many(h.conn, news(3), settings=settings)
        h.commit()
    assert one.created
    assert all(r.created for r in many)
    assert count(settings) == 4


def test_every_async_driver_enqueues_on_a_connection_given_several_hosts(
    async_driver: Any, settings: Settings
) -> None:
    async def main() -> None:
        async with async_driver(two_hosts(settings.database_url)) as h:
            await outbox.enqueue_async(h.conn, **login(), settings=settings)
            await outbox.enqueue_many_async(h.conn, news(3), settings=settings)
            await h.commit()

    asyncio.run(main())
    assert count(settings) == 4


def test_a_known_key_returns_the_stored_row(driver: Any, settings: Settings) -> None:
    with driver(settings.database_url) as h:
        first = outbox.enqueue(h.conn, **login(), settings=settings)
        h.commit()
        again = outbox.enqueue(h.conn, **login(), settings=settings)
        h.commit()
        with pytest.raises(IdempotencyConflict, match="k-1"):
            outbox.enqueue(h.conn, **login(to="bob@example.com"), settings=settings)
        h.rollback()
    assert not again.created
    assert (again.id, again.message_id) == (first.id, first.message_id)
    assert count(settings) == 1


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"to": "not-an-address"}, InvalidAddress), ({"params": {"name": "A"}}, MissingParams)],
)
def test_bad_input_raises_the_same_error_and_writes_nothing(
    driver: Any, settings: Settings, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    with driver(settings.database_url) as h:
        with pytest.raises(error):
            outbox.enqueue(h.conn, **login(**kwargs), settings=settings)
        with pytest.raises(error, match="#1"):
            outbox.enqueue_many(h.conn, [login("a"), login("b", **kwargs)], settings=settings)
        outbox.enqueue(h.conn, **login("after"), settings=settings)  # the transaction lives on
        h.commit()
    assert count(settings) == 1


def test_enqueue_many_all_or_none(driver: Any, settings: Settings) -> None:
    with driver(settings.database_url) as h:
        outbox.enqueue_many(h.conn, news(20), settings=settings)
        h.rollback()
        assert count(settings) == 0
        sp = h.savepoint()
        outbox.enqueue_many(h.conn, news(20), settings=settings)
        sp.rollback()
        first = outbox.enqueue_many(h.conn, news(10, start=5), settings=settings)
        h.commit()
        both = outbox.enqueue_many(h.conn, news(20), settings=settings)  # ten known keys
        h.commit()
        changed = news(20)
        changed[7]["params"] = {**NEWS, "title": "Changed"}
        with pytest.raises(IdempotencyConflict, match="nl-7"):
            outbox.enqueue_many(h.conn, changed + news(5, start=20), settings=settings)
        h.commit()
    assert [r.created for r in both] == [True] * 5 + [False] * 10 + [True] * 5
    assert [r.id for r in both[5:15]] == [r.id for r in first]
    assert [r.idempotency_key for r in both] == [f"nl-{i}" for i in range(20)]
    assert count(settings) == 20


def test_suppressed_recipients_are_audit_rows_on_every_path(
    driver: Any, settings: Settings
) -> None:
    query(
        settings,
        "INSERT INTO email_suppression (address, scope, reason) VALUES"
        " ('r3@example.com', 'all', 'hard_bounce'), ('alice@example.com', 'bulk', 'unsubscribe')"
        " RETURNING address",
    )
    with driver(settings.database_url) as h:
        many = outbox.enqueue_many(h.conn, news(5), settings=settings)
        one = outbox.enqueue(h.conn, **login(), settings=settings)  # high: not suppressed
        h.commit()
    assert [r.status for r in many] == ["pending"] * 3 + ["suppressed", "pending"]
    assert one.status == "pending"


def purge_everything(settings: Settings) -> int:
    """Mark every email sent 40 days ago and purge it: only the tombstones stay."""
    query(
        settings,
        "UPDATE email_outbox SET status = 'sent', sent_at = now() - interval '40 days',"
        " created_at = now() - interval '40 days' RETURNING id",
    )
    with psycopg.connect(settings.database_url) as conn:
        return data_retention.purge(
            conn, before=dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
        ).emails


def test_a_purged_key_stays_taken_on_every_path(driver: Any, settings: Settings) -> None:
    with driver(settings.database_url) as h:
        first = outbox.enqueue(h.conn, **login("signup"), settings=settings)
        batch = outbox.enqueue_many(h.conn, news(2), settings=settings)
        h.commit()
    assert purge_everything(settings) == 3
    with driver(settings.database_url) as h:
        again = outbox.enqueue(h.conn, **login("signup"), settings=settings)
        assert (again.created, again.id, again.message_id, again.status) == (
            False,
            first.id,
            first.message_id,
            "purged",
        )
        with pytest.raises(IdempotencyConflict):
            outbox.enqueue(h.conn, **login("signup", to="bob@example.com"), settings=settings)
        with pytest.raises(IdempotencyConflict, match="nl-1"):
            outbox.enqueue_many(
                h.conn, [{**news(2)[1], "to": "z@example.com"}, *news(1, 5)], settings=settings
            )
        # Purged keys among new ones: the COPY takes them, finds their tombstones
        # and goes the multi-row way; the multi-row insert finds them at once.
        many = outbox.enqueue_many(h.conn, news(3), settings=settings)
        h.commit()
    assert [(r.created, r.status) for r in many] == [(False, "purged")] * 2 + [(True, "pending")]
    assert [(r.id, r.message_id) for r in many[:2]] == [(r.id, r.message_id) for r in batch]
    keys = query(settings, "SELECT idempotency_key FROM email_outbox ORDER BY 1")
    assert keys == [("nl-2",)]


def test_a_forgotten_address_stays_suppressed_on_every_path(
    driver: Any, settings: Settings
) -> None:
    # What `outbox forget` keeps of a suppressed address: its keyed hash alone.
    query(
        settings,
        "INSERT INTO email_suppression (address, scope, reason) VALUES"
        " (email_address_hash('R1@example.com'), 'all', 'complaint'),"
        " (email_address_hash('alice@example.com'), 'bulk', 'unsubscribe') RETURNING address",
    )
    with driver(settings.database_url) as h:
        many = outbox.enqueue_many(h.conn, news(3), settings=settings)
        login_code = outbox.enqueue(h.conn, **login(to="r1@EXAMPLE.com"), settings=settings)
        high = outbox.enqueue(h.conn, **login("k-2"), settings=settings)  # bulk only: sent
        # A known key among them: the multi-row insert looks the hash up as well.
        careful = outbox.enqueue_many(
            h.conn, [news(1)[0], {**news(1, 7)[0], "to": "r1@example.com"}], settings=settings
        )
        h.commit()
    assert [r.status for r in many] == ["pending", "suppressed", "pending"]
    assert (login_code.status, high.status) == ("suppressed", "pending")
    assert [(r.created, r.status) for r in careful] == [(False, "pending"), (True, "suppressed")]


def _rows_written_by(open_: Any, settings: Settings) -> list[tuple[Any, ...]]:
    execute(settings, "TRUNCATE email_outbox RESTART IDENTITY")
    with open_(settings.database_url) as h:
        outbox.enqueue(h.conn, **login("single", priority="high"), settings=settings)
        outbox.enqueue_many(h.conn, news(3), settings=settings)
        h.commit()
    return query(settings, ROW)


async def _rows_written_async(open_: Any, settings: Settings) -> list[tuple[Any, ...]]:
    execute(settings, "TRUNCATE email_outbox RESTART IDENTITY")
    async with open_(settings.database_url) as h:
        await outbox.enqueue_async(h.conn, **login("single", priority="high"), settings=settings)
        await outbox.enqueue_many_async(h.conn, news(3), settings=settings)
        await h.commit()
    return query(settings, ROW)


def test_every_driver_writes_the_same_rows(settings: Settings) -> None:
    written = {name: _rows_written_by(open_, settings) for name, open_ in SYNC.items()}
    for name, open_ in ASYNC.items():
        written[name] = asyncio.run(_rows_written_async(open_, settings))
    reference = written["psycopg"]
    assert len(reference) == 4
    assert reference[0][0]["params"] == NEWS
    for name, rows in written.items():
        differ = [
            (k, row[0].get(k), ref[0][k])
            for row, ref in zip(rows, reference, strict=True)
            for k in ref[0]
            if row[0].get(k) != ref[0][k]
        ]
        assert differ == [], name
        assert rows == reference, name


def test_an_asynchronous_connection_is_refused_with_the_accepted_types(
    settings: Settings,
) -> None:
    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(settings.database_url) as conn:
            with pytest.raises(TypeError, match=r"psycopg2 connection.*enqueue_async"):
                outbox.enqueue(conn, **login(), settings=settings)

    asyncio.run(main())
    with pytest.raises(TypeError, match="asyncpg Connection"):
        asyncio.run(outbox.enqueue_async(object(), **login(), settings=settings))
    with psycopg.connect(settings.database_url) as conn:
        with pytest.raises(TypeError, match="call enqueue / enqueue_many"):
            asyncio.run(outbox.enqueue_async(conn, **login(), settings=settings))
        with pytest.raises(TypeError, match="not str"):
            outbox.enqueue_many("postgresql://", [], settings=settings)


def test_a_store_failure_is_a_store_error(driver: Any, settings: Settings) -> None:
    with driver(settings.database_url) as h:
        execute(settings, "ALTER TABLE email_outbox RENAME TO email_outbox_away")
        try:
            with pytest.raises(StoreError):
                outbox.enqueue(h.conn, **login(), settings=settings)
        finally:
            h.rollback()
            execute(settings, "ALTER TABLE email_outbox_away RENAME TO email_outbox")


# Asynchronous: the same behaviour, under a real event loop.


def test_async_commit_rollback_savepoint_and_known_keys(
    async_driver: Any, settings: Settings
) -> None:
    async def main() -> None:
        async with async_driver(settings.database_url) as h:
            await outbox.enqueue_async(h.conn, **login("rolled-back"), settings=settings)
            await h.rollback()
            sp = await h.savepoint()
            await outbox.enqueue_async(h.conn, **login("in-savepoint"), settings=settings)
            await outbox.enqueue_many_async(h.conn, news(5), settings=settings)
            await sp.rollback()
            first = await outbox.enqueue_async(h.conn, **login("kept"), settings=settings)
            await h.commit()
            again = await outbox.enqueue_async(h.conn, **login("kept"), settings=settings)
            assert not again.created
            assert (again.id, again.message_id) == (first.id, first.message_id)
            with pytest.raises(InvalidAddress):
                await outbox.enqueue_async(h.conn, **login("bad", to="x@"), settings=settings)
            with pytest.raises(IdempotencyConflict):
                await outbox.enqueue_async(
                    h.conn, **login("kept", to="bob@example.com"), settings=settings
                )
            broken = news(3)
            broken[2]["to"] = "broken@"
            with pytest.raises(InvalidAddress, match="#2"):
                await outbox.enqueue_many_async(h.conn, broken, settings=settings)
            await outbox.enqueue_many_async(h.conn, news(1, start=9), settings=settings)
            await h.commit()
            with pytest.raises(IdempotencyConflict, match="nl-9"):
                await outbox.enqueue_many_async(
                    h.conn,
                    [*news(2), {**news(1, start=9)[0], "to": "z@example.com"}],
                    settings=settings,
                )
            many = await outbox.enqueue_many_async(h.conn, news(4), settings=settings)
            both = await outbox.enqueue_many_async(h.conn, news(6), settings=settings)
            await h.commit()
            assert [r.created for r in many] == [True] * 4
            assert [r.created for r in both] == [False] * 4 + [True] * 2
            assert [r.id for r in both[:4]] == [r.id for r in many]

    asyncio.run(main())
    keys = [r[0] for r in query(settings, "SELECT idempotency_key FROM email_outbox ORDER BY 1")]
    assert keys == ["kept"] + [f"nl-{i}" for i in range(6)] + ["nl-9"]


def test_async_a_purged_key_stays_taken(async_driver: Any, settings: Settings) -> None:
    async def first_round() -> list[outbox.Enqueued]:
        async with async_driver(settings.database_url) as h:
            one = await outbox.enqueue_async(h.conn, **login("signup"), settings=settings)
            many = await outbox.enqueue_many_async(h.conn, news(2), settings=settings)
            await h.commit()
            return [one, *many]

    async def second_round() -> list[outbox.Enqueued]:
        async with async_driver(settings.database_url) as h:
            one = await outbox.enqueue_async(h.conn, **login("signup"), settings=settings)
            with pytest.raises(IdempotencyConflict):
                await outbox.enqueue_async(
                    h.conn, **login("signup", to="bob@example.com"), settings=settings
                )
            many = await outbox.enqueue_many_async(h.conn, news(3), settings=settings)
            await h.commit()
            return [one, *many]

    before = asyncio.run(first_round())
    assert purge_everything(settings) == 3
    after = asyncio.run(second_round())
    assert [(r.created, r.status) for r in after] == [(False, "purged")] * 3 + [(True, "pending")]
    assert [(r.id, r.message_id) for r in after[:3]] == [(r.id, r.message_id) for r in before]
    keys = query(settings, "SELECT idempotency_key FROM email_outbox ORDER BY 1")
    assert keys == [("nl-2",)]


def test_async_concurrent_enqueues_each_in_its_own_transaction(
    async_driver: Any, settings: Settings
) -> None:
    async def one(i: int) -> outbox.Enqueued:
        async with async_driver(settings.database_url) as h:
            # Half the tasks share a key: one email for them, whoever commits first.
            key = "shared" if i % 2 else f"own-{i}"
            result = await outbox.enqueue_async(h.conn, **login(key), settings=settings)
            await asyncio.sleep(0)
            await h.commit()
            return result

    async def main() -> list[outbox.Enqueued]:
        return await asyncio.gather(*(one(i) for i in range(12)))

    results = asyncio.run(main())
    shared = [r for r in results if r.idempotency_key == "shared"]
    assert sum(r.created for r in shared) == 1
    assert len({r.id for r in shared}) == 1
    assert all(r.created for r in results if r.idempotency_key != "shared")
    assert count(settings) == 7


def test_a_session_flushes_its_pending_objects_first(settings: Settings) -> None:
    """The email is written after the business rows the session holds, in one transaction."""
    url = settings.database_url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        Base.metadata.create_all(engine)
        with Session(engine) as session:
            session.add(Order(email="alice@example.com"))
            result = outbox.enqueue(session, **login("order-1"), settings=settings)
            # Flushed before the email, in the same transaction: both seen together.
            seen = session.execute(
                sqlalchemy.text(
                    "SELECT (SELECT count(*) FROM app_order),"
                    " (SELECT count(*) FROM email_outbox WHERE id = :id)"
                ),
                {"id": result.id},
            ).one()
            assert tuple(seen) == (1, 1)
            assert not session.new
            session.rollback()
        assert count(settings) == 0
    finally:
        Base.metadata.drop_all(engine)
        engine.dispose()


def test_async_many_transactions_racing_for_one_key_get_one_email(
    async_driver: Any, settings: Settings
) -> None:
    """The key's and the Message-ID's unique indexes both decide: no race may fail."""

    async def one() -> outbox.Enqueued:
        async with async_driver(settings.database_url) as h:
            result = await outbox.enqueue_async(h.conn, **login("race"), settings=settings)
            await h.commit()
            return result

    async def main() -> list[outbox.Enqueued]:
        return await asyncio.gather(*(one() for _ in range(24)))

    results = asyncio.run(main())
    assert sum(r.created for r in results) == 1
    assert len({(r.id, r.message_id) for r in results}) == 1
    assert count(settings) == 1


SEND_AT = dt.datetime(2099, 1, 1, 9, 0, tzinfo=dt.UTC)
FIELDS_ROW = (
    "SELECT to_jsonb(o) - 'id' - 'created_at' - 'next_attempt_at' - 'status_reason'"
    " - 'locked_by' - 'trace_context', next_attempt_at = send_at"
    " FROM email_outbox o ORDER BY idempotency_key"
)
FILES_AND_EVENTS = (
    "SELECT o.idempotency_key, b.sha256, b.content FROM email_attachment_use u"
    " JOIN email_outbox o ON o.id = u.outbox_id JOIN email_attachment_blob b USING (sha256)"
    " ORDER BY 1, 2",
    "SELECT o.idempotency_key, e.to_status, e.reason, e.actor FROM email_event e"
    " JOIN email_outbox o ON o.id = e.outbox_id"
    " WHERE e.reason LIKE '%dropped%' OR e.to_status = 'cancelled' ORDER BY 1, e.id",
)


def per_message_emails() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    invoice = {"filename": "invoice.txt", "content": b"total: 7"}
    single = {
        "idempotency_key": "single",
        "to": "alice@example.com",
        "template": None,
        "subject": "Your invoice",
        "html": "<p>Total: <b>7</b></p>",
        "sender": "Billing <billing@outbox.localhost>",
        "reply_to": ["help@example.net"],
        "cc": ["erin@example.com", "gone@example.com"],  # gone: suppressed, dropped
        "bcc": "audit@example.com",
        "headers": {"X-Campaign": "spring"},
        "tags": ["invoice"],
        "metadata": {"order": 7, "paid": True},
        "send_at": SEND_AT,
        "attachments": [invoice],
    }
    batch = [
        {**news(1)[0], "idempotency_key": "nl-a", "cc": "gone@example.com", "tags": ["nl"]},
        {**news(1, 1)[0], "idempotency_key": "nl-b", "send_at": SEND_AT, "attachments": [invoice]},
        {**news(1, 2)[0], "idempotency_key": "nl-c", "reply_to": "help@example.net",
         "locale": "de", "headers": {"List-Id": "<news.example.com>"}},
    ]  # fmt: skip
    return single, batch


def _fresh(settings: Settings) -> None:
    execute(
        settings,
        "TRUNCATE email_outbox, email_event, email_attachment_use, email_attachment_blob,"
        " email_suppression RESTART IDENTITY",
    )
    execute(settings, "INSERT INTO email_suppression (address, scope, reason) VALUES"
                      " ('gone@example.com', 'all', 'hard_bounce')")  # fmt: skip


def _written(settings: Settings) -> tuple[list[Any], ...]:
    return (query(settings, FIELDS_ROW), *(query(settings, q) for q in FILES_AND_EVENTS))


def _fields_by(open_: Any, settings: Settings) -> tuple[list[Any], ...]:
    _fresh(settings)
    single, batch = per_message_emails()
    with open_(settings.database_url) as h:
        outbox.enqueue(h.conn, **single, settings=settings)
        outbox.enqueue_many(h.conn, batch, settings=settings)
        h.commit()
        done = outbox.cancel(h.conn, "nl-c", reason="withdrawn", by="shop")
        alone = outbox.cancel(h.conn, "nl-a")  # who and why left out
        h.commit()
    assert done.cancelled
    assert alone.cancelled
    return _written(settings)


async def _fields_by_async(open_: Any, settings: Settings) -> tuple[list[Any], ...]:
    _fresh(settings)
    single, batch = per_message_emails()
    async with open_(settings.database_url) as h:
        await outbox.enqueue_async(h.conn, **single, settings=settings)
        await outbox.enqueue_many_async(h.conn, batch, settings=settings)
        await h.commit()
        done = await outbox.cancel_async(h.conn, "nl-c", reason="withdrawn", by="shop")
        alone = await outbox.cancel_async(h.conn, "nl-a")  # who and why left out
        await h.commit()
    assert done.cancelled
    assert alone.cancelled
    return _written(settings)


def test_every_driver_writes_every_per_message_field_alike(settings: Settings) -> None:
    written = {name: _fields_by(open_, settings) for name, open_ in SYNC.items()}
    for name, open_ in ASYNC.items():
        written[name] = asyncio.run(_fields_by_async(open_, settings))
    rows, files, events = written["psycopg"]
    by_key = {r[0]["idempotency_key"]: r for r in rows}
    single = by_key["single"][0]
    assert (single["template"], single["subject"], single["body_html"]) == (
        "(inline)", "Your invoice", "<p>Total: <b>7</b></p>"
    )  # fmt: skip
    assert single["sender"] == "Billing <billing@outbox.localhost>"
    assert (single["reply_to"], single["cc"], single["bcc"]) == (
        ["help@example.net"], ["erin@example.com"], ["audit@example.com"]
    )  # fmt: skip
    assert (single["headers"], single["tags"], single["metadata"]) == (
        [["X-Campaign", "spring"]], ["invoice"], {"order": 7, "paid": True}
    )  # fmt: skip
    assert by_key["single"][1] is True  # scheduled: due at send_at
    assert by_key["nl-b"][1] is True  # by COPY too, which cannot compute next_attempt_at
    assert by_key["nl-a"][1] is None  # no send_at
    assert by_key["nl-a"][0]["cc"] is None  # its one cc was suppressed
    assert by_key["nl-c"][0]["status"] == "cancelled"
    assert by_key["nl-a"][0]["status"] == "cancelled"
    assert [(k, bytes(c)) for k, _, c in files] == [("nl-b", b"total: 7"), ("single", b"total: 7")]
    assert [(k, s, a) for k, s, _, a in events] == [
        ("nl-a", "pending", None), ("nl-a", "cancelled", "application"),
        ("nl-c", "cancelled", "shop"), ("single", "pending", None),
    ]  # fmt: skip
    for name, got in written.items():
        assert got == written["psycopg"], name
