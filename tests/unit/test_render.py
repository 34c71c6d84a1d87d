from __future__ import annotations

import re
from pathlib import Path

import pytest

from outbox.config import PACKAGE_TEMPLATES
from outbox.errors import TemplateError, UnknownTemplate
from outbox.message.render import TemplateSet

SHIPPED = ["invoice", "login_code", "newsletter", "order_confirmation", "password_reset"]
PARAMS = {
    "name": "Alice",
    "code": "123456",
    "product": "Shop",
    "minutes": 10,
    "reset_url": "https://shop.example/reset?t=abc",
    "order_number": "1234",
    "items": [{"quantity": 2, "title": "Tea", "price": "4.00"}],
    "total": "8.00",
    "invoice_number": "INV-1",
    "amount": "8.00",
    "due_date": "2026-12-31",
    "invoice_url": "https://shop.example/i/1",
    "title": "News",
    "intro": "Hello",
    "url": "https://shop.example/news",
}
MJML = """<mjml><mj-body><mj-section><mj-column>
<mj-text>Hello {{ name }}, {{ "a" if 1 < 2 else "b" }}</mj-text>
<mj-button href="{{ url ~ "?from=mail" }}">Open</mj-button>
<mj-table>{% for row in rows %}<tr><td>{{ row }}</td></tr>{% endfor %}</mj-table>
{# a comment #}
</mj-column></mj-section></mj-body></mjml>"""


def write(root: Path, name: str, files: dict[str, str]) -> None:
    (root / name).mkdir()
    for file, content in files.items():
        (root / name / file).write_text(content)


def test_shipped_templates_render() -> None:
    templates = TemplateSet(PACKAGE_TEMPLATES)
    assert templates.names() == SHIPPED
    for name in SHIPPED:
        template = templates.get(name)
        rendered = templates.render(name, {k: PARAMS[k] for k in template.variables})
        assert rendered.subject
        assert "\n" not in rendered.subject
        assert rendered.text.strip()
        assert "{{" not in rendered.text
        assert rendered.html is not None
        assert rendered.html.startswith("<!doctype html><html")
        assert "{{" not in rendered.html
        # Nothing loads from a third party (MJML adds web fonts unless told not to).
        assert "fonts.googleapis" not in rendered.html
        assert not re.search(r"<(link|script)\b", rendered.html)


def test_shipped_templates_keep_their_params() -> None:
    templates = TemplateSet(PACKAGE_TEMPLATES)
    expected = {
        "login_code": {"name", "code", "product", "minutes"},
        "password_reset": {"name", "product", "minutes", "reset_url"},
        "order_confirmation": {"name", "order_number", "items", "total"},
        "invoice": {"name", "invoice_number", "amount", "due_date", "invoice_url", "product"},
        "newsletter": {"name", "title", "intro", "url"},
    }
    for name, variables in expected.items():
        template = templates.get(name)
        assert template.variables == variables, name
        assert set(template.example) >= variables, name  # previews and checks can render it
    assert templates.get("login_code").priority == "high"
    assert templates.get("newsletter").priority == "bulk"


def test_html_is_escaped_text_is_not(tmp_path: Path) -> None:
    write(
        tmp_path,
        "t",
        {"subject.txt": "Hi {{ n }}", "body.txt": "{{ n }}", "body.html": "<p>{{ n }}</p>"},
    )
    rendered = TemplateSet(tmp_path).render("t", {"n": "<script>x</script> & co"})
    assert rendered.html == "<p>&lt;script&gt;x&lt;/script&gt; &amp; co</p>"
    assert rendered.text == "<script>x</script> & co"


def test_jinja_survives_mjml_in_text_attributes_and_statements(tmp_path: Path) -> None:
    write(tmp_path, "t", {"subject.txt": "Hi", "body.mjml": MJML})
    template = TemplateSet(tmp_path).get("t")
    assert template.compiled_html is not None
    assert '{{ url ~ "?from=mail" }}' in template.compiled_html
    assert '{{ "a" if 1 < 2 else "b" }}' in template.compiled_html
    assert template.variables == {"name", "url", "rows"}
    rendered = template.render({"name": "Bo", "url": "https://x.example/p", "rows": ["r1", "r2"]})
    assert rendered.html is not None
    assert 'href="https://x.example/p?from=mail"' in rendered.html
    assert "Hello Bo, a" in rendered.html
    assert "<td>r1</td></tr><tr><td>r2</td>" in rendered.html
    assert "a comment" not in rendered.html


def test_params_cannot_inject_markup_into_mjml_output(tmp_path: Path) -> None:
    write(tmp_path, "t", {"subject.txt": "Hi", "body.mjml": MJML})
    evil = '"><script>alert(1)</script>'
    rendered = TemplateSet(tmp_path).render("t", {"name": evil, "url": evil, "rows": [evil]})
    assert rendered.html is not None
    assert "<script>" not in rendered.html
    assert 'href="&#34;&gt;&lt;script&gt;' in rendered.html
    assert evil in rendered.text  # the text part shows it as written


def test_text_part_is_derived_from_the_html_with_links(tmp_path: Path) -> None:
    write(tmp_path, "t", {"subject.txt": "Hi", "body.mjml": MJML})
    template = TemplateSet(tmp_path).get("t")
    assert template.text_derived
    text = template.render({"name": "Bo", "url": "https://x.example/p", "rows": ["r1", "r2"]}).text
    assert text == "Hello Bo, a\n\nOpen <https://x.example/p?from=mail>\n\nr1\nr2\n"


