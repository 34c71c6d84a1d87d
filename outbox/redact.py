"""Recipient addresses as they may appear in logs and traces (pure)."""

from __future__ import annotations

import hashlib


def recipient_tag(address: str) -> str:
    """A stable, non-reversible tag that keeps the domain: ``3f2a9c1e@example.com``.

    The domain tells an operator which receiver is involved; the hash lets
    them match log lines for one recipient without ever seeing the address.
    """
    local, _, domain = address.rpartition("@")
    digest = hashlib.sha256(address.lower().encode("utf-8")).hexdigest()[:12]
    return f"{digest}@{domain.lower()}" if local else digest
