"""Attachments given by content at enqueue: file name, content type and bytes.

Each is checked here and stored once in Postgres, keyed by the SHA-256 of its
bytes: a thousand invoices with the same terms-and-conditions PDF store it
once. The row keeps the names and hashes; the bytes stay until no row uses
them.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
from collections.abc import Mapping
from dataclasses import dataclass

from outbox.errors import InvalidParams

MAX_FILES = 10
_KEYS = frozenset({"filename", "content_type", "content"})
_CONTENT_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}")
_BAD_FILENAME = re.compile(r"[\x00-\x1f\x7f/\\]")


@dataclass(frozen=True, slots=True)
class File:
    filename: str
    content_type: str
    content: bytes
    sha256: str  # hex: the key it is stored under

    def described(self) -> dict[str, str | int]:
        """What the row keeps of it (and what the content hash covers)."""
        return {
            "sha256": self.sha256,
            "filename": self.filename,
            "content_type": self.content_type,
            "size": len(self.content),
        }


def check_files(files: object, *, max_bytes: int) -> tuple[File, ...]:
    """Files given as ``{"filename", "content", "content_type"?}`` mappings, checked.

    ``content`` is bytes; ``content_type`` defaults to the file name's type.
    Together they may hold ``max_bytes`` (``OUTBOX_MAX_ATTACHMENT_BYTES``).
    """
    if files is None:
        return ()
    if not isinstance(files, list | tuple) or not all(isinstance(f, Mapping) for f in files):
        raise InvalidParams('attachments must be a list of {"filename": ..., "content": bytes}')
    if len(files) > MAX_FILES:
        raise InvalidParams(f"attachments has {len(files)} files, over {MAX_FILES}")
    checked = [_file(item, index) for index, item in enumerate(files)]
    total = sum(len(f.content) for f in checked)
    if total > max_bytes:
        raise InvalidParams(f"attachments are {total} bytes, over the limit of {max_bytes}")
    return tuple(checked)


def _file(item: Mapping[str, object], index: int) -> File:
    where = f"attachment #{index}"
    unknown = item.keys() - _KEYS
    if unknown:
        raise InvalidParams(f"{where}: unknown keys {sorted(map(str, unknown))}")
    filename = item.get("filename")
    if (
        not isinstance(filename, str)
        or not filename.strip()
        or len(filename) > 255
        or _BAD_FILENAME.search(filename)
    ):
        raise InvalidParams(f"{where}: filename must be a plain file name")
    try:
        filename.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidParams(f"{where}: filename contains invalid Unicode") from None
    content = item.get("content")
    if not isinstance(content, bytes | bytearray | memoryview):
        raise InvalidParams(f"{where}: content must be bytes")
    data = bytes(content)
    content_type = item.get("content_type") or (
        mimetypes.guess_type(filename)[0] or "application/octet-stream"
    )
    if not isinstance(content_type, str) or not _CONTENT_TYPE.fullmatch(content_type):
        raise InvalidParams(f"{where}: content_type must look like 'application/pdf'")
    return File(filename, content_type, data, hashlib.sha256(data).hexdigest())
