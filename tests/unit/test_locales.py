"""Language variants: locale tags (outbox.fields.locales) and template folders per language."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from outbox.config import Settings
from outbox.errors import InvalidMessage, UnknownTemplate
from outbox.fields.locales import check_locale, fallbacks
from outbox.message.preview import check, preview
from outbox.message.render import TemplateSet
from tests.unit.test_layouts import write


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("de", "de"),
        ("DE", "de"),
        ("de-at", "de-AT"),
        ("de_AT", "de-AT"),
        ("pt-br", "pt-BR"),
        ("zh-hant-tw", "zh-Hant-TW"),
        ("es-419", "es-419"),
        (None, None),
    ],
)
def test_tags_are_canonical(given: str | None, canonical: str | None) -> None:
    assert check_locale(given) == canonical


@pytest.mark.parametrize("given", ["", "d", "deutsch", "de-", "de AT", "de-AT\n", 5, "x" * 40])
def test_other_values_are_refused(given: object) -> None:
    with pytest.raises(InvalidMessage, match="language tag"):
        check_locale(given)


def test_fallbacks_go_from_specific_to_general() -> None:
    assert fallbacks("de-AT") == ["de-AT", "de"]
    assert fallbacks("zh-Hant-TW") == ["zh-Hant-TW", "zh-Hant", "zh"]
    assert fallbacks("de") == ["de"]


@pytest.fixture
def greeting(tmp_path: Path) -> TemplateSet:
    return write(
        tmp_path,
        {
            "greeting/subject.txt": "Hello {{ name }}",
            "greeting/body.txt": "Hello {{ name }}\n",
            "greeting/template.toml": 'priority = "high"\n[example]\nname = "Ana"\n',
            "greeting/de/subject.txt": "Hallo {{ name }}",
            "greeting/de/body.txt": "Hallo {{ name }}\n",
            "greeting/de-AT/subject.txt": "Servus {{ name }}",
            "greeting/de-AT/body.txt": "Servus {{ name }}\n",
            "greeting/notes/subject.txt": "not a language folder",
        },
    )


def test_a_locale_picks_the_most_specific_variant(greeting: TemplateSet) -> None:
    assert greeting.variants("greeting") == ["de", "de-AT"]
    assert greeting.pick("greeting", fallbacks("de-AT")) == "de-AT"
    assert greeting.pick("greeting", fallbacks("de-CH")) == "de"
    assert greeting.pick("greeting", fallbacks("fr")) is None
    servus = greeting.get("greeting", "de-AT")
    assert servus.render({"name": "Ana"}).subject == "Servus Ana"
    assert servus.variant == "de-AT"
    assert servus.priority == "high"  # template.toml comes from the default folder
    assert (
        servus.version != greeting.get("greeting", "de").version != greeting.get("greeting").version
    )
    with pytest.raises(UnknownTemplate, match="no variant"):
        greeting.get("greeting", "fr")


def test_templates_check_compiles_every_variant(greeting: TemplateSet, tmp_path: Path) -> None:
    settings = dataclasses.replace(Settings(), templates=tmp_path)
    assert [(c.name, c.problem) for c in check(settings)] == [
        ("greeting", None), ("greeting/de", None), ("greeting/de-AT", None),
    ]  # fmt: skip
    changed = tmp_path / "changed"  # files are read once per directory and process
    shutil.copytree(tmp_path / "greeting", changed / "greeting")
    (changed / "greeting/de/body.txt").write_text("Hallo {{ name }}, {{ nickname }}\n")
    (changed / "greeting/de-AT/subject.txt").write_text("Servus {{ name ")
    found = {c.name: c.problem for c in check(dataclasses.replace(settings, templates=changed))}
    assert found["greeting"] is None
    assert found["greeting/de"] is not None
    assert "nickname" in found["greeting/de"]
    assert found["greeting/de-AT"] is not None
    assert "greeting/de-AT" in found["greeting/de-AT"]


def test_a_preview_shows_the_language_an_enqueue_would_use(
    greeting: TemplateSet, tmp_path: Path
) -> None:
    settings = dataclasses.replace(Settings(), templates=tmp_path)
    written = preview(settings, "greeting", None, out_dir=tmp_path / "out", locale="de-CH")
    assert b"Subject: Hallo Ana" in written.eml.read_bytes()
    default = preview(settings, "greeting", None, out_dir=tmp_path / "out2")
    assert b"Subject: Hello Ana" in default.eml.read_bytes()
