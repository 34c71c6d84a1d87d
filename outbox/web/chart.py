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
