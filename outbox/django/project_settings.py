"""Outbox's settings from a Django project's ``settings.py``.

``OUTBOX = {"OUTBOX_FROM": "Shop <shop@example.com>", "OUTBOX_SECRET": env("…")}``
maps Outbox's setting names (the environment variables of
docs/configuration.md) to values. The environment still wins: a variable set
there is what every process of the deployment reads, the application's too,
so a value in ``settings.py`` only fills what the environment leaves unset.
``DEFAULT_FROM_EMAIL``, when the project sets it, is the From of new emails
unless ``OUTBOX_FROM`` is given either way.

The values are put into this process's environment when the app loads
(where it has none), before anything reads a setting: Outbox's one
reader of settings (:mod:`outbox.config`) and the schema its statements are
named in then see the same values, and so do the processes Django starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from outbox.config import ENV_NAMES, Settings, default_settings

NAMES = frozenset(ENV_NAMES.get(f.name, f"OUTBOX_{f.name.upper()}") for f in fields(Settings))
_VALUES = (str, int, float, Path)


def merged(
    outbox: Any, default_from: str | None, environ: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """(the variables to add to ``environ``, the problems with ``OUTBOX``), pure.

    ``outbox`` is the project's ``OUTBOX`` setting; ``default_from`` its
    ``DEFAULT_FROM_EMAIL`` when the project sets one (None: Django's own default,
    ``webmaster@localhost``, which is no address to send from).
    """
    if outbox is None:
        outbox = {}
    if not isinstance(outbox, Mapping):
        return {}, ["settings.OUTBOX must be a dict of Outbox setting names to values"]
    added: dict[str, str] = {}
    problems: list[str] = []
    for name, value in outbox.items():
        if name not in NAMES:
            problems.append(
                f"settings.OUTBOX: {name!r} is no Outbox setting (see docs/configuration.md)"
            )
        elif isinstance(value, bool) or not isinstance(value, _VALUES):
            problems.append(f"settings.OUTBOX[{name!r}] must be a string or a number")
        elif not environ.get(name):  # the environment wins
            added[name] = str(value)
    if default_from and not environ.get("OUTBOX_FROM") and "OUTBOX_FROM" not in added:
        added["OUTBOX_FROM"] = default_from
    return added, problems


def apply(django_settings: Any, environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Fill the environment from the project's settings; the problems with ``OUTBOX``."""
    environ = os.environ if environ is None else environ
    default_from = None
    if django_settings.is_overridden("DEFAULT_FROM_EMAIL"):
        default_from = django_settings.DEFAULT_FROM_EMAIL
    added, problems = merged(getattr(django_settings, "OUTBOX", None), default_from, environ)
    environ.update(added)  # only names the environment leaves unset or empty
    default_settings.cache_clear()  # read again, with these
    return problems
