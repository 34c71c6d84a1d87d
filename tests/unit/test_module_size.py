"""Modules a reader can hold in one sitting: at most 600 lines, no function whose
branches a reader must keep in mind at once (radon grade D or worse)."""

from __future__ import annotations

from pathlib import Path

import pytest
from radon.complexity import cc_rank, cc_visit

import outbox

PACKAGE = Path(outbox.__file__).parent
MAX_LINES = 600
MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_a_module_is_at_most_600_lines(path: Path) -> None:
    lines = len(path.read_text("utf-8").splitlines())
    assert lines <= MAX_LINES, f"{_name(path)} has {lines} lines"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_function_is_grade_d_or_worse(path: Path) -> None:
    blocks = cc_visit(path.read_text("utf-8"))
    worst = [
        f"{block.fullname} {cc_rank(block.complexity)} ({block.complexity})"
        for block in blocks
        if cc_rank(block.complexity) in "DEF"
    ]
    assert worst == [], f"{_name(path)}: {worst}"
