"""A real Prometheus on loopback for the tests, configured from otel/prometheus.

Debian's ``prometheus`` package provides the server and promtool; a missing
binary fails the test with the command that installs it (nothing skips).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = ROOT / "otel" / "prometheus"
INSTALL = "install it with `apt-get install -y prometheus` (Debian; brings promtool too)"


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found; {INSTALL}")
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Prometheus:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"

    def api(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as reply:
            body = json.load(reply)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr, time=at or time.time())[
            "result"
        ]
        return result

    def query_range(self, expr: str, start: float, end: float) -> list[dict[str, Any]]:
        data = self.api("query_range", query=expr, start=start, end=end, step="1s")
        result: list[dict[str, Any]] = data["result"]
        return result

    def value(self, expr: str) -> float:
        result = self.query(expr)
        assert len(result) == 1, (expr, result)
        return float(result[0]["value"][1])

    def firing(self) -> set[str]:
        return {
            a["labels"]["alertname"] for a in self.api("alerts")["alerts"] if a["state"] == "firing"
        }

    def scraped(self, job: str) -> bool:
        targets = self.api("targets")["activeTargets"]
        mine = [t for t in targets if t["labels"]["job"] == job]
        return bool(mine) and all(t["health"] == "up" for t in mine)


@contextmanager
def prometheus(tmp_path: Path, targets: Mapping[str, Sequence[str]]) -> Iterator[Prometheus]:
    """The compose configuration with these targets per job, scraping every second."""
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(PROMETHEUS_DIR / rule) for rule in config["rule_files"]]
    for job in config["scrape_configs"]:
        labels = job["static_configs"][0].get("labels", {})  # the deployment, as shipped
        job["static_configs"] = [{"targets": list(targets[job["job_name"]]), "labels": labels}]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    log = (tmp_path / "prometheus.log").open("ab")
    proc = subprocess.Popen(
        [
            binary("prometheus"),
            f"--config.file={path}",
            f"--storage.tsdb.path={tmp_path / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = Prometheus(port)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"prometheus did not start: {(tmp_path / 'prometheus.log').read_text()}"
                    ) from None
                time.sleep(0.2)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
