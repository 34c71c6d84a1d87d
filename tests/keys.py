"""Secrets for the tests: strong, generated per run, as OUTBOX_SECRET must be."""

from __future__ import annotations

import secrets

SECRET = secrets.token_urlsafe(32)
OTHER_SECRET = secrets.token_urlsafe(32)  # what a forger would have to guess
