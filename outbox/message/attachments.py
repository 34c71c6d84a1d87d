"""Files attached by reference: checked at enqueue, read at send time.

An email names its files in ``params["attachments"]``, paths relative to
``OUTBOX_ATTACHMENTS_DIR``::

    [{"path": "invoices/1234.pdf", "filename": "Invoice-1234.pdf"}]

The row holds the reference, not the bytes: keep attached files unchanged
until the email is sent (an invoice PDF is written once). A reference that
leaves the directory (``..``, an absolute path, a symlink pointing out), a
missing file or files over ``OUTBOX_MAX_ATTACHMENT_BYTES`` together raise
:class:`~outbox.errors.InvalidParams`.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from outbox.errors import AttachmentUnavailable, InvalidParams
from outbox.message.build import Attachment

PARAM = "attachments"
_KEYS = frozenset({"path", "filename", "content_type"})
_CONTENT_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}")
_BAD_FILENAME = re.compile(r"[\x00-\x1f\x7f/\\]")


class _Missing(InvalidParams):
    """At enqueue, a missing file is the caller's mistake; at send time, the worker's."""


@dataclass(frozen=True, slots=True)
class Reference:
    path: Path  # resolved, inside the attachments directory
    filename: str
    content_type: str
    size: int


def references(params: Mapping[str, Any], *, directory: str, max_bytes: int) -> list[Reference]:
    """The checked references of an email's params (none when it names no files)."""
    raw = params.get(PARAM)
    if raw is None:
        return []
    if not directory:
        raise InvalidParams("params name attachments, but OUTBOX_ATTACHMENTS_DIR is not set")
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise InvalidParams('attachments must be a list of {"path": ..., "filename": ...}')
    root = Path(directory).resolve()
    try:
        found = [_reference(root, item, index) for index, item in enumerate(raw)]
    except OSError as exc:
        # A name too long, a loop of symlinks, a directory we may not read.
        raise InvalidParams(f"attachments: a path cannot be used ({exc.strerror})") from None
    except ValueError:
        raise InvalidParams("attachments: a path contains a NUL character") from None
    total = sum(r.size for r in found)
    if total > max_bytes:
        raise InvalidParams(f"attachments are {total} bytes, over the limit of {max_bytes}")
    return found


def load(params: Mapping[str, Any], *, directory: str, max_bytes: int) -> list[Attachment]:
    """The files themselves, checked again: they may have changed since enqueue.

    Enqueue found every file, so a file missing now, or no directory at all,
    says the worker does not see the application's storage (another
    OUTBOX_ATTACHMENTS_DIR, an unmounted volume): :class:`AttachmentUnavailable`,
    which delivery treats as its own outage, not as the email's fault.
    """
    if not directory:
        raise AttachmentUnavailable("this worker has no OUTBOX_ATTACHMENTS_DIR")
    try:
        refs = references(params, directory=directory, max_bytes=max_bytes)
    except _Missing as exc:
        raise AttachmentUnavailable(f"{exc} (as this worker sees it)") from None
    loaded = []
    for ref in refs:
        with ref.path.open("rb") as file:
            data = file.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise InvalidParams(f"attachment {ref.filename!r} grew over the limit")
        loaded.append(Attachment(ref.filename, ref.content_type, data))
    return loaded


def _reference(root: Path, item: dict[str, Any], index: int) -> Reference:
    where = f"attachment #{index}"
    unknown = item.keys() - _KEYS
    if unknown:
        raise InvalidParams(f"{where}: unknown keys {sorted(unknown)}")
    relative = item.get("path")
    if not isinstance(relative, str) or not relative or Path(relative).is_absolute():
        raise InvalidParams(f"{where}: path must be relative to OUTBOX_ATTACHMENTS_DIR")
    path = (root / relative).resolve()  # follows symlinks, so none can lead out
    if not path.is_relative_to(root):
        raise InvalidParams(f"{where}: {relative!r} is outside OUTBOX_ATTACHMENTS_DIR")
    if not path.is_file():
        raise _Missing(f"{where}: no file {relative!r} in OUTBOX_ATTACHMENTS_DIR")
    filename = item.get("filename", path.name)
    if (
        not isinstance(filename, str)
        or not filename.strip()
        or len(filename) > 255
        or _BAD_FILENAME.search(filename)
    ):
        raise InvalidParams(f"{where}: filename must be a plain file name")
    content_type = item.get("content_type") or (
        mimetypes.guess_type(filename)[0] or "application/octet-stream"
    )
    if not isinstance(content_type, str) or not _CONTENT_TYPE.fullmatch(content_type):
        raise InvalidParams(f"{where}: content_type must look like 'application/pdf'")
    return Reference(path, filename, content_type, path.stat().st_size)
