"""The examples of README.md and docs/*.md, read from the Markdown as it is now.

The convention, which docs/development.md states for writers:

- every fenced block tagged ``python`` or ``js`` is a complete example, and so
  is every ``sh`` block that calls ``curl``: each is run by
  tests/integration/test_doc_examples.py;
- a block that is only a part (one call's arguments, a sketch) says so on the
  line just before its fence, with its reason: ``<!-- fragment: why -->``;
- an example uses no name it does not import or define, except those of the
  reader's application (tests/doc_examples/shop.py: ``DATABASE_URL``,
  ``create_order``, ``refund_order``, ``Order``; for Node ``loginId``,
  ``user``, ``params``), and may ``await`` at its top level, as in
  ``python -m asyncio``; one that imports Django runs in the Django project;
- the HTTP API is addressed as ``https://mail.example.com`` with the key in
  ``OUTBOX_API_KEY``; the test points both at a real ``outbox web``.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
BASE_URL = "https://mail.example.com"
# The reader's application (tests/doc_examples/shop.py), and a Django project's model.
GIVEN = frozenset({"DATABASE_URL", "create_order", "refund_order", "Order"})
GIVEN_DJANGO = frozenset({"Order"})
RUN = ("python", "js")  # every block of these; sh only when it calls curl

_FENCE = re.compile(r"^```(?P<tag>[\w+-]*)\n(?P<code>.*?)^```$", re.S | re.M)
_FRAGMENT = re.compile(r"<!-- fragment: (?P<why>[^>]*?) -->\s*\Z")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    tag: str
    code: str
    fragment: str | None  # the reason it is not complete; None: it is an example

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        if self.fragment is not None:
            return False
        return self.tag in RUN or (self.tag == "sh" and "curl " in self.code)

    @property
    def uses_django(self) -> bool:
        return re.search(r"^\s*(from|import) django\b", self.code, re.M) is not None


def blocks() -> list[Block]:
    """Every fenced block of the documentation, in order."""
    found = []
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n")
            last = before.rsplit("\n", 1)[-1]
            fragment = _FRAGMENT.search(last)
            found.append(
                Block(
                    path=path,
                    line=text.count("\n", 0, match.start()) + 1,
                    tag=match.group("tag"),
                    code=match.group("code"),
                    fragment=fragment.group("why").strip() if fragment else None,
                )
            )
    return found


def examples(*tags: str) -> list[Block]:
    return [b for b in blocks() if b.runs and b.tag in tags]


def free_names(code: str) -> set[str]:
    """The names ``code`` reads but never binds (imports, assignments, defs, arguments)."""
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(code, "<example>", "exec", flags=flags)
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    return read - bound - set(dir(builtins))


def enqueues_when_run(code: str) -> bool:
    """Whether ``code`` calls an ``enqueue*`` function itself, not only in what it defines."""
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    pending: list[ast.AST] = [compile(code, "<example>", "exec", flags=flags)]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue  # runs when called (a route, by a request), not when the example runs
        called = node.func if isinstance(node, ast.Call) else None
        if isinstance(called, ast.Attribute) and called.attr.startswith("enqueue"):
            return True
        pending.extend(ast.iter_child_nodes(node))
    return False
