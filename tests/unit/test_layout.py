"""The package's layout: one import package, arrows one way, one error tree."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import outbox
from outbox import errors

PACKAGE = Path(outbox.__file__).parent

# Each layer may import its own and the layers below it, never one above.
# A module is placed by its own name first (pure modules of a subpackage are
# core), then by its subpackage.
LAYERS: list[set[str]] = [
    {
        "errors",
        "models",
        "config",
        "token_signatures",
        "redact",
        "url_credentials",
        "address_spans",
        "keys",
        "bounce_parsing",
        "pacing.rules",
        "delivery.classify",
        "delivery.backoff",
        "delivery.retry",
        "delivery.breaker",
        "relay.sweep_guard",
        "message.message_id",
        "message.placeholders",
        "message.build",
        "message.list_unsubscribe",
        "message.return_path",
        "message.links",
        "telemetry.metrics",
        "cli.input",
        "web.console_auth",
        "web.console_query",
        "web.chart",
        "domain_auth",
        "broker_urls",
        "events.event_body",
        "events.retry_schedule",
        "events.hook_signing",
    },  # pure core
    # I/O edges; validate and fields are pure but for the address library
    {
        "db",
        "transports",
        "message",
        "pacing",
        "broker",
        "rabbitmq_queues",
        "telemetry",
        "validate",
        "fields",
        "domain_auth.dns_lookups",
    },
    {"delivery", "relay", "bounce_receiving", "intake", "cancelling", "preflight", "events"}
    | {"domain_auth.checker"},  # orchestration
    {"cli", "worker", "web", "testing", "django"},  # processes (django: an app in yours)
]
LAYERS[1] |= {"redis_clients", "rabbitmq_queues"}  # the broker's clients, beside it
DRIVERS = {"psycopg", "psycopg_pool", "dramatiq", "redis", "smtplib", "httpx", "boto3"}


def _rank(name: str) -> int:
    """The layer of ``name`` (a module path below outbox, e.g. ``pacing.rules``)."""
    parts = name.split(".")
    for candidate in (".".join(parts[:2]), parts[0]):
        for rank, layer in enumerate(LAYERS):
            if candidate in layer:
                return rank
    raise AssertionError(f"outbox.{name} is in no layer of this test: place it")


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts == ("__init__",):
            continue
        found.append((".".join(parts), path))
    return found


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if node.module == "outbox":
                names.update(f"outbox.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize(("top", "path"), _modules(), ids=str)
def test_imports_point_down(top: str, path: Path) -> None:
    rank = _rank(top)
    for name in _imports(path):
        parts = name.split(".")
        if parts[0] == "outbox" and len(parts) > 1 and ".".join(parts[1:]) != top:
            below = ".".join(parts[1:])
            assert _rank(below) <= rank, f"outbox.{top} imports {name}"
        if rank == 0:
            assert parts[0] not in DRIVERS, f"pure outbox.{top} imports {name}"


def test_module_names_are_not_repeated_across_subpackages() -> None:
    seen: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name in {"__init__.py", "__main__.py"}:
            continue
        assert path.name not in seen, f"{path} and {seen[path.name]}"
        seen[path.name] = path


def test_every_exception_is_in_the_outbox_error_tree() -> None:
    for _, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Busy")):
                assert path.name == "errors.py", f"{node.name} is defined in {path}"
    classes = [
        c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__
    ]
    for cls in classes:
        assert issubclass(cls, errors.OutboxError)
        assert cls.__name__ in (errors.__doc__ or ""), f"{cls.__name__} is not drawn in the tree"


# Postgres is reached in one place per kind of connection: the store package
# (its own pools and connections, a module per concern) and the executors,
# which run intake's pre-built statements on an application's connection of
# whichever driver it uses.
DATABASE_DRIVERS = {"psycopg", "psycopg_pool", "psycopg2", "asyncpg", "sqlalchemy"}
TALK_TO_POSTGRES = {"db.executors", "db.async_executors"}
STORE = "db.store"


def _talks_to_postgres(top: str) -> bool:
    return top in TALK_TO_POSTGRES or top == STORE or top.startswith(STORE + ".")


@pytest.mark.parametrize(("top", "path"), _modules(), ids=str)
def test_only_the_store_and_the_executors_import_a_database_driver(top: str, path: Path) -> None:
    drivers = {name for name in _imports(path) if name.split(".")[0] in DATABASE_DRIVERS}
    assert _talks_to_postgres(top) or not drivers, f"outbox.{top} imports {drivers}"


def test_the_store_is_a_package_of_modules_that_talk_to_postgres() -> None:
    store = [top for top, _ in _modules() if top.startswith(STORE + ".")]
    assert len(store) > 1, "the store's modules are not where this test looks"
    drivers = {
        top
        for top, path in _modules()
        if top.startswith(STORE + ".")
        and any(n.split(".")[0] in DATABASE_DRIVERS for n in _imports(path))
    }
    # Guards the test above: it would pass for any module if the store moved.
    assert f"{STORE}.connections" in drivers


# Endings that make a near-twin of a name: `outage`/`outages`, `sign`/`signing`,
# `validate`/`validation` name different things too alike to tell apart.
_ENDINGS = re.compile(r"(?:ations?|ates?|ions?|ings?|es|s|e)$")


def _stem(name: str) -> str:
    return _ENDINGS.sub("", name)


def test_stem_joins_the_forms_of_a_word_and_nothing_more() -> None:
    assert _stem("outage") == _stem("outages")
    assert _stem("sign") == _stem("signing")
    assert _stem("validate") == _stem("validation")
    assert _stem("statement") == _stem("statements")
    assert _stem("cancelling") == _stem("cancellation")
    assert _stem("server") == _stem("servers")
    assert _stem("results") != _stem("result_committer")


def test_no_two_modules_are_near_twins_in_name() -> None:
    seen: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in {"__init__.py", "__main__.py"}:
            continue
        stem = _stem(path.stem)
        assert stem not in seen, f"{path} and {seen[stem]} are near-twins in name"
        seen[stem] = path
