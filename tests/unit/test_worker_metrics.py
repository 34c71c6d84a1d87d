"""Dramatiq's Prometheus middleware: only when asked for, with a fresh directory per pool."""

from __future__ import annotations

from pathlib import Path

import pytest
from dramatiq.brokers.stub import StubBroker

from outbox.telemetry.worker_metrics import FreshDirectory, add_worker_metrics, reset_once


def test_off_unless_the_pool_names_a_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("dramatiq_prom_db", raising=False)
    broker = StubBroker()
    assert not add_worker_metrics(broker)
    assert not any(type(m).__name__ == "Prometheus" for m in broker.middleware)


def test_on_with_a_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("dramatiq_prom_db", str(tmp_path))
    monkeypatch.setenv("dramatiq_prom_host", "127.0.0.1")
    broker = StubBroker()
    assert add_worker_metrics(broker)
    kinds = [type(m).__name__ for m in broker.middleware]
    # After-boot hooks run last-added first: the directory is emptied before use.
    assert kinds[-2:] == ["Prometheus", "FreshDirectory"]


def test_a_pool_without_a_metrics_host_is_warned_it_listens_everywhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("dramatiq_prom_db", str(tmp_path))
    monkeypatch.delenv("dramatiq_prom_host", raising=False)
    with caplog.at_level("WARNING", logger="outbox.telemetry.worker_metrics"):
        assert add_worker_metrics(StubBroker())
    assert "listen on 0.0.0.0" in caplog.text
    caplog.clear()
    monkeypatch.setenv("dramatiq_prom_host", "127.0.0.1")
    with caplog.at_level("WARNING", logger="outbox.telemetry.worker_metrics"):
        assert add_worker_metrics(StubBroker())
    assert caplog.text == ""


def test_directory_is_emptied_once_per_pool_start(tmp_path: Path) -> None:
    (tmp_path / "counter_41.db").write_bytes(b"old run")
    assert reset_once(tmp_path, run="100")
    assert not (tmp_path / "counter_41.db").exists()
    (tmp_path / "counter_101.db").write_bytes(b"first worker of this run")
    assert not reset_once(tmp_path, run="100")  # the second worker of the same pool
    assert (tmp_path / "counter_101.db").exists()
    assert reset_once(tmp_path, run="200")  # the pool restarted
    assert not (tmp_path / "counter_101.db").exists()


def test_middleware_uses_the_master_pid(tmp_path: Path) -> None:
    FreshDirectory(tmp_path).after_process_boot(StubBroker())
    assert (tmp_path / ".run").read_text().isdigit()
