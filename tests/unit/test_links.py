"""disallowed_scheme: the same verdict on ASCII HTML, searched lowered, as on any other."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from outbox.message.links import _url_values, disallowed_scheme

# The same link in an ASCII document and in one with a non-ASCII character,
# which is searched without lowering it first.
SAFE_OR_NOT = [
    ('<a href="https://shop.example/">x</a>', None),
    ('<a HREF="JavaScript:alert(1)">x</a>', "javascript"),
    ("<img\n  SRC = 'vbscript:msgbox(1)'>", "vbscript"),
    ("<a Href=java&#x09;script:alert(1)>x</a>", "javascript"),
    ('<svg><a XLINK:HREF="data:text/html,x">x</a></svg>', "data"),
    ('<form><button FormAction="javascript:x">go</button></form>', "javascript"),
    ('<a title="x href=javascript:1">x</a>', "javascript"),  # read as a browser never would
    ('<a href="https://shop.example/?q= src=javascript:1">x</a>', None),  # inside the URL
    ('<a href="mailto:a@shop.example">a</a> <img src="cid:logo">', None),
]


@pytest.mark.parametrize(("html", "scheme"), SAFE_OR_NOT)
def test_ascii_and_non_ascii_html_get_the_same_verdict(html: str, scheme: str | None) -> None:
    assert html.isascii()
    assert disallowed_scheme(html) == scheme
    assert disallowed_scheme("<p>Grüße, İstanbul</p>" + html) == scheme


def test_an_allowed_link_before_a_refused_one_does_not_hide_it() -> None:
    html = '<a href="https://shop.example/">a</a>\n<a href="javascript:x">b</a>'
    assert disallowed_scheme(html) == "javascript"
    assert disallowed_scheme(html + "é") == "javascript"


# What the finder must agree with on any ASCII text: the one regular expression
# it replaces for speed, run over the lowered text.
_ONE_EXPRESSION = re.compile(
    r"""\s(?:href|src|action|formaction|background|poster|xlink:href)\s*=\s*"""
    r"""("[^"]*"|'[^']*'|[^\s>]+)"""
)
_PIECES = [" ", "\t", "\n", "href", "HREF", "src", "srcset", "action", "formaction",
           "background", "poster", "xlink:href", "XLink:Href", "=", " = ", '"', "'", ">",
           "<a", "javascript:", "http:", "x", "data:", "&#x09;"]  # fmt: skip


@given(st.lists(st.sampled_from(_PIECES), max_size=30))
def test_the_finder_reads_the_values_the_one_expression_reads(pieces: list[str]) -> None:
    text = "".join(pieces)
    expected = [text[m.start(1) : m.end(1)] for m in _ONE_EXPRESSION.finditer(text.lower())]
    assert _url_values(text) == expected
