"""The printer of every command's result (outbox.cli.output)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import pytest

from outbox.cli.output import (
    Done,
    JsonLines,
    JsonResult,
    Printer,
    Redaction,
    Refused,
    Said,
    encode,
    timestamp,
)
from outbox.redact import Redactor, recipient_tag
from tests.keys import SECRET

WHEN = dt.datetime(2026, 3, 1, 9, 30, 5, 123456, tzinfo=dt.UTC)
REDACTOR = Redactor([SECRET], tag_secret=SECRET)


@dataclass(frozen=True)
class Found(JsonResult):
    address: str
    redacted: Redaction = Redaction.NONE

    def json(self) -> Any:
        return {"address": self.address, "at": WHEN}

    def text(self) -> str:
        return f"found {self.address}"

    def exit_code(self) -> int:
        return 3

    def redaction(self) -> Redaction:
        return self.redacted


def test_text_without_json_and_the_json_form_with_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert Printer(as_json=False, redactor=REDACTOR).show(Found("a")) == 3
    assert capsys.readouterr().out == "found a\n"
    assert Printer(as_json=True, redactor=REDACTOR).show(Found("a")) == 3
    assert json.loads(capsys.readouterr().out) == {
        "address": "a",
        "at": "2026-03-01T09:30:05.123+00:00",
    }


def test_a_text_only_result_stays_text_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert Printer(as_json=True, redactor=REDACTOR).show(Said("removed", 1)) == 1
    assert capsys.readouterr().out == "removed\n"


def test_a_refusal_goes_to_stderr_and_nothing_to_stdout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert Printer(as_json=True, redactor=REDACTOR).show(Refused("no email", code=2)) == 2
    printed = capsys.readouterr()
    assert (printed.out, printed.err) == ("", "no email\n")


def test_done_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert Printer(as_json=False, redactor=REDACTOR).show(Done(4)) == 4
    assert capsys.readouterr() == ("", "")


def test_the_result_chooses_what_is_hidden(capsys: pytest.CaptureFixture[str]) -> None:
    printer = Printer(as_json=False, redactor=REDACTOR)
    leaky = f"ann@example.org {SECRET}"
    printer.show(Found(leaky, Redaction.ADDRESSES))
    tagged = capsys.readouterr().out
    assert "ann@example.org" not in tagged
    assert recipient_tag("ann@example.org", secret=SECRET) in tagged
    assert SECRET not in tagged
    printer.show(Found(leaky, Redaction.SECRETS))
    revealed = capsys.readouterr().out
    assert "ann@example.org" in revealed
    assert SECRET not in revealed
    printer.show(Found(leaky))
    assert capsys.readouterr().out == f"found {leaky}\n"


def test_progress_is_for_a_reader_of_text_only(capsys: pytest.CaptureFixture[str]) -> None:
    Printer(as_json=True, redactor=REDACTOR).progress("requeued 1000/5000")
    assert capsys.readouterr().err == ""
    Printer(as_json=False, redactor=REDACTOR).progress("requeued 1000/5000")
    assert capsys.readouterr().err == "requeued 1000/5000\n"
    Printer(as_json=True, redactor=REDACTOR).note("sending rows left alone")
    assert capsys.readouterr().err == "sending rows left alone\n"


def test_json_lines_are_one_document_a_line() -> None:
    written = encode(JsonLines([{"id": 1}, {"id": 2, "at": WHEN}]))
    assert [json.loads(line) for line in written.splitlines()] == [
        {"id": 1},
        {"id": 2, "at": "2026-03-01T09:30:05.123+00:00"},
    ]
    assert encode({"a": [1]}, indent=2) == '{\n  "a": [\n    1\n  ]\n}'


def test_timestamps_to_the_millisecond() -> None:
    assert timestamp(WHEN) == "2026-03-01 09:30:05.123"
    assert timestamp(None) == "-"
