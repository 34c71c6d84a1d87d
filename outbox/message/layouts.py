"""Shared layouts: ``{% extends %}`` and ``{% include %}`` of files in ``_layouts/`` (pure).

A template's file may extend or include a file of the ``_layouts/`` folder
next to the templates (``{% extends "_layouts/base.mjml" %}``,
``{% include "_layouts/footer.txt" %}``). Inheritance is resolved once per
template version, before MJML compiles anything: every other Jinja construct
of every file is held as an opaque word (as for MJML,
:mod:`outbox.message.placeholders`), Jinja fills the blocks and includes, and
the words are put back. The result is one flat Jinja source, so MJML sees one
whole document and per message only the usual rendering runs.

What this means for authors: block and include names are literal strings
under ``_layouts/``; ``{{ super() }}`` is not available (a block replaces the
layout's block whole); a layout may itself extend or include others, up to
:data:`MAX_DEPTH` levels.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping

import jinja2

from outbox.errors import TemplateError

FOLDER = "_layouts"
MAX_DEPTH = 8
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
# The statements resolved here; every other construct waits for the per-message render.
_STRUCTURE = re.compile(r"\{%-?\s*(extends|include|block|endblock)\b.*?-?%\}", re.DOTALL)
_REFERENCE = re.compile(r"""\{%-?\s*(?:extends|include)\s+(["'])([^"']+)\1\s*-?%\}""")
_ANY_REFERENCE = re.compile(r"\{%-?\s*(?:extends|include)\b")
_NAME = re.compile(rf"{FOLDER}/[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")


def referenced(source: str) -> list[str]:
    """The layout files ``source`` extends or includes, or TemplateError."""
    names = [m.group(2) for m in _REFERENCE.finditer(source)]
    if len(names) != len(_ANY_REFERENCE.findall(source)):
        raise TemplateError("extends and include take a literal file name in quotes")
    for name in names:
        if not _NAME.fullmatch(name):
            raise TemplateError(f"{name!r}: layouts are files directly in {FOLDER}/")
    return names


def gather(sources: list[str], read: Callable[[str], str]) -> dict[str, str]:
    """Every layout the sources use, directly or through other layouts, by name."""
    found: dict[str, str] = {}

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if name in chain:
            raise TemplateError(f"{name!r} includes or extends itself: {' -> '.join(chain)}")
        if len(chain) >= MAX_DEPTH:
            raise TemplateError(f"{name!r}: layouts nest deeper than {MAX_DEPTH} levels")
        if name not in found:
            found[name] = read(name)
        for inner in referenced(found[name]):
            visit(inner, (*chain, name))

    for source in sources:
        for name in referenced(source):
            visit(name, ())
    return found


def resolve(source: str, files: Mapping[str, str], *, label: str) -> str:
    """``source`` with its extends and includes filled in from ``files``' layouts."""
    if not _ANY_REFERENCE.search(source):
        return source
    layouts = {name: text for name, text in files.items() if name.startswith(f"{FOLDER}/")}
    digest = hashlib.sha256("\x00".join([source, *layouts.values()]).encode("utf-8")).hexdigest()
    size = 8
    while any(f"jl{digest[:size]}n" in text for text in (source, *layouts.values())):
        size += 4
    prefix = f"jl{digest[:size]}n"
    originals: list[str] = []

    def hold(text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            if _STRUCTURE.fullmatch(match.group(0)):
                return match.group(0)
            originals.append(match.group(0))
            return f"{prefix}{len(originals) - 1}x"

        return _JINJA.sub(replace, text)

    env = jinja2.Environment(  # noqa: S701 - resolves structure only; no value is rendered
        loader=jinja2.DictLoader({name: hold(text) for name, text in layouts.items()}),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    try:
        flat = env.from_string(hold(source)).render()
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"{label}: no layout {exc.name!r} in {FOLDER}/") from None
    except jinja2.TemplateError as exc:
        raise TemplateError(f"{label}: {type(exc).__name__}: {exc}") from None
    return re.sub(rf"{prefix}(\d+)x", lambda m: originals[int(m.group(1))], flat)
