"""Installed into someone else's application: one import package, refusing bad settings.

The distribution is built as a wheel and installed into a folder of its own;
a scratch application with a ``jobs`` package of its own (a common name)
enqueues an email, and ``dramatiq outbox.worker`` started from that
application's directory delivers it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from outbox.config import Settings
from outbox.testing.sink import SmtpSink
from tests.integration.helpers import statuses

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def site(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed alone; its dependencies come from this environment."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "-t",
            str(target),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    return target


@pytest.mark.slow
def test_the_distribution_installs_one_import_package(wheel: Path) -> None:
    assert wheel.name.startswith("outbox_email-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert archive.read(top_level).decode().split() == ["outbox"]
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"outbox"}
    # What the package needs at run time travels with it.
    # Every module's file of named queries.
    query_files = {
        p.relative_to(ROOT).as_posix()
        for p in ROOT.joinpath("outbox").rglob("*.sql")
        if "migrations" not in p.parts
    }
    assert "outbox/db/store/relaying.sql" in query_files
    assert query_files <= set(names)
    assert any(n.startswith("outbox/db/sql/migrations/0001_") for n in names)
    assert "outbox/templates/login_code/template.toml" in names
    assert "outbox/py.typed" in names


def _app(root: Path) -> Path:
    app = root / "shop"
    (app / "jobs").mkdir(parents=True)
    # The application's own jobs package: it must neither shadow nor be taken for ours.
    (app / "jobs" / "__init__.py").write_text("RAN = 'the shop jobs package'\n")
    (app / "place_order.py").write_text(
        textwrap.dedent(
            """
            import sys

            import psycopg

            import jobs
            import outbox

            assert jobs.RAN == "the shop jobs package"
            with psycopg.connect(sys.argv[1]) as conn:
                # The business change and its email commit together.
                conn.execute("CREATE TABLE IF NOT EXISTS shop_order (id int PRIMARY KEY)")
                conn.execute("INSERT INTO shop_order VALUES (1001)")
                sent = outbox.enqueue(
                    conn,
                    idempotency_key="order-1001-login",
                    to="buyer@example.com",
                    template="login_code",
                    params={"name": "Buyer", "code": "424242", "product": "Shop", "minutes": 5},
                    priority="high",
                )
            print(sent.message_id)
            """
        )
    )
    return app


def _env(settings: Settings, site: Path, **extra: str) -> dict[str, str]:
    # The installed copy comes first, ahead of this checkout's editable install.
    return {
        **os.environ,
        **settings.to_env(),
        "PYTHONPATH": str(site),
        **extra,
    }


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    with SmtpSink() as running:
        yield running


@pytest.mark.slow
def test_a_scratch_app_with_its_own_jobs_package_delivers(
    settings: Settings, site: Path, sink: SmtpSink, tmp_path: Path
) -> None:
    app = _app(tmp_path)
    env = _env(settings, site, SMTP_URL=sink.url, dramatiq_worker_timeout="5")
    where = subprocess.run(
        [sys.executable, "-c", "import outbox; print(outbox.__file__)"],
        cwd=app, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(site))
    placed = subprocess.run(
        [sys.executable, "place_order.py", settings.database_url],
        cwd=app, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert placed.returncode == 0, placed.stderr
    message_id = placed.stdout.strip()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "outbox.cli", "relay", "--priority", "high"],
            cwd=app, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [sys.executable, "-m", "dramatiq", "outbox.worker", "-Q", "email_high", "-p", "1",
             "-t", "2"],
            cwd=app, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ),
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not sink.messages and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
    assert [m.message_id for m in sink.messages] == [message_id]
    assert statuses(settings) == {"sent": 1}


# Each long-running process with a setting it cannot work with: (command, env, variable).
BROKEN = [
    (["-m", "dramatiq", "outbox.worker", "-Q", "email_high", "-p", "1", "-t", "1"],
     {"SMTP_URL": "htp://foo"}, "SMTP_URL"),
    (["-m", "dramatiq", "outbox.worker", "-Q", "email_bulk", "-p", "1", "-t", "1"],
     {"OUTBOX_ATTACHMENTS_DIR": "/no/such/dir"}, "OUTBOX_ATTACHMENTS_DIR"),
    (["-m", "dramatiq", "outbox.worker", "-Q", "email_high", "-p", "1", "-t", "1"],
     {"OUTBOX_TRANSPORT": "resend"}, "OUTBOX_RESEND_API_KEY"),
    (["-m", "outbox.cli", "relay"], {"REDIS_URL": "http://127.0.0.1:6379"}, "REDIS_URL"),
    (["-m", "outbox.cli", "relay"], {"OUTBOX_MAX_IN_FLIGHT": "0"}, "OUTBOX_MAX_IN_FLIGHT"),
    (["-m", "outbox.cli", "web", "--port", "0"],
     {"OUTBOX_POSTMARK_WEBHOOK_AUTH": "nocolon"}, "OUTBOX_POSTMARK_WEBHOOK_AUTH"),
    (["-m", "outbox.cli", "bounces", "serve"],
     {"OUTBOX_BOUNCE_DOMAIN": "bounces.example.com", "OUTBOX_SECRET": ""}, "OUTBOX_SECRET"),
    (["-m", "outbox.cli", "worker", "high"], {"OUTBOX_WORKER_THREADS": "0"},
     "OUTBOX_WORKER_THREADS"),
    (["-m", "outbox.cli", "worker", "all"], {"OUTBOX_HIGH_IDLE_POLL_MS": "x"},
     "OUTBOX_HIGH_IDLE_POLL_MS"),
    (["-m", "outbox.cli", "metrics"], {"DATABASE_URL": "mysql://db/x"}, "DATABASE_URL"),
    (["-m", "outbox.cli", "relay"], {"OUTBOX_FROM": "nobody"}, "OUTBOX_FROM"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "env", "variable"), BROKEN, ids=lambda v: str(v)[:40])
def test_a_process_with_a_broken_setting_exits_naming_it(
    settings: Settings, args: list[str], env: dict[str, str], variable: str
) -> None:
    environ = {**os.environ, **settings.to_env(), **env}
    done = subprocess.run(
        [sys.executable, *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=10,  # exits, not hangs: TimeoutExpired otherwise
        check=False,
    )
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "cannot start" in output
    assert variable in output
    assert "ready for action" not in output
    assert "Traceback" not in output


def test_the_procfile_worker_entry_starts_the_installed_worker(settings: Settings) -> None:
    # `outbox worker` checks the worker's settings before it becomes Dramatiq.
    env = {**os.environ, **settings.to_env(), "SMTP_URL": "htp://foo"}
    worker = [sys.executable, "-m", "outbox.cli", "worker"]
    done = subprocess.run(
        [*worker, "bulk"], env=env, capture_output=True, text=True, timeout=10, check=False
    )
    assert done.returncode == 2
    assert "outbox worker: cannot start: SMTP_URL" in done.stderr
    env = {**os.environ, **settings.to_env(), "OUTBOX_BULK_NICENESS": "25"}
    bad_pool = subprocess.run(
        [*worker, "bulk"], env=env, capture_output=True, text=True, timeout=10, check=False
    )
    assert bad_pool.returncode == 2
    assert bad_pool.stderr.strip().splitlines() == [
        "outbox worker: cannot start: OUTBOX_BULK_NICENESS must be a whole number from 0 to 19"
    ]
    unknown = subprocess.run(
        [*worker, "newsletters"], env=env, capture_output=True, text=True, timeout=10, check=False
    )
    assert unknown.returncode == 2
    assert "invalid choice: 'newsletters'" in unknown.stderr
    procfile = (ROOT / "Procfile").read_text()
    assert "worker_high: outbox worker high" in procfile
    assert "jobs/" not in procfile
