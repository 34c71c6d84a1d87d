"""What a command found or did, and the one printer that shows it.

A command returns a :class:`Result`; :class:`Printer` writes its text, or with
``--json`` its JSON form, through the redaction the result asks for. Notes and
progress go to stderr, so that stdout holds the one answer a script reads.
"""

from __future__ import annotations

import abc
import datetime as dt
import enum
import json
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

from outbox.redact import Redactor


class Redaction(enum.Enum):
    """What the printer hides in a result's output before it writes it."""

    NONE = "none"  # its addresses are tagged already, or shown on purpose (--reveal)
    SECRETS = "secrets"  # secrets hidden, addresses in clear (--reveal on free text)
    ADDRESSES = "addresses"  # secrets hidden, every address in it tagged


class Result(abc.ABC):
    """What a command found or did."""

    @abc.abstractmethod
    def text(self) -> str:
        """Its lines without ``--json``; an empty text shows nothing."""

    def exit_code(self) -> int:
        return 0

    def redaction(self) -> Redaction:
        return Redaction.NONE


class JsonResult(Result):
    """A result with a JSON form, shown instead of its text with ``--json``."""

    json_indent: ClassVar[int | None] = None

    @abc.abstractmethod
    def json(self) -> Any:
        """A value :func:`encode` writes; :class:`JsonLines` for one document per line."""


@dataclass(frozen=True, slots=True)
class JsonLines:
    """Documents written one per line (one per email, one per bounce report)."""

    documents: list[Any]


@dataclass(frozen=True, slots=True)
class Said(Result):
    """A line or two of text, and no JSON form."""

    said: str
    code: int = 0

    def text(self) -> str:
        return self.said

    def exit_code(self) -> int:
        return self.code


@dataclass(frozen=True, slots=True)
class Refused(Result):
    """Why the command did nothing: on stderr, ``--json`` or not."""

    reason: str
    code: int = 1

    def text(self) -> str:
        return self.reason

    def exit_code(self) -> int:
        return self.code


@dataclass(frozen=True, slots=True)
class Done(Result):
    """A process that ran until it was stopped, or a run that printed its own report."""

    code: int = 0

    def text(self) -> str:
        return ""

    def exit_code(self) -> int:
        return self.code


@dataclass(frozen=True, slots=True)
class Printer:
    """Shows results as text, or as JSON with ``--json``; notes and progress on stderr."""

    as_json: bool
    redactor: Redactor

    def show(self, result: Result) -> int:
        """Write ``result``; returns the command's exit code."""
        if self.as_json and isinstance(result, JsonResult):
            shown = encode(result.json(), indent=result.json_indent)
        else:
            shown = result.text()
        if shown:
            stream = sys.stderr if isinstance(result, Refused) else sys.stdout
            print(self._redacted(shown, result.redaction()), file=stream)
        return result.exit_code()

    def note(self, line: str) -> None:
        """Something to know about the run, which is not its answer."""
        print(line, file=sys.stderr)

    def progress(self, line: str) -> None:
        """How far a long run is; none with ``--json``, whose reader wants one answer."""
        if not self.as_json:
            print(line, file=sys.stderr, flush=True)

    def _redacted(self, shown: str, redaction: Redaction) -> str:
        if redaction is Redaction.ADDRESSES:
            return self.redactor.text(shown)
        if redaction is Redaction.SECRETS:
            return self.redactor.secrets_only(shown)
        return shown


def encode(value: Any, *, indent: int | None = None) -> str:
    """JSON with timestamps to the millisecond; :class:`JsonLines` one document a line."""
    if isinstance(value, JsonLines):
        return "\n".join(json.dumps(d, default=_json_value) for d in value.documents)
    return json.dumps(value, default=_json_value, indent=indent)


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="milliseconds")
    return str(value)


def timestamp(value: dt.datetime | None) -> str:
    """A timestamp to the millisecond: attempts of one second are told apart."""
    if value is None:
        return "-"
    return f"{value:%Y-%m-%d %H:%M:%S}.{value.microsecond // 1000:03d}"
