"""``outbox templates check`` and ``outbox templates preview``: no database, no network.

A preview is composed exactly as a worker composes a message (headers,
attachments, DKIM when configured), from the directory's current version.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from outbox.config import Settings
from outbox.db.store import connections, sending
from outbox.errors import InvalidParams, MissingParams, OutboxError
from outbox.fields.locales import check_locale, fallbacks
from outbox.message import attachments
from outbox.message.compose import composer
from outbox.message.message_id import message_id
from outbox.message.render import Template, template_set
from outbox.validate import (
    check_params_for,
    check_params_shape,
    check_priority,
    dump_params,
    normalize_address,
)

PREVIEW_ID = 0


@dataclass(frozen=True, slots=True)
class Checked:
    name: str
    version: str | None  # None when it failed
    problem: str | None
    rendered_example: bool


def check(settings: Settings) -> list[Checked]:
    """Compile every template and each of its language variants; render each with its
    example params when it has them.

    A variant that uses a param its default files do not is a problem too: a
    caller who passes what the default needs would get MissingParams for that
    language only.
    """
    templates = template_set(settings.templates)
    results = []
    for name in templates.names():
        default: Template | None = None
        for variant in [None, *templates.variants(name)]:
            label = name if variant is None else f"{name}/{variant}"
            try:
                template = templates.get(name, variant)
                if template.example:
                    check_params_for(template, dict(template.example))
                    template.render(template.example)
                if variant is None:
                    default = template
                elif default is not None and template.variables - default.variables:
                    extra = ", ".join(sorted(template.variables - default.variables))
                    raise MissingParams(f"uses params the default files do not: {extra}")
            except OutboxError as exc:
                results.append(Checked(label, None, str(exc), rendered_example=False))
                continue
            results.append(Checked(label, template.version, None, bool(template.example)))
    return results


@dataclass(frozen=True, slots=True)
class Preview:
    eml: Path
    html: Path | None  # None for a template without an HTML part


def preview(
    settings: Settings,
    name: str,
    params: Mapping[str, Any] | None,
    *,
    out_dir: Path,
    to: str = "recipient@example.com",
    priority: str | None = None,
    locale: str | None = None,
) -> Preview:
    """Write ``NAME.eml`` (the whole message) and ``NAME.html`` (its HTML part).

    With ``locale``, the language folder an enqueue with that locale would use.
    """
    templates = template_set(settings.templates)
    tag = check_locale(locale)
    variant = templates.pick(name, fallbacks(tag)) if tag else None
    template = templates.get(name, variant)
    if params is not None and not isinstance(params, Mapping):
        raise InvalidParams("--params must be a JSON object")
    chosen = dict(template.example if params is None else params)
    dump_params(chosen, max_bytes=settings.max_params_bytes)
    check_params_for(template, chosen)
    check_params_shape(template, chosen)
    attachments.references(
        chosen, directory=settings.attachments_dir, max_bytes=settings.max_attachment_bytes
    )
    now = dt.datetime.now(dt.UTC)
    row = sending.OutboxRow(
        # No row has id 0 (ids start at 1): the preview's unsubscribe link and
        # VERP return path name no one, so a preview cannot unsubscribe a customer.
        id=PREVIEW_ID,
        idempotency_key=f"preview-{name}",
        recipient=normalize_address(to),
        template=name,
        params=chosen,
        message_id=message_id(f"preview-{name}", settings.message_id_domain, settings.secret),
        priority=check_priority(priority or template.priority or "bulk").value,
        attempts=0,
        created_at=now,
        age_from=now,
        template_version=template.version,
        locale=variant,
    )
    mail = composer(settings)
    data = mail.message(row, to=row.recipient, connect=_NoDatabase)
    out_dir.mkdir(parents=True, exist_ok=True)
    eml = out_dir / f"{name}.eml"
    eml.write_bytes(data)
    html = mail.render(row, _NoDatabase).html
    if html is None:
        return Preview(eml, None)
    html_path = out_dir / f"{name}.html"
    html_path.write_text(html, "utf-8")
    return Preview(eml, html_path)


class _NoDatabase(AbstractContextManager[connections.Conn]):
    """A preview renders the current version, which never needs the database."""

    def __enter__(self) -> connections.Conn:
        raise OutboxError("a preview does not read the database")

    def __exit__(self, *exc: object) -> None:
        return None
