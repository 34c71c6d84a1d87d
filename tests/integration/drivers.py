"""Every kind of connection enqueue takes, opened the way an application would.

Each handle gives the connection to pass to enqueue and the caller's own
transaction control (commit, rollback, a savepoint rolled back), in the
driver's own words.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import psycopg
import psycopg2
import sqlalchemy
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool


@dataclass
class Handle:
    conn: Any
    commit: Callable[[], None]
    rollback: Callable[[], None]
    savepoint: Callable[[], Any]  # opens one; the returned object's rollback() undoes it


@dataclass
class AsyncHandle:
    conn: Any
    commit: Callable[[], Awaitable[None]]
    rollback: Callable[[], Awaitable[None]]
    savepoint: Callable[[], Awaitable[Any]]


def _sa_url(url: str, driver: str) -> str:
    """SQLAlchemy's form of ``url``: several hosts go in the query, one ``host=`` each
    (its URL parser reads one host and one port only)."""
    parts = urlsplit(url.replace("postgresql://", f"postgresql+{driver}://", 1))
    userinfo, _, hosts = parts.netloc.rpartition("@")
    if "," not in hosts:
        return urlunsplit(parts)
    query = "&".join([*(f"host={h}" for h in hosts.split(",")), *filter(None, [parts.query])])
    return urlunsplit(parts._replace(netloc=f"{userinfo}@" if userinfo else "", query=query))


def two_hosts(url: str) -> str:
    """``url`` with its host given twice and ``target_session_attrs=read-write``: the
    form a primary and its standby take, both here the one server."""
    parts = urlsplit(url)
    userinfo, _, host = parts.netloc.rpartition("@")
    query = "&".join(filter(None, [parts.query, "target_session_attrs=read-write"]))
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{host},{host}", query=query))


class _Psycopg2Savepoint:
    def __init__(self, conn: Any) -> None:
        self.conn = conn
        with conn.cursor() as cur:
            cur.execute("SAVEPOINT test_sp")

    def rollback(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute("ROLLBACK TO SAVEPOINT test_sp")


class _PsycopgSavepoint:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        conn.execute("SAVEPOINT test_sp")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK TO SAVEPOINT test_sp")


@contextlib.contextmanager
def open_psycopg(url: str) -> Iterator[Handle]:
    with psycopg.connect(url) as conn:
        yield Handle(conn, conn.commit, conn.rollback, lambda: _PsycopgSavepoint(conn))


@contextlib.contextmanager
def open_psycopg2(url: str) -> Iterator[Handle]:
    conn = psycopg2.connect(url)
    try:
        yield Handle(conn, conn.commit, conn.rollback, lambda: _Psycopg2Savepoint(conn))
    finally:
        conn.close()


def _sa_connection(driver: str) -> Callable[[str], contextlib.AbstractContextManager[Handle]]:
    @contextlib.contextmanager
    def open_(url: str) -> Iterator[Handle]:
        engine = sqlalchemy.create_engine(_sa_url(url, driver), poolclass=NullPool)
        try:
            with engine.connect() as conn:
                yield Handle(conn, conn.commit, conn.rollback, conn.begin_nested)
        finally:
            engine.dispose()

    return open_


def _sa_session(driver: str) -> Callable[[str], contextlib.AbstractContextManager[Handle]]:
    @contextlib.contextmanager
    def open_(url: str) -> Iterator[Handle]:
        engine = sqlalchemy.create_engine(_sa_url(url, driver), poolclass=NullPool)
        try:
            with Session(engine) as session:
                yield Handle(session, session.commit, session.rollback, session.begin_nested)
        finally:
            engine.dispose()

    return open_


SYNC = {
    "psycopg": open_psycopg,
    "psycopg2": open_psycopg2,
    "sqlalchemy+psycopg": _sa_connection("psycopg"),
    "sqlalchemy+psycopg2": _sa_connection("psycopg2"),
    "session+psycopg": _sa_session("psycopg"),
    "session+psycopg2": _sa_session("psycopg2"),
}


class _AsyncRawSavepoint:
    def __init__(self, run: Callable[[str], Awaitable[Any]]) -> None:
        self.run = run

    async def rollback(self) -> None:
        await self.run("ROLLBACK TO SAVEPOINT test_sp")


@contextlib.asynccontextmanager
async def open_async_psycopg(url: str) -> AsyncIterator[AsyncHandle]:
    conn = await psycopg.AsyncConnection.connect(url)
    try:

        async def savepoint() -> Any:
            await conn.execute("SAVEPOINT test_sp")
            return _AsyncRawSavepoint(conn.execute)

        yield AsyncHandle(conn, conn.commit, conn.rollback, savepoint)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def open_asyncpg(url: str) -> AsyncIterator[AsyncHandle]:
    """asyncpg's transactions are explicit: the handle keeps one open, like a web request."""
    conn = await asyncpg.connect(url)
    state: dict[str, Any] = {}

    async def begin() -> None:
        state["tx"] = conn.transaction()
        await state["tx"].start()

    async def commit() -> None:
        await state["tx"].commit()
        await begin()

    async def rollback() -> None:
        await state["tx"].rollback()
        await begin()

    async def savepoint() -> Any:
        await conn.execute("SAVEPOINT test_sp")
        return _AsyncRawSavepoint(conn.execute)

    try:
        await begin()
        yield AsyncHandle(conn, commit, rollback, savepoint)
    finally:
        if conn.is_in_transaction():
            await state["tx"].rollback()
        await conn.close()


def _sa_async_connection(driver: str) -> Callable[[str], Any]:
    @contextlib.asynccontextmanager
    async def open_(url: str) -> AsyncIterator[AsyncHandle]:
        engine = create_async_engine(_sa_url(url, driver), poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                yield AsyncHandle(conn, conn.commit, conn.rollback, conn.begin_nested)
        finally:
            await engine.dispose()

    return open_


def _sa_async_session(driver: str) -> Callable[[str], Any]:
    @contextlib.asynccontextmanager
    async def open_(url: str) -> AsyncIterator[AsyncHandle]:
        engine = create_async_engine(_sa_url(url, driver), poolclass=NullPool)
        try:
            async with AsyncSession(engine) as session:
                yield AsyncHandle(session, session.commit, session.rollback, session.begin_nested)
        finally:
            await engine.dispose()

    return open_


ASYNC = {
    "async psycopg": open_async_psycopg,
    "asyncpg": open_asyncpg,
    "async sqlalchemy+psycopg": _sa_async_connection("psycopg"),
    "async sqlalchemy+asyncpg": _sa_async_connection("asyncpg"),
    "async session+asyncpg": _sa_async_session("asyncpg"),
}
