"""Templates to (subject, text, html), compiled once per process.

Layout of ``OUTBOX_TEMPLATES``: one folder per template holding
``subject.txt``, ``body.txt`` and optionally ``body.html`` (autoescaped).
Undefined variables are errors, never blanks in a customer's inbox.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta

from outbox.errors import TemplateError, UnknownTemplate

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")
_FILES = ("subject.txt", "body.txt", "body.html")


@dataclass(frozen=True, slots=True)
class Rendered:
    subject: str
    text: str
    html: str | None


@dataclass(frozen=True)
class Template:
    name: str
    subject: jinja2.Template
    text: jinja2.Template
    html: jinja2.Template | None
    variables: frozenset[str]  # every top-level name the files use
    subject_variables: frozenset[str]  # the names that reach the Subject header


class TemplateSet:
    """The templates of one directory, parsed lazily and kept for the process."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        loader = jinja2.FileSystemLoader(directory)
        common: dict[str, Any] = {
            "loader": loader,
            "undefined": jinja2.StrictUndefined,
            "keep_trailing_newline": True,
            "auto_reload": False,
        }
        self._text_env = jinja2.Environment(autoescape=False, **common)  # noqa: S701 - plain text
        self._html_env = jinja2.Environment(autoescape=True, **common)
        self._cache: dict[str, Template] = {}

    def get(self, name: str) -> Template:
        template = self._cache.get(name)
        if template is None:
            template = self._cache[name] = self._load(name)
        return template

    def names(self) -> list[str]:
        return sorted(p.name for p in self.directory.iterdir() if (p / "subject.txt").is_file())

    def render(self, name: str, params: dict[str, Any]) -> Rendered:
        template = self.get(name)
        try:
            subject = template.subject.render(params)
            text = template.text.render(params)
            html = template.html.render(params) if template.html else None
        except jinja2.TemplateError as exc:
            raise TemplateError(f"template {name!r}: {exc}") from exc
        # A subject is one header line whatever a param holds: line breaks
        # inside it can never start a new header.
        return Rendered(_LINE_BREAKS.sub(" ", subject).strip(), text, html)

    def _load(self, name: str) -> Template:
        if not _NAME.fullmatch(name) or not (self.directory / name / "subject.txt").is_file():
            raise UnknownTemplate(f"unknown template {name!r} in {self.directory}")
        if not (self.directory / name / "body.txt").is_file():
            raise TemplateError(f"template {name!r} has no body.txt")
        try:
            subject = self._text_env.get_template(f"{name}/subject.txt")
            text = self._text_env.get_template(f"{name}/body.txt")
            has_html = (self.directory / name / "body.html").is_file()
            html = self._html_env.get_template(f"{name}/body.html") if has_html else None
            variables: set[str] = set()
            subject_variables: frozenset[str] = frozenset()
            for file in _FILES:
                path = self.directory / name / file
                if path.is_file():
                    found = jinja2.meta.find_undeclared_variables(
                        self._text_env.parse(path.read_text("utf-8"))
                    )
                    variables |= found
                    if file == "subject.txt":
                        subject_variables = frozenset(found)
        except jinja2.TemplateError as exc:
            raise TemplateError(f"template {name!r}: {exc}") from exc
        return Template(name, subject, text, html, frozenset(variables), subject_variables)


@cache
def template_set(directory: Path) -> TemplateSet:
    """One shared TemplateSet per directory and process."""
    return TemplateSet(directory)
