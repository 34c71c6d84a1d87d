"""Templates to (subject, text, html), compiled once per template version.

Layout of ``OUTBOX_TEMPLATES``: a ``_layouts/`` folder of shared files
(:mod:`outbox.message.layouts`), and one folder per template holding
``subject.txt``, ``body.mjml`` or ``body.html`` (autoescaped), and
``body.txt`` (required without an HTML body, else derived from it), plus an
optional ``template.toml`` (default priority, extra required params, example
params). Undefined variables are errors, never blanks in a customer's inbox.

A template's version is a hash of its files and of the compiler: the outbox
row records it, so a retry renders what the first attempt would have even
after the directory changed (:mod:`outbox.message.versions`).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta

from outbox.errors import TemplateError, UnknownTemplate
from outbox.message import layouts, links
from outbox.message.compile import (
    META,
    SOURCE_FILES,
    SUBJECT,
    TEXT,
    compile_files,
    compiler_identity,
)

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
# A language folder inside a template's: a BCP 47 tag (de, de-AT, pt-BR, zh-Hant).
_VARIANT = re.compile(r"[a-z]{2,3}(?:-[A-Za-z0-9]{2,8}){0,3}")
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")
_BLANK_LINES = re.compile(r"\n{3,}")
_META_KEYS = frozenset({"description", "priority", "required", "example"})
_PRIORITIES = frozenset({"high", "bulk"})
_MAX_VERSIONS = 256  # stored versions kept per process; each is a few parsed templates
# Supplied by the sender, not by params (test with ``{% if unsubscribe_url is defined %}``).
PROVIDED = frozenset({"unsubscribe_url"})


@dataclass(frozen=True, slots=True)
class Rendered:
    subject: str
    text: str
    html: str | None


@dataclass(frozen=True, eq=False)
class Template:
    name: str
    version: str  # hash of the files and the compiler
    subject: jinja2.Template
    text: jinja2.Template
    html: jinja2.Template | None
    variables: frozenset[str]  # every top-level name the files use, plus template.toml's
    subject_variables: frozenset[str]  # the names that reach the Subject header
    files: Mapping[str, str]  # the source files of this version
    compiled_html: str | None  # the Jinja source of the HTML part (MJML output)
    compiled_text: str  # the Jinja source of the text part (body.txt or derived)
    text_derived: bool
    priority: str | None  # template.toml's default priority
    example: Mapping[str, Any]  # template.toml's example params, for previews and checks
    variant: str | None = None  # the language folder these files came from; None: the default

    def render(
        self, params: Mapping[str, Any], provided: Mapping[str, str] | None = None
    ) -> Rendered:
        if provided:
            params = {**params, **provided}
        try:
            subject = self.subject.render(params)
            text = self.text.render(params)
            html = self.html.render(params) if self.html else None
        except Exception as exc:
            # Params of the wrong shape fail inside the template (a loop over a
            # number, say) with any exception; all of them are this email's.
            raise TemplateError(f"template {self.name!r}: {type(exc).__name__}: {exc}") from exc
        scheme = links.disallowed_scheme(html) if html else None
        if scheme is not None:
            raise TemplateError(
                f"template {self.name!r}: a link is {scheme}:, not http(s), mailto:, tel: or cid:"
            )
        if self.text_derived:  # a false {% if %} leaves its paragraph's blank lines
            text = _BLANK_LINES.sub("\n\n", text).strip("\n") + "\n"
        # A subject is one header line whatever a param holds: line breaks
        # inside it can never start a new header.
        return Rendered(_LINE_BREAKS.sub(" ", subject).strip(), text, html)


class _Environment(jinja2.Environment):
    """Each template's globals as one dict, not Jinja's ChainMap over the
    environment's: every render copies them into its context, three times an
    email, and a ChainMap is read key by key in Python. Nothing here changes
    an environment's globals once its templates exist."""

    def make_globals(self, d: Mapping[str, Any] | None) -> dict[str, Any]:
        return {**self.globals, **(d or {})}


