"""``python -m tests.doc_examples.run_python FILE``: one Python example of the docs, as written.

The example runs in a module namespace of its own with the reader's application
(:mod:`tests.doc_examples.shop`, or for a Django example the test project's
``Order``) and may ``await`` at its top level. The exit status is the verdict.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import sys
import types
from pathlib import Path
from typing import Any


def given(source: str) -> dict[str, Any]:
    if "django" in source:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django_project.configured")
        import django  # noqa: PLC0415
        from django.core.management import call_command  # noqa: PLC0415

        django.setup()
        call_command("migrate", run_syncdb=True, verbosity=0)
        call_command("outbox_migrate", verbosity=0)
        from tests.django_project.shop.models import Order  # noqa: PLC0415

        return {"Order": Order}
    from tests.doc_examples import shop  # noqa: PLC0415
    from tests.doc_examples.markdown import GIVEN  # noqa: PLC0415

    shop.prepare()
    return {name: getattr(shop, name) for name in GIVEN}


def main(path: str) -> None:
    source = Path(path).read_text(encoding="utf-8")
    module = types.ModuleType("doc_example")  # a module indeed: SQLAlchemy looks it up
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    namespace.update(given(source))
    code = compile(source, path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)  # the documentation's own example
    if inspect.iscoroutine(result):
        asyncio.run(result)


if __name__ == "__main__":
    main(sys.argv[1])
