"""Jinja syntax kept through MJML and the HTML-to-text conversion."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from outbox.message.compile import compile_mjml
from outbox.message.placeholders import protect
from outbox.message.plaintext import text_from_html


def test_every_construct_becomes_a_word_and_comes_back() -> None:
    source = 'a {{ x < 1 }} b {% if y %}"{{ z ~ "}" }}"{% endif %} {# note #} c'
    protected = protect(source)
    assert "{" not in protected.text
    assert protected.text.startswith("a " + protected.word(0) + " b ")
    assert protected.restore(protected.text) == source
    assert protected.missing(protected.text) == []
    assert protected.missing(protected.text.replace(protected.word(1), "")) == ["{% if y %}"]


@given(st.text(alphabet="ab{}%#jxn0123 ", max_size=60))
def test_restore_inverts_protect(source: str) -> None:
    protected = protect(source)
    assert protected.restore(protected.text) == source


def test_the_prefix_never_occurs_in_the_source() -> None:
    first = protect("{{ a }}")
    clash = protect(f"{first.prefix}0x {{{{ a }}}}")  # the author wrote a word that looks like ours
    assert clash.prefix != first.prefix
    assert clash.restore(clash.text) == f"{first.prefix}0x {{{{ a }}}}"


def test_mjml_output_keeps_jinja_in_attributes_and_text() -> None:
    html = compile_mjml(
        '<mjml><mj-body><mj-section><mj-column><mj-image src="{{ logo }}" alt="{{ alt }}"/>'
        "<mj-text>{% for i in items %}{{ i.title | upper }}{% endfor %}</mj-text>"
        "</mj-column></mj-section></mj-body></mjml>"
    )
    assert 'src="{{ logo }}"' in html
    assert 'alt="{{ alt }}"' in html
    assert "{% for i in items %}{{ i.title | upper }}{% endfor %}" in html


def test_text_from_html_drops_what_is_hidden_and_keeps_links() -> None:
    html = (
        "<html><head><title>T</title><style>p{}</style></head><body>"
        '<div style="display: none">preview line</div>'
        "<h1>Title</h1><p>Hello {{ name }},</p>"
        '<p>see <a href="{{ url }}">the offer</a>, or <a href="mailto:help@shop.example">write</a>'
        ' to <a href="https://x.example">https://x.example</a>.</p>'
        "<ul><li>one</li><li>two</li></ul>"
        "</body></html>"
    )
    assert text_from_html(html) == (
        "Title\n\nHello {{ name }},\n\n"
        "see the offer <{{ url }}>, or write <help@shop.example> to https://x.example.\n\n"
        "  * one\n  * two\n"
    )
