"""The Procfiles run locally as the README says: `honcho start -c release=0`, with only
the README's minimal settings; every process stays up and a login code goes out."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from outbox.config import Settings
from outbox.testing.sink import SmtpSink
from tests.integration.formation import (
    BIN,
    ROOT,
    bare_env,
    health,
    honcho_base_port,
    isolated,
    login_code_delivered,
    started,
    wait_until_healthy,
)

pytestmark = pytest.mark.slow  # a whole formation, watched for 20 s

# The probe name of each process (what `outbox health --process` takes).
PROBES = {
    "Procfile": ["relay-high", "relay-bulk", "worker-high", "worker-bulk", "bounces", "web",
                 "metrics", "webhooks"],
    "Procfile.small": ["relay", "worker-high", "worker-bulk", "webhooks", "web"],
}  # fmt: skip


def test_the_readme_names_the_local_start() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "honcho start -c release=0" in readme
    assert "honcho start -f Procfile.small -c release=0" in readme


@pytest.mark.parametrize("procfile", sorted(PROBES))
def test_every_process_stays_up_and_a_login_code_goes_out(
    procfile: str, settings: Settings, tmp_path: Path
) -> None:
    with SmtpSink() as sink:
        # The README's minimal settings: where Postgres, Redis and the SMTP relay are.
        env = bare_env(
            DATABASE_URL=settings.database_url, REDIS_URL=settings.redis_url, SMTP_URL=sink.url
        )
        env |= isolated(settings, tmp_path / "state")
        command = [str(BIN / "honcho"), "start", "-f", procfile, "-c", "release=0"]
        lines = len((ROOT / procfile).read_text().splitlines())
        command += ["-p", str(honcho_base_port(lines))]  # honcho's PORTs
        log = tmp_path / "honcho.log"
        with started(command, env, log) as honcho:
            wait_until_healthy(PROBES[procfile], env)
            time.sleep(20)
            output = log.read_text()
            assert honcho.poll() is None, output[-3000:]
            assert "stopped (rc=" not in output, output[-3000:]
            for name in PROBES[procfile]:
                probe = health(name, env)
                assert probe.returncode == 0, (name, probe.stdout, output[-3000:])
            if procfile == "Procfile":
                # The bounce server without a bounce domain stays up and says so once.
                assert output.count("OUTBOX_BOUNCE_DOMAIN is not set") == 1, output[-3000:]
            login_code_delivered(settings, sink, f"honcho-{procfile}")
