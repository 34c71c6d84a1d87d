"""The test project configured as a shop would: Outbox's settings in settings.py.

``OUTBOX`` gives settings the environment may override; ``DEFAULT_FROM_EMAIL``
is the From when ``OUTBOX_FROM`` is given nowhere; Django's password reset runs
through ``PriorityMiddleware``, which puts its mail on the high queue.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.django_project.settings import *  # noqa: F403
from tests.django_project.settings import INSTALLED_APPS

INSTALLED_APPS = ["django.contrib.auth", *INSTALLED_APPS, "tests.django_project.shop"]
OUTBOX = {
    "OUTBOX_MESSAGE_ID_DOMAIN": "shop.example",
    "OUTBOX_SENDER_DOMAINS": "shop.example,outbox.localhost",
}
MIDDLEWARE = ["outbox.django.PriorityMiddleware"]
ROOT_URLCONF = "tests.django_project.urls"
ALLOWED_HOSTS = ["testserver"]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).with_name("templates")],
    }
]
# A test adds entries here to see them refused (a JSON object; empty: none).
OUTBOX.update(json.loads(os.environ.get("OUTBOX_TEST_DJANGO_EXTRA") or "{}"))