def test_shipped_derived_text_reads_well() -> None:
    templates = TemplateSet(PACKAGE_TEMPLATES)
    order = templates.get("order_confirmation")
    text = order.render(order.example).text
    assert text == (
        "Hello Alice,\n\nthank you for your order 1234.\n\n"
        "2 \u00d7 Green tea 8.00\n1 \u00d7 Teapot 12.00\n\nTotal: 20.00\n"
    )
    news = templates.get("newsletter")
    with_link = news.render(news.example, {"unsubscribe_url": "https://u.example/?token=1"}).text
    assert "Read more <https://shop.example/news/december>" in with_link
    assert with_link.endswith("Unsubscribe <https://u.example/?token=1>\n")
    assert "Unsubscribe" not in news.render(news.example).text


def test_compiled_once_per_version(tmp_path: Path) -> None:
    write(tmp_path, "t", {"subject.txt": "Hi", "body.mjml": MJML})
    templates = TemplateSet(tmp_path)
    first = templates.get("t")
    assert templates.get("t") is first
    assert templates.cached_version(first.version) is first
    assert re.fullmatch(r"[0-9a-f]{32}", first.version)
    # Another directory with the same files has the same version; a change makes a new one.
    write(tmp_path, "u", {"subject.txt": "Hi", "body.mjml": MJML})
    write(tmp_path, "v", {"subject.txt": "Hi!", "body.mjml": MJML})
    assert templates.get("u").version == first.version
    assert templates.get("v").version != first.version


def test_a_stored_version_renders_without_the_directory(tmp_path: Path) -> None:
    write(tmp_path, "t", {"subject.txt": "Old {{ n }}", "body.mjml": MJML})
    old = TemplateSet(tmp_path).get("t")
    fresh = TemplateSet(tmp_path / "elsewhere")
    again = fresh.from_stored("t", old.version, old.files, old.compiled_html, old.compiled_text)
    params = {"n": "1", "name": "Bo", "url": "https://x.example", "rows": []}
    assert again.render(params) == old.render(params)
    assert again.variables == old.variables
    assert fresh.cached_version(old.version) is again


def test_subject_is_always_one_line(tmp_path: Path) -> None:
    write(tmp_path, "t", {"subject.txt": "Order {{ n }}\n\n", "body.txt": "x"})
    rendered = TemplateSet(tmp_path).render("t", {"n": "1\r\nBcc: victim@example.com"})
    assert rendered.subject == "Order 1 Bcc: victim@example.com"


def test_missing_variable_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "t", {"subject.txt": "x", "body.txt": "{{ user.name }}"})
    with pytest.raises(TemplateError, match="name"):
        TemplateSet(tmp_path).render("t", {"user": {}})


def test_variables_are_found(tmp_path: Path) -> None:
    write(
        tmp_path,
        "t",
        {
            "subject.txt": "{{ a }}",
            "body.txt": "{% for i in items %}{{ i }}{% endfor %}{{ b }}",
            "body.html": "{{ c }}"
            "{% if unsubscribe_url is defined %}{{ unsubscribe_url }}{% endif %}",
        },
    )
    template = TemplateSet(tmp_path).get("t")
    assert template.variables == {"a", "b", "c", "items"}  # unsubscribe_url is the sender's
    assert template.subject_variables == {"a"}
    assert template.html is not None


def test_metadata(tmp_path: Path) -> None:
    meta = 'priority = "high"\nrequired = ["extra"]\n[example]\nn = "x"\n'
    write(tmp_path, "t", {"subject.txt": "{{ n }}", "body.txt": "x", "template.toml": meta})
    template = TemplateSet(tmp_path).get("t")
    assert template.priority == "high"
    assert template.variables == {"n", "extra"}
    assert template.example == {"n": "x"}


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ('priority = "urgent"', "priority"),
        ("colour = 1", "unknown keys"),
        ("required = 3", "required"),
        ("example = 3", "example"),
        ("priority = ", "template.toml"),
    ],
)
def test_bad_metadata(tmp_path: Path, meta: str, message: str) -> None:
    write(tmp_path, "t", {"subject.txt": "x", "body.txt": "x", "template.toml": meta})
    with pytest.raises(TemplateError, match=message):
        TemplateSet(tmp_path).get("t")


def test_broken_and_incomplete_templates(tmp_path: Path) -> None:
    write(tmp_path, "broken", {"subject.txt": "{{ a", "body.txt": "x"})
    write(tmp_path, "nobody", {"subject.txt": "x"})
    write(tmp_path, "both", {"subject.txt": "x", "body.mjml": MJML, "body.html": "<p>x</p>"})
    write(tmp_path, "badmjml", {"subject.txt": "x", "body.mjml": "<mjml><mj-body><mj-text>"})
    write(tmp_path, "badjinja", {"subject.txt": "x", "body.mjml": MJML.replace("{% endfor %}", "")})
    templates = TemplateSet(tmp_path)
    with pytest.raises(TemplateError):
        templates.get("broken")
    with pytest.raises(TemplateError, match=r"body\.txt"):
        templates.get("nobody")
    with pytest.raises(TemplateError, match="keep one"):
        templates.get("both")
    with pytest.raises(TemplateError, match=r"'badmjml' body\.mjml"):
        templates.get("badmjml")
    with pytest.raises(TemplateError, match="'badjinja' HTML part"):
        templates.get("badjinja")
    with pytest.raises(UnknownTemplate):
        templates.get("Bad Name")
