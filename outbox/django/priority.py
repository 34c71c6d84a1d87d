"""Which Django mail goes on the high queue, without touching the code that sends it.

``send_mail`` through ``outbox.django.EmailBackend`` is bulk unless something
says otherwise, in this order: the message's ``X-Outbox-Priority`` header,
then the priority of the code it is sent from:

- ``with outbox.django.high_priority():`` (or ``@outbox.django.high_priority()``
  on a function or a view) marks what is sent inside;
- ``PriorityMiddleware`` marks the views of the ``OUTBOX_HIGH_PRIORITY_VIEWS``
  setting, Django's ``PasswordResetView`` by default (and its subclasses), so
  a password reset never waits behind a newsletter, and Django's forms stay
  as they are.

A template's own ``priority`` (template.toml) still applies to mail that
names a template and is marked by nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

DEFAULT_HIGH_PRIORITY_VIEWS = ("django.contrib.auth.views.PasswordResetView",)

_PRIORITY: ContextVar[str | None] = ContextVar("outbox_django_priority", default=None)


def current() -> str | None:
    """The priority the code running now asked for; None: nobody asked."""
    return _PRIORITY.get()


@contextlib.contextmanager
def high_priority() -> Iterator[None]:
    """Mail sent inside goes on the high queue (a context manager or a decorator)."""
    token = _PRIORITY.set("high")
    try:
        yield
    finally:
        _PRIORITY.reset(token)


def listed(view: Callable[..., Any], marked: tuple[Any, ...]) -> bool:
    """Whether ``view`` (a function, or ``as_view()`` of a class) is one of ``marked``."""
    view_class = getattr(view, "view_class", None)
    if view_class is not None:
        return any(isinstance(m, type) and issubclass(view_class, m) for m in marked)
    return any(view is m for m in marked)


class PriorityMiddleware:
    """``MIDDLEWARE += ["outbox.django.PriorityMiddleware"]``: mail of listed views is high."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        from django.apps import apps  # noqa: PLC0415
        from django.conf import settings  # noqa: PLC0415
        from django.utils.module_loading import import_string  # noqa: PLC0415

        self.get_response = get_response
        names = getattr(settings, "OUTBOX_HIGH_PRIORITY_VIEWS", None)
        if names is None:  # the default, for a project that has Django's auth views at all
            auth = apps.is_installed("django.contrib.auth")
            names = DEFAULT_HIGH_PRIORITY_VIEWS if auth else ()
        self.marked = tuple(import_string(name) for name in names)

    def __call__(self, request: Any) -> Any:
        try:
            return self.get_response(request)
        finally:
            token = request.__dict__.pop("_outbox_priority", None)
            if token is not None:
                _PRIORITY.reset(token)

    def process_view(self, request: Any, view: Callable[..., Any], *args: Any) -> None:
        if listed(view, self.marked):
            request._outbox_priority = _PRIORITY.set("high")
