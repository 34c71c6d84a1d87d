"""What a console request asks for, from its form or query string (pure).

Bad input is a :class:`InvalidRequest` with a line for the page; nothing is
looked up with it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from outbox.errors import InvalidRequest

STATUSES = (
    "pending",
    "queued",
    "sending",
    "sent",
    "failed",
    "dead",
    "held",
    "suppressed",
    "cancelled",
)
PARKED = ("failed", "dead", "held")  # what a requeue sends again
PRIORITIES = ("high", "bulk")
PAGE = 50
MAX_REF = 998  # the longest line of a message: no key, id or address is longer
# A row's created_at is its enqueueing transaction's start, so ids follow
# created_at except across transactions open at once: a time filter scans ids
# this much wider than the times asked for (then checks created_at exactly).
TIME_SLACK = dt.timedelta(hours=1)
_ADDRESS = re.compile(r"[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+")
_TEMPLATE = re.compile(r"[\w.-]{1,200}")
_TAG = re.compile(r"[A-Za-z0-9_-]{1,64}")  # as enqueue takes them (outbox.fields.labels)


@dataclass(frozen=True, slots=True)
class Filters:
    status: str | None = None
    priority: str | None = None
    template: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    tag: str | None = None

    def as_query(self) -> dict[str, str]:
        """The filters as form fields, for the next page's link."""
        values = {
            "status": self.status,
            "priority": self.priority,
            "template": self.template,
            "since": _local(self.since),
            "until": _local(self.until),
            "tag": self.tag,
        }
        return {k: v for k, v in values.items() if v}


@dataclass(frozen=True, slots=True)
class Search:
    ref: str  # what was typed, trimmed; empty: list by filters alone
    address: str | None  # lower-cased, when the text is an address
    filters: Filters
    before: int | None  # keyset cursor: ids below this one


def parse_search(form: Mapping[str, str]) -> Search:
    ref = form.get("q", "").strip()
    if len(ref) > MAX_REF:
        raise InvalidRequest(f"a search is at most {MAX_REF} characters")
    address = ref.lower() if _ADDRESS.fullmatch(ref) else None
    return Search(ref, address, parse_filters(form), parse_cursor(form.get("before", "")))


def parse_filters(form: Mapping[str, str]) -> Filters:
    status = form.get("status") or None
    if status is not None and status not in STATUSES:
        raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}")
    priority = form.get("priority") or None
    if priority is not None and priority not in PRIORITIES:
        raise InvalidRequest("priority must be high or bulk")
    template = form.get("template", "").strip() or None
    if template is not None and not _TEMPLATE.fullmatch(template):
        raise InvalidRequest("a template name is letters, digits, '.', '_' and '-'")
    since = parse_time(form.get("since", ""), "since")
    until = parse_time(form.get("until", ""), "until")
    if since and until and since >= until:
        raise InvalidRequest("'since' must be before 'until'")
    tag = form.get("tag", "").strip() or None
    if tag is not None and not _TAG.fullmatch(tag):
        raise InvalidRequest("a tag is up to 64 ASCII letters, digits, _ or -")
    return Filters(status, priority, template, since, until, tag)


def parse_time(raw: str, name: str) -> dt.datetime | None:
    """``2026-12-01T14:30`` (a datetime-local field, UTC) or a full ISO 8601 time."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        when = dt.datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(f"{name} must be a time such as 2026-12-01T14:30 (UTC)") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def first_id_at(
    at: dt.datetime, low: int, high: int, created_at_of: Callable[[int], dt.datetime | None]
) -> int:
    """The first id in ``[low, high + 1]`` whose row was enqueued at ``at`` or later,
    by bisection over ids (``created_at_of(id)``: the first row from ``id`` on)."""
    lo, hi = low, high + 1
    while lo < hi:
        mid = (lo + hi) // 2
        when = created_at_of(mid)
        if when is None or when >= at:
            hi = mid
        else:
            lo = mid + 1
    return lo


def id_window(
    filters: Filters, low: int, high: int, created_at_of: Callable[[int], dt.datetime | None]
) -> tuple[int, int | None]:
    """The ids ``[first, end)`` a time filter can cover (``end`` None: up to the newest)."""
    first = (
        first_id_at(filters.since - TIME_SLACK, low, high, created_at_of) if filters.since else 0
    )
    end = (
        first_id_at(filters.until + TIME_SLACK, low, high, created_at_of) if filters.until else None
    )
    return first, end


def parse_cursor(raw: str) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    if not raw.isdigit() or len(raw) > 18:
        raise InvalidRequest("not a page of this list")
    return int(raw)


def parse_id(raw: str) -> int:
    if not raw.isdigit() or len(raw) > 18:
        raise InvalidRequest("not an email's id")
    return int(raw)


def reason_of(form: Mapping[str, str]) -> str:
    """Why an operator acts: required, one line, for the audit trail."""
    reason = " ".join(form.get("reason", "").split())
    if not reason:
        raise InvalidRequest("say why (the reason goes into the audit trail)")
    if len(reason) > 500:
        raise InvalidRequest("a reason is at most 500 characters")
    return reason


def _local(when: dt.datetime | None) -> str | None:
    if when is None:
        return None
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M")
