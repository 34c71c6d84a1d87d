"""The KEDA ScaledObject's query (deploy/kubernetes/keda.yaml) counts the bulk pool's
due backlog on the real schema: bulk rows due or with the workers, nothing else."""

from __future__ import annotations

import psycopg

from outbox import enqueue
from outbox.config import Settings
from tests.integration.helpers import LOGIN, add_newsletter, query
from tests.unit.test_kubernetes_manifests import due_backlog_query


def test_the_scaler_counts_due_and_queued_bulk_rows_only(settings: Settings) -> None:
    ids = add_newsletter(settings, 6)
    with psycopg.connect(settings.database_url) as conn:
        enqueue(
            conn, idempotency_key="code", to="alice@example.com", template="login_code",
            params=LOGIN, priority="high", settings=settings,
        )  # fmt: skip
        conn.commit()
    backlog = due_backlog_query()
    assert query(settings, backlog) == [(6,)]
    with psycopg.connect(settings.database_url) as conn:
        change = "UPDATE email_outbox SET {} WHERE id = %s"
        conn.execute(change.format("status = 'queued'").encode(), [ids[0]])
        conn.execute(change.format("status = 'sent'").encode(), [ids[1]])
        conn.execute(
            change.format("next_attempt_at = now() + interval '1 hour'").encode(), [ids[2]]
        )
    # One queued (still counted), one sent and one scheduled later (not yet due).
    assert query(settings, backlog) == [(4,)]
