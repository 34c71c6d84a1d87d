"""The alert rules: valid for Prometheus, and raising what they should (promtool)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from dashboards.build import BOUNCE_RATE_LIMIT, COMPLAINT_RATE_LIMIT, LOGIN_CODE_LATE

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


@pytest.mark.prometheus
def test_rules_are_valid() -> None:
    assert "SUCCESS: 15 rules found" in promtool("check", "rules", str(RULES))


@pytest.mark.prometheus
def test_rules_raise_the_expected_alerts() -> None:
    promtool("test", "rules", str(RULE_TESTS))


@pytest.mark.prometheus
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
        # The first comparison is the threshold; any `and` after it is a minimum volume.
        match = re.search(r"\)\s*>\s*([0-9.]+)", exprs[alert])
        assert match, exprs[alert]
        return float(match.group(1))

    assert limit("OutboxLoginCodeLate") == LOGIN_CODE_LATE
    assert limit("OutboxBounceRateHigh") == BOUNCE_RATE_LIMIT
    assert limit("OutboxComplaintRateHigh") == COMPLAINT_RATE_LIMIT


def test_every_alert_has_a_case_that_fires_and_one_that_must_not() -> None:
    cases: dict[str, set[bool]] = {}
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            cases.setdefault(check["alertname"], set()).add(bool(check["exp_alerts"]))
    assert {name: seen for name, seen in cases.items() if seen != {True, False}} == {}


def test_every_alert_waits_or_says_why_not() -> None:
    # A rule without `for:` fires on one evaluation: only when its expression
    # measures a duration itself (an age, an increase over a window).
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            assert "for" in rule or re.search(r"age_seconds|increase\(", rule["expr"]), rule[
                "alert"
            ]


ALERTMANAGER = ROOT / "otel/alertmanager"


def amtool(*args: str) -> str:
    binary = shutil.which("amtool")
    if binary is None:
        pytest.fail(
            "amtool not found; install it with `apt-get install -y prometheus-alertmanager`"
        )
    done = subprocess.run([binary, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


@pytest.mark.prometheus
def test_alertmanager_routes_pages_and_tickets_to_the_webhooks(tmp_path: Path) -> None:
    written = tmp_path / "alertmanager.yml"
    page = "https://hooks.example/page?team=mail&token=a|b"  # & and | stay as they are
    subprocess.run(
        [
            "sh",
            str(ALERTMANAGER / "start.sh"),
            str(ALERTMANAGER / "alertmanager.yml"),
            str(written),
        ],
        env={"ALERT_WEBHOOK_URL": page, "ALERT_TICKET_WEBHOOK_URL": "", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    amtool("check-config", str(written))
    receivers = {r["name"]: r for r in yaml.safe_load(written.read_text())["receivers"]}
    # No ticket URL of its own: tickets go to the page webhook too.
    assert {name: r["webhook_configs"][0]["url"] for name, r in receivers.items()} == {
        "page": page,
        "ticket": page,
    }
    routed = f"--config.file={written}"
    assert amtool("config", "routes", "test", routed, "severity=page") == "page"
    assert amtool("config", "routes", "test", routed, "severity=ticket") == "ticket"
    severities = {
        r["labels"]["severity"]
        for g in yaml.safe_load(RULES.read_text())["groups"]
        for r in g["rules"]
    }
    assert severities == {"page", "ticket"}
