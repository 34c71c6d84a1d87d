from __future__ import annotations

from pathlib import Path

import pytest

from outbox.config import PACKAGE_TEMPLATES
from outbox.errors import TemplateError, UnknownTemplate
from outbox.render import TemplateSet

SHIPPED = ["invoice", "login_code", "newsletter", "order_confirmation", "password_reset"]


def write(root: Path, name: str, files: dict[str, str]) -> None:
    (root / name).mkdir()
    for file, content in files.items():
        (root / name / file).write_text(content)


def test_shipped_templates_render() -> None:
    templates = TemplateSet(PACKAGE_TEMPLATES)
    assert templates.names() == SHIPPED
    params = {
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
    for name in SHIPPED:
        template = templates.get(name)
        rendered = templates.render(name, {k: params[k] for k in template.variables})
        assert rendered.subject
        assert "\n" not in rendered.subject
        assert rendered.text.strip()
        assert rendered.html is not None
        assert "<html>" in rendered.html


def test_html_is_escaped_text_is_not(tmp_path: Path) -> None:
    write(
        tmp_path,
        "t",
        {"subject.txt": "Hi {{ n }}", "body.txt": "{{ n }}", "body.html": "<p>{{ n }}</p>"},
    )
    rendered = TemplateSet(tmp_path).render("t", {"n": "<script>x</script> & co"})
    assert rendered.html == "<p>&lt;script&gt;x&lt;/script&gt; &amp; co</p>"
    assert rendered.text == "<script>x</script> & co"


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
            "body.html": "{{ c }}",
        },
    )
    template = TemplateSet(tmp_path).get("t")
    assert template.variables == {"a", "b", "c", "items"}
    assert template.subject_variables == {"a"}
    assert template.html is not None


def test_broken_and_incomplete_templates(tmp_path: Path) -> None:
    write(tmp_path, "broken", {"subject.txt": "{{ a", "body.txt": "x"})
    write(tmp_path, "nobody", {"subject.txt": "x"})
    templates = TemplateSet(tmp_path)
    with pytest.raises(TemplateError):
        templates.get("broken")
    with pytest.raises(TemplateError, match=r"body\.txt"):
        templates.get("nobody")
    with pytest.raises(UnknownTemplate):
        templates.get("Bad Name")
