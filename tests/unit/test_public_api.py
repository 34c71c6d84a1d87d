from __future__ import annotations

import inspect
import subprocess
import sys

import outbox


def test_public_names() -> None:
    assert sorted(outbox.__all__) == [
        "Cancellation", "ConfigError", "Enqueued", "HeaderInjection", "IdempotencyConflict",
        "InvalidAddress", "InvalidContent", "InvalidField", "InvalidKey", "InvalidMessage",
        "InvalidParams", "MissingParams", "OutboxError", "Priority", "SenderNotAllowed",
        "Settings", "Status", "StoreError", "TemplateError", "TransportError", "UnknownTemplate",
        "cancel", "cancel_async", "enqueue", "enqueue_async", "enqueue_many",
        "enqueue_many_async", "read_events", "read_events_async",
    ]  # fmt: skip
    for name in outbox.__all__:
        assert getattr(outbox, name).__module__.startswith("outbox.")
    for name in outbox.__all__:
        if name.endswith("Error") or name.startswith("Invalid"):
            assert issubclass(getattr(outbox, name), outbox.OutboxError)


def test_enqueue_functions_are_functions() -> None:
    # A submodule of the same name must never shadow them.
    assert inspect.isfunction(outbox.enqueue)
    assert inspect.isfunction(outbox.enqueue_many)
    assert inspect.iscoroutinefunction(outbox.enqueue_async)
    assert inspect.iscoroutinefunction(outbox.enqueue_many_async)
    assert list(inspect.signature(outbox.enqueue_async).parameters) == list(
        inspect.signature(outbox.enqueue).parameters
    )
    assert inspect.isfunction(outbox.cancel)
    assert inspect.iscoroutinefunction(outbox.cancel_async)
    assert list(inspect.signature(outbox.enqueue).parameters)[:2] == ["conn", "idempotency_key"]
    assert inspect.isfunction(outbox.read_events)
    assert inspect.iscoroutinefunction(outbox.read_events_async)
    assert list(inspect.signature(outbox.read_events).parameters)[:3] == ["conn", "after", "limit"]


def test_parsing_bounces_does_not_load_the_database_driver() -> None:
    code = "import sys, outbox.bounce_parsing, outbox.cli; print('psycopg' in sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "False"
