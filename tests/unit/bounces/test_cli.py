"""The ``classify`` command used by ``python -m outbox.bounce_parsing`` and the main CLI."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from outbox.bounce_parsing.command import classify_command, main

from .conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[3]


def run(paths: list[str]) -> tuple[int, list[dict[str, str | None]]]:
    out = io.StringIO()
    code = classify_command(paths, out)
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


def test_one_object_per_recipient() -> None:
    code, objects = run([str(FIXTURES / "postfix-two-recipients.eml")])
    assert code == 0
    assert [(o["class"], o["recipient"], o["status"]) for o in objects] == [
        ("hard", "gus@example.org", "5.1.1"),
        ("soft", "hana@example.org", "4.2.2"),
    ]
    assert set(objects[0]) == {
        "class",
        "recipient",
        "status",
        "reason",
        "diagnostic",
        "original_message_id",
    }
    assert [o["reason"] for o in objects] == ["user_unknown", "mailbox_full"]
    assert objects[0]["original_message_id"] == "<ord-1007.a1@app.example.com>"


def test_auto_reply_prints_nothing() -> None:
    assert run([str(FIXTURES / "autoreply-rfc3834.eml")]) == (0, [])


def test_several_files_are_labelled() -> None:
    paths = [str(FIXTURES / "qmail-no-host.eml"), str(FIXTURES / "arf-abuse.eml")]
    code, objects = run(paths)
    assert code == 0
    assert [(o["file"], o["class"]) for o in objects] == [
        (paths[0], "hard"),
        (paths[1], "complaint"),
    ]


def test_unreadable_file_is_reported_and_others_still_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, objects = run([str(FIXTURES / "missing.eml"), str(FIXTURES / "qmail-no-host.eml")])
    assert code == 1
    assert [o["recipient"] for o in objects] == ["karl@nowhere.example.org"]
    assert "missing.eml" in capsys.readouterr().err


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = (FIXTURES / "exim-retry-timeout.eml").read_bytes()
    fake = io.TextIOWrapper(io.BytesIO(raw))
    monkeypatch.setattr(sys, "stdin", fake)
    code, objects = run(["-"])
    assert code == 0
    assert [(o["class"], o["recipient"]) for o in objects] == [("soft", "xena@example.org")]


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["frobnicate", "x"]) == 2
    assert "usage" in capsys.readouterr().err


def test_module_entry_point() -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "outbox.bounce_parsing",
            "classify",
            str(FIXTURES / "sendmail-user-unknown.eml"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    (line,) = completed.stdout.splitlines()
    assert json.loads(line)["class"] == "hard"


def test_outbox_bounces_classify_loads_no_database_driver() -> None:
    # Each command's module is imported when it runs: classify's only parses.
    code = (
        "import sys; from outbox.cli import main; "
        f"status = main(['bounces', 'classify', {str(FIXTURES / 'qmail-no-host.eml')!r}]); "
        "print(status, 'psycopg' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stderr.strip().splitlines()[-1] == "0 False", done.stderr
    (line,) = done.stdout.splitlines()
    assert json.loads(line)["class"] == "hard"
