from __future__ import annotations

import pytest

from outbox.errors import ConfigError
from outbox.message import list_unsubscribe as unsubscribe
from outbox.token_signatures import sign

SECRET = "s3cret"


def test_token_names_the_row_and_cannot_be_forged() -> None:
    token = unsubscribe.token(1234, secret=SECRET)
    assert unsubscribe.outbox_id_from_token(token, secret=SECRET) == 1234
    assert unsubscribe.outbox_id_from_token(token.upper(), secret=SECRET) == 1234
    assert unsubscribe.outbox_id_from_token(token, secret="other") is None
    assert unsubscribe.outbox_id_from_token(token.replace("1234", "1235"), secret=SECRET) is None
    assert unsubscribe.outbox_id_from_token("", secret=SECRET) is None
    assert unsubscribe.outbox_id_from_token("0-" + "0" * 16, secret=SECRET) is None
    # A VERP signature of the same payload is not an unsubscribe signature.
    verp = f"1234-{sign(SECRET, 'verp', '1234')}"
    assert unsubscribe.outbox_id_from_token(verp, secret=SECRET) is None


def test_links_and_headers() -> None:
    token = unsubscribe.token(7, secret=SECRET)
    assert (
        unsubscribe.link("https://x.example/u", 7, secret=SECRET)
        == f"https://x.example/u?token={token}"
    )
    assert unsubscribe.link("https://x.example/u?l=en", 7, secret=SECRET).endswith(
        f"&token={token}"
    )
    headers = dict(unsubscribe.headers(7, base_url="https://x.example/u", secret=SECRET))
    assert headers == {
        "List-Unsubscribe": f"<https://x.example/u?token={token}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }


@pytest.mark.parametrize(
    ("url", "secret", "message"),
    [
        ("http://shop.example/u", SECRET, "https"),
        ("ftp://shop.example/u", SECRET, "https"),
        ("https:///u", SECRET, "https"),
        ("https://shop.example/u u", SECRET, "plain URL"),
        ("https://shop.example/u>", SECRET, "plain URL"),
        ("https://shop.example/u#top", SECRET, "fragment"),
        ("https://shop.example/u", "", "OUTBOX_SECRET"),
    ],
)
def test_bad_base_urls(url: str, secret: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        unsubscribe.check_base_url(url, secret)


def test_loopback_may_use_http() -> None:
    unsubscribe.check_base_url("http://127.0.0.1:8000/unsubscribe", SECRET)
    unsubscribe.check_base_url("https://mail.shop.example/unsubscribe", SECRET)
