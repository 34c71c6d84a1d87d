from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bounces"


def load_expected() -> dict[str, list[dict[str, str | None]]]:
    """The verdict table: file name -> expected results (see fixtures README)."""
    with (FIXTURES / "expected.json").open(encoding="utf-8") as handle:
        data: dict[str, list[dict[str, str | None]]] = json.load(handle)
    return data


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()
