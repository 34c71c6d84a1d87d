"""Attachments by content (outbox.fields.files)."""

from __future__ import annotations

import hashlib
import re

import pytest

from outbox.errors import InvalidParams
from outbox.fields.files import MAX_FILES, check_files

PDF = b"%PDF-1.4\n" + bytes(range(256))


def test_files_are_checked_and_hashed() -> None:
    (pdf, note) = check_files(
        [
            {"filename": "Invoice 1234.pdf", "content": PDF},
            {"filename": "Grüße.txt", "content": bytearray(b"hi"), "content_type": "text/plain"},
        ],
        max_bytes=10_000,
    )
    assert (pdf.filename, pdf.content_type, pdf.content) == (
        "Invoice 1234.pdf",
        "application/pdf",
        PDF,
    )
    assert pdf.sha256 == hashlib.sha256(PDF).hexdigest()
    assert note.content == b"hi"
    assert note.described() == {
        "sha256": hashlib.sha256(b"hi").hexdigest(),
        "filename": "Grüße.txt",
        "content_type": "text/plain",
        "size": 2,
    }
    assert check_files(None, max_bytes=1) == ()
    unknown = check_files([{"filename": "data.zzz", "content": b""}], max_bytes=1)
    assert unknown[0].content_type == "application/octet-stream"


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ({"filename": "a.pdf", "content": PDF}, "must be a list"),
        ([("a.pdf", PDF)], "must be a list"),
        ([{"filename": "a.pdf", "content": "text, not bytes"}], "content must be bytes"),
        ([{"filename": "a.pdf"}], "content must be bytes"),
        ([{"filename": "../a.pdf", "content": PDF}], "plain file name"),
        ([{"filename": "a\r\n.pdf", "content": PDF}], "plain file name"),
        ([{"filename": "", "content": PDF}], "plain file name"),
        ([{"filename": "a" * 256, "content": PDF}], "plain file name"),
        ([{"filename": "a\ud800.pdf", "content": PDF}], "invalid Unicode"),
        ([{"filename": "a.pdf", "content": PDF, "content_type": "pdf"}], "content_type"),
        ([{"filename": "a.pdf", "content": PDF, "path": "x"}], "unknown keys"),
        ([{"filename": f"{i}.txt", "content": b"x"} for i in range(MAX_FILES + 1)], "over 10"),
        ([{"filename": "big.bin", "content": b"x" * 1001}], "1001 bytes, over the limit of 1000"),
    ],
)
def test_bad_files_are_refused(files: object, says: str) -> None:
    with pytest.raises(InvalidParams, match=re.escape(says)):
        check_files(files, max_bytes=1000)
