"""compose.yaml as shipped is accepted by the code: each Outbox service's command,
started outside containers with the environment compose gives it, stays up.

`docker-compose config` (Debian's docker-compose; `./dev test` installs it) resolves
the file as compose does: the anchors, the merges and the required secret. Then
what only containers provide is mapped to this machine: the service host names to
127.0.0.1, the database to this test's own, Mailpit to a sink; and what would
collide with other runs here is made this run's own (ports, broker namespace,
state directory).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from outbox.config import Settings
from outbox.testing.sink import SmtpSink
from tests.integration.formation import (
    ROOT,
    bare_env,
    free_port,
    isolated,
    login_code_delivered,
    started,
    wait_until_healthy,
)
from tests.keys import SECRET

pytestmark = pytest.mark.slow  # every service of the stack started and watched

# Each Outbox service and the probe name of its process.
PROBES = {
    "relay": "relay-high",
    "relay_bulk": "relay-bulk",
    "worker_high": "worker-high",
    "worker_bulk": "worker-bulk",
    "metrics": "metrics",
    "web": "web",
    "bounces": "bounces",
    "webhooks": "webhooks",
}


def compose_config(**env: str) -> subprocess.CompletedProcess[str]:
    found = shutil.which("docker-compose")
    assert found, (
        "docker-compose is not installed: apt-get install docker-compose (./dev test does)"
    )
    return subprocess.run(
        [found, "-f", str(ROOT / "compose.yaml"), "config"],
        env=bare_env(**env), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_compose_requires_a_secret() -> None:
    missing = compose_config()
    assert missing.returncode != 0
    assert "set OUTBOX_SECRET" in missing.stderr
    assert "change-me" not in (ROOT / "compose.yaml").read_text()


def _resolved() -> dict[str, Any]:
    done = compose_config(OUTBOX_SECRET=SECRET)
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = yaml.safe_load(done.stdout)
    return config


def test_every_outbox_service_is_probed_here() -> None:
    services = _resolved()["services"]
    outbox = {name for name, s in services.items() if "build" in s}
    assert outbox == {*PROBES, "migrate"}


def _local(value: str, settings: Settings, sink: SmtpSink) -> str:
    """A value compose gives a container, as this machine reaches the same service."""
    if value.startswith("postgresql://"):
        return settings.database_url  # the postgres service, as this test's own database
    if value.startswith("smtp://"):
        return sink.url  # Mailpit, as a recording sink
    if "://" in value:
        parts = urlsplit(value)
        if parts.hostname in {"redis", "jaeger"}:
            return value.replace(f"//{parts.hostname}:", "//127.0.0.1:")
    return value


def test_each_outbox_service_stays_up(settings: Settings, tmp_path: Path) -> None:
    services = _resolved()["services"]
    state = tmp_path / "state"
    with SmtpSink() as sink:
        envs = {}
        for name in ["migrate", *PROBES]:
            given = services[name].get("environment") or {}
            env = bare_env(**{k: _local(str(v), settings, sink) for k, v in given.items()})
            env |= isolated(settings, state)
            env |= {"PORT": str(free_port()), "OUTBOX_BOUNCE_PORT": str(free_port())}
            envs[name] = env
        migrate = subprocess.run(
            services["migrate"]["command"], env=envs["migrate"], cwd=ROOT,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert migrate.returncode == 0, migrate.stderr
        with contextlib.ExitStack() as stack:
            procs = {
                name: stack.enter_context(
                    started(services[name]["command"], envs[name], tmp_path / f"{name}.log")
                )
                for name in PROBES
            }
            wait_until_healthy(list(PROBES.values()), envs["web"])
            time.sleep(15)
            for name, proc in procs.items():
                assert proc.poll() is None, (name, (tmp_path / f"{name}.log").read_text()[-2000:])
            login_code_delivered(settings, sink, "compose")
