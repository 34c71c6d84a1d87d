"""``classify`` command: print one JSON object per failed recipient of each file."""

from __future__ import annotations

import json
import sys
from typing import TextIO

from outbox.bounce_parsing.parser import parse_bounce

_KEYS = ("class", "recipient", "status", "reason", "diagnostic", "original_message_id")


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as handle:
        return handle.read()


def classify_command(paths: list[str], out: TextIO) -> int:
    """Classify each file (``-`` is stdin); return 0, or 1 if a file could not be read.

    Non-bounces and auto-replies print nothing.  With several files each object also
    carries a ``file`` key.
    """
    status = 0
    for path in paths:
        try:
            raw = _read(path)
        except OSError as exc:
            print(f"{path}: {exc.strerror or exc}", file=sys.stderr)
            status = 1
            continue
        for result in parse_bounce(raw):
            full = result.to_json()
            record: dict[str, str | None] = {key: full[key] for key in _KEYS}
            if len(paths) > 1:
                record["file"] = path
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return status


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] != "classify":
        print("usage: python -m outbox.bounce_parsing classify FILE [FILE ...]", file=sys.stderr)
        return 2
    return classify_command(args[1:], sys.stdout)
