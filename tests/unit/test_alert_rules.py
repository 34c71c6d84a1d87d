"""The alert rules: valid for Prometheus, and raising what they should (promtool)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from dashboards.build import BOUNCE_RATE_LIMIT, COMPLAINT_RATE_LIMIT, OLDEST_UNSENT_LIMIT

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "otel/prometheus/rules.yml"
CONFIG = ROOT / "otel/prometheus/prometheus.yml"
RULE_TESTS = Path(__file__).with_name("alert_rules_test.yml")


def promtool(*args: str) -> str:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail(
            "promtool not found; install it with `apt-get install -y prometheus` (Debian's "
            "package brings promtool and prometheus)"
        )
    done = subprocess.run([binary, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_rules_are_valid() -> None:
    assert "SUCCESS: 9 rules found" in promtool("check", "rules", str(RULES))


def test_rules_raise_the_expected_alerts() -> None:
    promtool("test", "rules", str(RULE_TESTS))


def test_compose_prometheus_config_is_valid() -> None:
    promtool("check", "config", str(CONFIG))


def test_every_alert_is_unit_tested() -> None:
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tested = {
        t["alertname"]
        for c in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for t in c.get("alert_rule_test", [])
    }
    assert alerts == tested


def test_dashboards_draw_the_alert_thresholds() -> None:
    exprs = {
        r["alert"]: r["expr"]
        for g in yaml.safe_load(RULES.read_text())["groups"]
        for r in g["rules"]
    }

    def limit(alert: str) -> float:
        match = re.search(r">\s*([0-9.]+)\s*$", exprs[alert].strip())
        assert match, exprs[alert]
        return float(match.group(1))

    assert limit("OutboxOldestUnsentTooOld") == OLDEST_UNSENT_LIMIT
    assert limit("OutboxBounceRateHigh") == BOUNCE_RATE_LIMIT
    assert limit("OutboxComplaintRateHigh") == COMPLAINT_RATE_LIMIT
