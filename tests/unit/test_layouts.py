"""Shared layouts (outbox.message.layouts): extends and include, resolved per version."""

from __future__ import annotations

from pathlib import Path

import pytest

from outbox.errors import MissingParams, TemplateError
from outbox.message import layouts
from outbox.message.render import TemplateSet
from outbox.validate import check_params_for

BASE_MJML = """<mjml>
  <mj-body>
    <mj-section><mj-column>
      <mj-text>{{ product }} · {% block heading %}Hello{% endblock %}</mj-text>
      {% block content %}{% endblock %}
    </mj-column></mj-section>
    {% include "_layouts/footer.mjml" %}
  </mj-body>
</mjml>
"""
FOOTER_MJML = """<mj-section><mj-column><mj-text>Sent by {{ product }} to {{ name }}</mj-text>
</mj-column></mj-section>"""
CHILD_MJML = """{% extends "_layouts/base.mjml" %}
{% block heading %}Your code{% endblock %}
{% block content %}<mj-text>{% if code %}Code: {{ code }}{% endif %}</mj-text>{% endblock %}
"""


def write(root: Path, files: dict[str, str]) -> TemplateSet:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return TemplateSet(root)


@pytest.fixture
def shared(tmp_path: Path) -> TemplateSet:
    return write(
        tmp_path,
        {
            "_layouts/base.mjml": BASE_MJML,
            "_layouts/footer.mjml": FOOTER_MJML,
            "_layouts/signature.txt": "-- \nThe {{ product }} team\n",
            "_layouts/brand.txt": "[{{ product }}]",
            "code/subject.txt": '{% include "_layouts/brand.txt" %} Your code',
            "code/body.mjml": CHILD_MJML,
            "code/body.txt": 'Code: {{ code }}\n{% include "_layouts/signature.txt" %}',
        },
    )


def test_a_template_extends_and_includes_shared_files(shared: TemplateSet) -> None:
    template = shared.get("code")
    rendered = template.render({"product": "Shop", "name": "Ana", "code": "123456"})
    assert rendered.subject == "[Shop] Your code"
    assert rendered.html is not None
    assert "Shop · Your code" in rendered.html
    assert "Code: 123456" in rendered.html
    assert "Sent by Shop to Ana" in rendered.html
    assert "Hello" not in rendered.html  # the child's block replaced the layout's
    assert rendered.text == "Code: 123456\n-- \nThe Shop team\n"


def test_variables_of_layouts_are_required_params(shared: TemplateSet) -> None:
    template = shared.get("code")
    assert {"product", "name", "code"} <= template.variables
    with pytest.raises(MissingParams, match="name"):
        check_params_for(template, {"product": "Shop", "code": "1"})


def test_the_version_covers_every_layout_used(shared: TemplateSet, tmp_path: Path) -> None:
    before = shared.get("code")
    assert set(before.files) >= {
        "_layouts/base.mjml", "_layouts/footer.mjml", "_layouts/signature.txt",
        "_layouts/brand.txt",
    }  # fmt: skip
    (tmp_path / "_layouts/footer.mjml").write_text(FOOTER_MJML.replace("Sent by", "From"))
    (tmp_path / "_layouts/unused.txt").write_text("not used by any template")
    after = TemplateSet(tmp_path).get("code")
    assert after.version != before.version
    assert "_layouts/unused.txt" not in after.files


def test_a_stored_version_renders_without_the_directory(shared: TemplateSet) -> None:
    stored = shared.get("code")
    elsewhere = TemplateSet(Path("/nonexistent"))
    again = elsewhere.from_stored(
        "code", stored.version, stored.files, stored.compiled_html, stored.compiled_text
    )
    params = {"product": "Shop", "name": "Ana", "code": "9"}
    assert again.render(params) == stored.render(params)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('{% include "_layouts/missing.txt" %}', "no layout '_layouts/missing.txt'"),
        ('{% include "../secrets.txt" %}', "layouts are files directly in _layouts/"),
        ('{% include "other/body.txt" %}', "layouts are files directly in _layouts/"),
        ("{% include name %}", "literal file name"),
    ],
)
def test_bad_references_are_template_errors(tmp_path: Path, body: str, says: str) -> None:
    templates = write(tmp_path, {"t/subject.txt": "Hi", "t/body.txt": body})
    with pytest.raises(TemplateError, match=says.replace("(", r"\(")):
        templates.get("t")


def test_a_loop_of_layouts_stops(tmp_path: Path) -> None:
    templates = write(
        tmp_path,
        {
            "_layouts/a.txt": '{% include "_layouts/b.txt" %}',
            "_layouts/b.txt": '{% include "_layouts/a.txt" %}',
            "t/subject.txt": "Hi",
            "t/body.txt": '{% include "_layouts/a.txt" %}',
        },
    )
    with pytest.raises(TemplateError, match="itself"):
        templates.get("t")


def test_sources_without_layouts_are_unchanged() -> None:
    source = "Hello {{ name }} {% if x %}x{% endif %}"
    assert layouts.resolve(source, {}, label="body.txt") == source
    assert layouts.referenced(source) == []
