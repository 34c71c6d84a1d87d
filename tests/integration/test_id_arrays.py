"""Ids go to Postgres as an array literal (connections.id_array): Postgres reads
back the same ids, in the same order, whether the statement is prepared or not."""

from __future__ import annotations

import random

import pytest

from outbox.config import Settings
from outbox.db.store import connections

BIGINT = 2**63 - 1
IDS = [
    [],
    [1],
    [3, 1, 2],
    [BIGINT, -BIGINT - 1, 0],
    [7, 7, 7],  # a repeated id stays repeated: the statements dedupe themselves
    random.Random(40).sample(range(1, BIGINT), 500),
]


@pytest.mark.parametrize("ids", IDS, ids=lambda ids: f"{len(ids)} ids")
@pytest.mark.parametrize("prepare", [False, True])
def test_postgres_reads_the_ids_given(settings: Settings, ids: list[int], prepare: bool) -> None:
    with connections.connect(settings.database_url, autocommit=True, prepare=prepare) as conn:
        for _ in range(6):  # past psycopg's threshold: the statement is prepared
            row = conn.execute(
                "SELECT %(ids)s::bigint[]", {"ids": connections.id_array(ids)}
            ).fetchone()
            assert row == (ids,)


def test_a_generator_of_ids_is_read_once() -> None:
    assert connections.id_array(i * 10 for i in range(1, 4)) == "{10,20,30}"
