"""Modules a reader can hold in one sitting: at most 600 lines, no function whose
branches a reader must keep in mind at once (radon grade D or worse)."""

from __future__ import annotations

from pathlib import Path

import pytest
from radon.complexity import cc_rank, cc_visit

import outbox

PACKAGE = Path(outbox.__file__).parent
MAX_LINES = 600
# Data tables: rows a reader scans, not logic to follow. Each says why here.
LONG_TABLES = {
    # The phrase rules that name a bounce's reason, one rule per row.
    "bounce_parsing/reasons.py",
}
MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_a_module_is_at_most_600_lines(path: Path) -> None:
    lines = len(path.read_text("utf-8").splitlines())
    if _name(path) in LONG_TABLES:
        return
    assert lines <= MAX_LINES, f"{_name(path)} has {lines} lines"


def test_the_exempt_tables_exist_and_need_it() -> None:
    for name in LONG_TABLES:
        path = PACKAGE / name
        assert len(path.read_text("utf-8").splitlines()) > MAX_LINES, f"{name} needs no exemption"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_function_is_grade_d_or_worse(path: Path) -> None:
    blocks = cc_visit(path.read_text("utf-8"))
    worst = [
        f"{block.fullname} {cc_rank(block.complexity)} ({block.complexity})"
        for block in blocks
        if cc_rank(block.complexity) in "DEF"
    ]
    assert worst == [], f"{_name(path)}: {worst}"
