"""Sends per minute as an inline SVG bar chart (pure): no script, no asset."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

WIDTH, HEIGHT = 600, 120


def sends_chart(per_minute: Mapping[int, int], *, now_minute: int, minutes: int = 60) -> str:
    """One bar per minute of the last ``minutes`` (keys are unix minutes), newest right."""
    first = now_minute - minutes + 1
    counts = [per_minute.get(first + i, 0) for i in range(minutes)]
    top = max(counts) or 1
    step = WIDTH / minutes
    bars = []
    for i, count in enumerate(counts):
        height = round(count / top * (HEIGHT - 20), 1)
        if count:
            bars.append(
                f'<rect x="{i * step + 1:.1f}" y="{HEIGHT - height:.1f}" '
                f'width="{step - 2:.1f}" height="{height}" fill="#2563eb">'
                f"<title>{count} sent, {minutes - i - 1} min ago</title></rect>"
            )
    total = sum(counts)
    label = escape(f"{total} sent in the last {minutes} minutes; busiest minute {max(counts)}")
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{label}" '
        f'preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg">'
        f'<line x1="0" y1="{HEIGHT}" x2="{WIDTH}" y2="{HEIGHT}" stroke="#9ca3af"/>'
        + "".join(bars)
        + "</svg>"
    )


# Sent, failed and bounced, stacked in this order from the bottom.
KINDS = (("sent", "#2563eb"), ("failed", "#b91c1c"), ("bounced", "#d97706"))


def hourly_chart(
    per_hour: Mapping[int, Mapping[str, int]],
    *,
    now_hour: int,
    hours: int = 24,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """One stacked bar per hour of the last ``hours`` (keys are unix hours), newest
    right: sent, failed and bounced (``per_hour[hour][kind]``)."""
    first = now_hour - hours + 1
    columns = [per_hour.get(first + i, {}) for i in range(hours)]
    top = max((sum(c.get(k, 0) for k, _ in KINDS) for c in columns), default=0) or 1
    step = width / hours
    bars = []
    for i, column in enumerate(columns):
        base = float(height)
        for kind, colour in KINDS:
            count = column.get(kind, 0)
            if not count:
                continue
            tall = round(count / top * (height - 10), 1)
            base -= tall
            bars.append(
                f'<rect x="{i * step + 1:.1f}" y="{base:.1f}" width="{step - 2:.1f}" '
                f'height="{tall}" fill="{colour}"><title>{count} {kind}, '
                f"{hours - i - 1} h ago</title></rect>"
            )
    totals = {k: sum(c.get(k, 0) for c in columns) for k, _ in KINDS}
    label = escape(f"last {hours} hours: " + ", ".join(f"{n} {k}" for k, n in totals.items()))
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{label}" '
        f'preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg">'
        f'<line x1="0" y1="{height}" x2="{width}" y2="{height}" stroke="#9ca3af"/>'
        + "".join(bars)
        + "</svg>"
    )
