"""The reader's application, as the documentation's examples take it for granted.

An example uses these names without defining them, as a reader's code has its
own: ``DATABASE_URL`` (the test's database), ``create_order`` and
``refund_order`` (a business change on the connection given), and ``Order``
(an ORM model with ``email_params()``). Nothing else is given: every other
name an example uses, it imports or defines (tests/doc_examples/markdown.py
checks it).
"""

from __future__ import annotations

import os
from typing import Any

import psycopg
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

DATABASE_URL = os.environ["DATABASE_URL"]

TABLE = "CREATE TABLE IF NOT EXISTS shop_order (id serial PRIMARY KEY, email text, total text)"


def prepare() -> None:
    """The shop's table, beside the outbox's."""
    with psycopg.connect(DATABASE_URL) as conn:
        conn.execute(TABLE)


def create_order(conn: Any, *, email: str, total: str) -> int:
    """An order written in ``conn``'s transaction (psycopg 3): its id."""
    row = conn.execute(
        "INSERT INTO shop_order (email, total) VALUES (%s, %s) RETURNING id", (email, total)
    ).fetchone()
    return int(row[0])


def refund_order(conn: Any, order_id: int) -> None:
    conn.execute("UPDATE shop_order SET total = '0.00' WHERE id = %s", (order_id,))


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "shop_order"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str]
    total: Mapped[str]

    def email_params(self) -> dict[str, Any]:
        return {"name": self.email, "order_number": self.id, "items": [], "total": self.total}
