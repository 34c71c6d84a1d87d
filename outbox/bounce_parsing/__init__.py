"""Bounce and complaint parsing: pure functions over raw RFC 5322 messages.

``parse_bounce(raw)`` reads delivery status notifications (RFC 3464), feedback
reports (RFC 5965), Amazon SES notifications and the plain-text bounces of MTAs that
send no standard report, and returns one :class:`BounceResult` per failed recipient.
An empty list means "not a bounce" (including auto-replies).
"""

from __future__ import annotations

from outbox.bounce_parsing.bounce_result import BounceResult
from outbox.bounce_parsing.parser import parse_bounce
from outbox.bounce_parsing.verp import token_from_address

__all__ = ["BounceResult", "parse_bounce", "token_from_address"]
