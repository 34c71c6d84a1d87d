"""deploy/kubernetes/ against the Kubernetes API's schemas (offline, kubernetes-validate),
and in step with the Procfile: the same process types running the same commands."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from outbox.cli import worker_pools
from outbox.telemetry import liveness

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
KUBERNETES = "1.30.0"  # the oldest release still supported upstream when this was written


def _documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        found += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return found


def _kind(kind: str) -> list[dict[str, Any]]:
    return [d for _, d in _documents() if d["kind"] == kind]


def _procfile() -> dict[str, str]:
    lines = (ROOT / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip())


def _component(document: dict[str, Any]) -> str:
    return str(document["metadata"]["labels"]["app.kubernetes.io/component"])


@pytest.mark.parametrize(
    "document",
    [d for _, d in _documents() if d["apiVersion"] != "keda.sh/v1alpha1"],
    ids=lambda d: f"{d['kind']}/{d['metadata']['name']}",
)
def test_each_resource_is_valid_for_the_kubernetes_api(document: dict[str, Any]) -> None:
    kubernetes_validate.validate(document, KUBERNETES, strict=True)


def test_a_wrong_field_is_caught_by_the_validation() -> None:
    # Guards the test above: a schema that accepted anything would pass it.
    broken = _kind("Deployment")[0]
    broken = {**broken, "spec": {**broken["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_kustomization_lists_every_manifest() -> None:
    listed = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"]
    present = {p.name for p in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(listed) == sorted(present)


def test_a_deployment_per_procfile_process_running_its_command() -> None:
    procfile = _procfile()
    deployments = {_component(d): d for d in _kind("Deployment")}
    assert set(deployments) == set(procfile) - {"release"}
    for name, deployment in deployments.items():
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert container["command"] == shlex.split(procfile[name]), name


def test_the_release_step_is_a_job() -> None:
    [job] = _kind("Job")
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == shlex.split(_procfile()["release"])


def test_every_deployment_is_probed_as_its_own_process() -> None:
    for deployment in _kind("Deployment"):
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        live = container["livenessProbe"]["exec"]["command"]
        ready = container["readinessProbe"]["exec"]["command"]
        assert live[:3] == ["outbox", "health", "--process"]
        assert live[3] in liveness.NAMES
        assert ready == [*live, "--ready"]
        assert container["startupProbe"]["exec"]["command"] == live
        assert container["resources"]["requests"]["cpu"]
        assert container["resources"]["limits"]["memory"]


def test_the_probe_names_the_process_its_command_reports_as() -> None:
    for deployment in _kind("Deployment"):
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        command, probe = container["command"], container["livenessProbe"]["exec"]["command"][3]
        words = command[command.index("outbox") + 1 :]
        if words[0] == "relay":
            assert probe == f"relay-{words[2]}" if "--priority" in words else "relay"
        elif words[0] == "worker":
            assert probe == f"worker-{words[1]}"
        else:
            assert probe == words[0]


def test_the_pools_get_longer_than_their_shutdown_timeout() -> None:
    [config] = _kind("ConfigMap")
    shutdown = int(
        config["data"].get(
            "OUTBOX_WORKER_SHUTDOWN_SECONDS",
            worker_pools.whole_number({}, "OUTBOX_WORKER_SHUTDOWN_SECONDS"),
        )
    )
    for deployment in _kind("Deployment"):
        grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        if _component(deployment).startswith("worker"):
            # The pool's own timeout, then up to 3 s of results being written.
            assert grace >= shutdown + 3 + 5, _component(deployment)


def test_both_pools_have_a_disruption_budget() -> None:
    selected = {b["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"]
                for b in _kind("PodDisruptionBudget")}  # fmt: skip
    assert selected == {"worker_high", "worker_bulk"}


def test_keda_scales_the_bulk_pool_on_its_due_backlog() -> None:
    [scaled] = _kind("ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "outbox-worker-bulk"
    assert scaled["spec"]["minReplicaCount"] >= 1  # never to zero: the pool's probes
    [trigger] = scaled["spec"]["triggers"]
    assert trigger["type"] == "postgresql"
    assert trigger["metadata"]["connectionFromEnv"] == "DATABASE_URL"
    assert int(trigger["metadata"]["targetQueryValue"]) > 0
    bulk = next(d for d in _kind("Deployment") if _component(d) == "worker_bulk")
    assert bulk["metadata"]["name"] == scaled["spec"]["scaleTargetRef"]["name"]


def due_backlog_query() -> str:
    [scaled] = _kind("ScaledObject")
    return str(scaled["spec"]["triggers"][0]["metadata"]["query"])