class TemplateSet:
    """The templates of one directory, compiled lazily and kept for the process.

    Files are read once per process: a deploy (a restart) picks up changes.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        common: dict[str, Any] = {
            "undefined": jinja2.StrictUndefined,
            "keep_trailing_newline": True,
        }
        # The subject and text parts are plain text: nothing to escape.
        self._text_env = _Environment(**common)
        # Derived text keeps each statement of the HTML on a line of its own.
        self._derived_env = _Environment(trim_blocks=True, lstrip_blocks=True, **common)
        self._html_env = _Environment(autoescape=True, **common)
        self._current: dict[tuple[str, str | None], Template] = {}
        self._versions: dict[str, Template] = {}
        self._picks: dict[str, dict[str, str]] = {}

    def get(self, name: str, variant: str | None = None) -> Template:
        """The current version of a template (or of one of its language variants)."""
        template = self._current.get((name, variant))
        if template is None:
            files = self.read(name, variant)
            label = name if variant is None else f"{name}/{variant}"
            html, text, derived = self._compile(label, files)
            template = self._build(
                name=name,
                version=version_of(files),
                files=files,
                compiled_html=html,
                compiled_text=text,
                text_derived=derived,
                variant=variant,
            )
            self._current[(name, variant)] = template
            self._versions[template.version] = template
        return template

    def names(self) -> list[str]:
        return sorted(p.name for p in self.directory.iterdir() if (p / SUBJECT).is_file())

    def variants(self, name: str) -> list[str]:
        """The language folders of a template (``de``, ``de-AT``...), as named on disk."""
        folder = self.directory / name
        if not _NAME.fullmatch(name) or not folder.is_dir():
            return []
        return sorted(
            p.name
            for p in folder.iterdir()
            if _VARIANT.fullmatch(p.name) and (p / SUBJECT).is_file()
        )

    def pick(self, name: str, candidates: list[str]) -> str | None:
        """The first of ``candidates`` (``de-AT``, ``de``) the template has; None: the default."""
        cached = self._picks.get(name)
        if cached is None:
            cached = self._picks[name] = {v.lower(): v for v in self.variants(name)}
        for candidate in candidates:
            found = cached.get(candidate.lower())
            if found is not None:
                return found
        return None

    def render(self, name: str, params: dict[str, Any]) -> Rendered:
        return self.get(name).render(params)

    def cached_version(self, version: str) -> Template | None:
        return self._versions.get(version)

    def from_stored(
        self,
        name: str,
        version: str,
        files: Mapping[str, str],
        compiled_html: str | None,
        compiled_text: str,
    ) -> Template:
        """An earlier version, from what :mod:`outbox.message.versions` stored."""
        template = self._versions.get(version)
        if template is None:
            template = self._build(
                name=name,
                version=version,
                files=files,
                compiled_html=compiled_html,
                compiled_text=compiled_text,
                text_derived=TEXT not in files,
            )
            if len(self._versions) >= _MAX_VERSIONS:
                self._versions.pop(next(iter(self._versions)))
            self._versions[version] = template
        return template

    def read(self, name: str, variant: str | None = None) -> dict[str, str]:
        """The template's files, and the ``_layouts/`` files they use (part of its version).

        A variant's folder holds its own subject and bodies; its
        ``template.toml`` is the default's unless it has one.
        """
        folder = self.directory / name
        if not _NAME.fullmatch(name) or not (folder / SUBJECT).is_file():
            raise UnknownTemplate(f"unknown template {name!r} in {self.directory}")
        if variant is not None:
            if not _VARIANT.fullmatch(variant) or not (folder / variant / SUBJECT).is_file():
                raise UnknownTemplate(f"template {name!r} has no variant {variant!r}")
            inherited = (
                {META: (folder / META).read_text("utf-8")} if (folder / META).is_file() else {}
            )
            folder = folder / variant
        else:
            inherited = {}
        files = inherited | {
            f: (folder / f).read_text("utf-8") for f in SOURCE_FILES if (folder / f).is_file()
        }
        try:
            used = layouts.gather(list(files.values()), self._read_layout)
        except TemplateError as exc:
            raise TemplateError(f"template {name!r}: {exc}") from None
        return files | used

    def _read_layout(self, name: str) -> str:
        path = self.directory / name  # name is _layouts/<file>, checked by layouts.referenced
        try:
            return path.read_text("utf-8")
        except OSError:
            raise TemplateError(f"no layout {name!r} in {self.directory}") from None

    def _compile(self, name: str, files: Mapping[str, str]) -> tuple[str | None, str, bool]:
        try:
            compiled = compile_files(files)
        except TemplateError as exc:
            raise TemplateError(f"template {name!r} {exc}") from None
        return compiled.html, compiled.text, compiled.text_derived

    def _build(
        self,
        *,
        name: str,
        version: str,
        files: Mapping[str, str],
        compiled_html: str | None,
        compiled_text: str,
        text_derived: bool,
        variant: str | None = None,
    ) -> Template:
        label_name = name if variant is None else f"{name}/{variant}"  # what errors name
        meta = _meta(label_name, files)
        # The HTML before the text derived from it: an error names the author's file.
        subject = layouts.resolve(files[SUBJECT], files, label=SUBJECT)
        sources = [("subject.txt", self._text_env, subject)]
        if compiled_html is not None:
            sources.append(("HTML part", self._html_env, compiled_html))
        text_env = self._derived_env if text_derived else self._text_env
        sources.append(("text part", text_env, compiled_text))
        parsed: dict[str, jinja2.Template] = {}
        variables: set[str] = set(meta.get("required", ()))
        subject_variables: frozenset[str] = frozenset()
        for label, env, source in sources:
            try:
                found = jinja2.meta.find_undeclared_variables(env.parse(source))
                parsed[label] = env.from_string(source)
            except jinja2.TemplateSyntaxError as exc:
                raise TemplateError(
                    f"template {label_name!r} {label}, line {exc.lineno}: {exc.message}"
                ) from None
            variables |= found
            if label == "subject.txt":
                subject_variables = frozenset(found)
        return Template(
            name=name,
            version=version,
            subject=parsed["subject.txt"],
            text=parsed["text part"],
            html=parsed.get("HTML part"),
            variables=frozenset(variables - PROVIDED),
            subject_variables=subject_variables,
            files=dict(files),
            compiled_html=compiled_html,
            compiled_text=compiled_text,
            text_derived=text_derived,
            priority=meta.get("priority"),
            example=meta.get("example", {}),
            variant=variant,
        )


def version_of(files: Mapping[str, str]) -> str:
    """The hash of a template's files and of the compiler that turns them into parts."""
    digest = hashlib.sha256(compiler_identity().encode())
    for name in sorted(files):
        digest.update(b"\x00" + name.encode() + b"\x00" + files[name].encode("utf-8"))
    return digest.hexdigest()[:32]


def _meta(name: str, files: Mapping[str, str]) -> dict[str, Any]:
    if META not in files:
        return {}
    try:
        meta = tomllib.loads(files[META])
    except tomllib.TOMLDecodeError as exc:
        raise TemplateError(f"template {name!r} {META}: {exc}") from None
    unknown = meta.keys() - _META_KEYS
    if unknown:
        raise TemplateError(f"template {name!r} {META}: unknown keys {sorted(unknown)}")
    if meta.get("priority", "bulk") not in _PRIORITIES:
        raise TemplateError(f"template {name!r} {META}: priority must be 'high' or 'bulk'")
    required = meta.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise TemplateError(f"template {name!r} {META}: required must be a list of names")
    if not isinstance(meta.get("example", {}), dict):
        raise TemplateError(f"template {name!r} {META}: example must be a table")
    return meta


@cache
def template_set(directory: Path) -> TemplateSet:
    """One shared TemplateSet per directory and process."""
    return TemplateSet(directory)
