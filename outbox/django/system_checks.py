"""Outbox's preflight as a Django system check: ``manage.py check`` fails where enqueue would.

The checks are the ones an application that enqueues runs (``outbox config
check`` lists them as ``app``): a setting Outbox cannot work with, such as a
weak ``OUTBOX_SECRET``, is an error with Outbox's own one line, at deploy time,
rather than a 500 at the first ``send_mail``.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.checks import Error

from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.preflight import problems

# Problems of settings.OUTBOX itself, found when the app loaded.
LOADING: list[str] = []


def outbox_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Every problem with Outbox's settings, one Error each (``outbox.E001``)."""
    found = list(LOADING)
    # Outbox in Django writes on Django's own connection and never opens
    # DATABASE_URL, which a project may well hold in a form of its own
    # (dj-database-url's postgis://): it is not this process's to judge.
    environ = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    try:
        settings = Settings.from_env(environ)
    except ConfigError as exc:
        found.append(str(exc))  # names the variable, never its value
    else:
        found.extend(problems(settings, ["app"]))
    return [
        Error(line, hint="see docs/configuration.md", obj="Outbox", id="outbox.E001")
        for line in found
    ]
