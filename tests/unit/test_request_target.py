"""A request target's path and query, as `outbox web` routes them."""

from __future__ import annotations

import pytest

from outbox.web.server import split_target


@pytest.mark.parametrize(
    ("target", "path", "query"),
    [
        ("/healthz", "/healthz", ""),
        ("/unsubscribe?token=abc&x=1", "/unsubscribe", "token=abc&x=1"),
        ("/a?b#c", "/a", "b"),
        ("//[", "//[", ""),  # urlsplit raises here: "Invalid IPv6 URL"
        ("//webhooks/postmark", "//webhooks/postmark", ""),  # urlsplit: host "webhooks"
        ("/x??y", "/x", "?y"),
        ("", "", ""),
    ],
)
def test_the_path_is_everything_before_the_first_question_mark(
    target: str, path: str, query: str
) -> None:
    assert split_target(target) == (path, query)
