from __future__ import annotations

import os
from pathlib import Path

import pytest

from outbox.errors import InvalidParams
from outbox.message.attachments import load, references


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "files" / "invoices").mkdir(parents=True)
    (tmp_path / "files" / "invoices" / "1234.pdf").write_bytes(b"%PDF" + b"x" * 96)
    (tmp_path / "secret.txt").write_text("not yours")
    os.symlink(tmp_path / "secret.txt", tmp_path / "files" / "link.pdf")
    return tmp_path / "files"


def refs(root: Path, attachments: object, max_bytes: int = 1000) -> list[object]:
    return list(references({"attachments": attachments}, directory=str(root), max_bytes=max_bytes))


def test_a_reference_resolves_with_a_filename_and_type(root: Path) -> None:
    (ref,) = references(
        {"attachments": [{"path": "invoices/1234.pdf", "filename": "Invoice-1234.pdf"}]},
        directory=str(root),
        max_bytes=1000,
    )
    assert ref.path == root / "invoices" / "1234.pdf"
    assert (ref.filename, ref.content_type, ref.size) == (
        "Invoice-1234.pdf",
        "application/pdf",
        100,
    )
    (loaded,) = load(
        {"attachments": [{"path": "invoices/1234.pdf"}]}, directory=str(root), max_bytes=1000
    )
    assert loaded.filename == "1234.pdf"
    assert loaded.data.startswith(b"%PDF")


def test_no_attachments_need_no_directory() -> None:
    assert references({"name": "x"}, directory="", max_bytes=10) == []


@pytest.mark.parametrize(
    ("attachments", "message"),
    [
        ([{"path": "../secret.txt"}], "outside"),
        ([{"path": "link.pdf"}], "outside"),  # a symlink that leads out
        ([{"path": "/etc/passwd"}], "relative"),
        ([{"path": "invoices/none.pdf"}], "no file"),
        ([{"path": "invoices"}], "no file"),
        ([{"path": "invoices/1234.pdf", "filename": "a\r\nBcc: x@example.com"}], "filename"),
        ([{"path": "invoices/1234.pdf", "filename": "../x.pdf"}], "filename"),
        ([{"path": "invoices/1234.pdf", "content_type": "text/html\r\nX: y"}], "content_type"),
        ([{"path": "invoices/1234.pdf", "url": "https://x.example/a.pdf"}], "unknown keys"),
        ("invoices/1234.pdf", "list"),
        ([{"path": "invoices/1234.pdf"}] * 11, "over the limit"),
    ],
)
def test_bad_references(root: Path, attachments: object, message: str) -> None:
    with pytest.raises(InvalidParams, match=message):
        refs(root, attachments)


def test_attachments_need_the_directory_setting() -> None:
    with pytest.raises(InvalidParams, match="OUTBOX_ATTACHMENTS_DIR"):
        references({"attachments": [{"path": "a.pdf"}]}, directory="", max_bytes=10)
