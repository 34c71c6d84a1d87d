"""A Django project's settings, for the tests of outbox.django (database from the environment)."""

from __future__ import annotations

import os

SECRET_KEY = "tests-only-not-a-secret"
INSTALLED_APPS = ["django.contrib.contenttypes", "outbox.django"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ["OUTBOX_TEST_DJANGO_DB"],
        "USER": "postgres",
        "HOST": "127.0.0.1",
        "PORT": "5432",
    }
}
EMAIL_BACKEND = "outbox.django.EmailBackend"
DEFAULT_FROM_EMAIL = "Shop <shop@outbox.localhost>"  # the From: OUTBOX_FROM is unset
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
