"""``outbox templates check|preview``: compile, check and preview the templates."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from outbox.cli.output import JsonResult, Printer, Refused, Result, Said
from outbox.config import Settings
from outbox.message import preview as template_tools


@dataclass(frozen=True, slots=True)
class Checks(JsonResult):
    """Every template and language variant: compiled, example rendered, or its problem."""

    checked: list[template_tools.Checked]

    def json(self) -> Any:
        return [{"name": c.name, "version": c.version, "problem": c.problem} for c in self.checked]

    def text(self) -> str:
        if not self.checked:
            return "no template found"
        return "\n".join(_check_line(c) for c in self.checked)

    def exit_code(self) -> int:
        return 1 if any(c.problem for c in self.checked) else 0


def _check_line(checked: template_tools.Checked) -> str:
    if checked.problem:
        return f"FAIL {checked.name}: {checked.problem}"
    how = "compiled, example rendered" if checked.rendered_example else "compiled"
    return f"ok   {checked.name} {checked.version} ({how})"


def templates(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    if args.action == "check":
        return Checks(list(template_tools.check(settings)))
    if not args.name:
        return Refused("outbox templates preview needs a NAME", code=2)
    try:
        params = None if args.params is None else json.loads(args.params)
    except json.JSONDecodeError as exc:
        return Refused(f"outbox: --params is not JSON: {exc}", code=2)
    written = template_tools.preview(
        settings,
        args.name,
        params,
        out_dir=args.out,
        to=args.to,
        priority=args.priority,
        locale=args.locale,
    )
    return Said("\n".join(str(path) for path in (written.eml, written.html) if path))
