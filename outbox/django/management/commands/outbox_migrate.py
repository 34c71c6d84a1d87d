"""``manage.py outbox_migrate``: Outbox's own migrations on Django's database.

Outbox's tables are not Django models; they are created by the same migration
files as ``outbox migrate``, on a psycopg connection of their own to the
database Django's settings name (``--database``, default ``default``).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import DEFAULT_DB_ALIAS
from django.db import connections as django_connections

from outbox.db.store import connections, migration_runner
from outbox.errors import ConfigError


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no types
    help = "Create or update Outbox's tables (safe while workers run)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)

    def handle(self, *args: Any, **options: Any) -> None:
        conn = django_connections[options["database"]]
        if conn.vendor != "postgresql":
            raise ConfigError(f"Outbox needs PostgreSQL, not {conn.vendor}")
        params = conn.settings_dict
        # OPTIONS hold libpq's own parameters (sslmode, target_session_attrs for
        # several hosts) beside the driver's (isolation_level, pool…): only libpq's go.
        known = connections.libpq_keywords()
        options = {k: str(v) for k, v in (params.get("OPTIONS") or {}).items() if k in known}
        with connections.connect_params(
            dbname=params["NAME"],
            user=params.get("USER") or None,
            password=params.get("PASSWORD") or None,
            host=params.get("HOST") or None,
            port=str(params["PORT"]) if params.get("PORT") else None,
            **options,
        ) as own:
            applied = migration_runner.migrate(own)
        for name in applied:
            self.stdout.write(f"applied {name}")
        self.stdout.write("outbox schema up to date")
