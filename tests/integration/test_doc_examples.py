"""Every complete example of README.md and docs/*.md, run as written against the real servers.

The examples are read from the Markdown when the tests run (tests/doc_examples/
markdown.py holds the convention), so a change to the docs that breaks one
fails here. Python examples run each in a process of its own on a private
database; the FastAPI one is also served by uvicorn and posted to; the curl
and Node examples talk to a real ``outbox web`` with a real key.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from outbox.db.store import migration_runner
from tests.conftest import ADMIN_URL
from tests.doc_examples import markdown

ROOT = markdown.ROOT
PYTHON = markdown.examples("python")
HTTP = markdown.examples("sh", "js")
# What a Node example takes as the reader's own (a login's id, the user, the params).
NODE_GIVEN = (
    "const loginId = 42;\n"
    'const user = { email: "alice@example.com" };\n'
    'const params = { name: "Alice", code: "482913", product: "Shop", minutes: 10 };\n'
)


@pytest.fixture
def private_db() -> Iterator[str]:
    """The name of a database of this test's own, migrated, dropped after."""
    name = f"outbox_docs_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        with psycopg.connect(_url(name)) as conn:
            migration_runner.migrate(conn)
        yield name
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def _url(name: str) -> str:
    return ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


def _env(db: str, **more: str) -> dict[str, str]:
    drop = ("DJANGO_SETTINGS_MODULE", "OUTBOX_FROM", "OUTBOX_SECRET", "OUTBOX_SENDER_DOMAINS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {
        **env,
        "DATABASE_URL": _url(db),
        "OUTBOX_TEST_DJANGO_DB": db,
        "PYTHONPATH": str(ROOT),
        **more,
    }


def _emails(db: str) -> list[tuple[str, str]]:
    with psycopg.connect(_url(db)) as conn:
        rows = conn.execute("SELECT idempotency_key, recipient FROM email_outbox ORDER BY id")
        return [(str(k), str(r)) for k, r in rows.fetchall()]


# -- the convention covers every example ---------------------------------------


def test_the_docs_hold_examples_of_each_kind() -> None:
    assert len(PYTHON) >= 6, [b.name for b in PYTHON]
    assert any(b.tag == "js" for b in HTTP)
    assert any(b.tag == "sh" for b in HTTP)
    assert any("FastAPI(" in b.code for b in PYTHON)
    assert any(b.uses_django for b in PYTHON)


def test_every_fragment_says_why() -> None:
    for block in markdown.blocks():
        if block.fragment is not None:
            assert len(block.fragment.split()) >= 3, f"{block.name}: say why it is a fragment"


def test_no_python_or_javascript_hides_under_another_tag() -> None:
    """A block that calls Outbox from Python or JS is tagged so, or it would escape the run."""
    for block in markdown.blocks():
        if block.tag in ("python", "js") or block.fragment is not None:
            continue
        assert block.tag in ("sh", "go", "json", ""), f"{block.name}: tag {block.tag!r}"
        assert not re.search(r"^\s*(import outbox|from outbox)|outbox\.\w+\(", block.code, re.M), (
            f"{block.name}: Python under tag {block.tag!r}"
        )
        assert "fetch(" not in block.code, f"{block.name}: JavaScript under tag {block.tag!r}"


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.name)
def test_a_python_example_uses_only_names_it_binds_or_the_application_gives(
    block: markdown.Block,
) -> None:
    given = markdown.GIVEN_DJANGO if block.uses_django else markdown.GIVEN
    assert markdown.free_names(block.code) <= given, block.name


# -- the examples run ------------------------------------------------------------


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.name)
def test_a_python_example_runs_as_written(
    block: markdown.Block, private_db: str, tmp_path: Path
) -> None:
    example = tmp_path / "example.py"
    example.write_text(block.code, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "tests.doc_examples.run_python", str(example)],
        cwd=ROOT, env=_env(private_db), capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert run.returncode == 0, f"{block.name}:\n{run.stdout}{run.stderr}"
    if markdown.enqueues_when_run(block.code):  # an example that enqueues leaves its email
        assert _emails(private_db), block.name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    pytest.fail(f"{url} never answered:\n{log.read_text()}")


def test_the_fastapi_example_serves_orders_under_uvicorn(private_db: str, tmp_path: Path) -> None:
    (block,) = [b for b in PYTHON if "FastAPI(" in b.code and "outbox.enqueue" in b.code]
    # The reader's shop.py: the example, with its database URL from the environment.
    app_file = tmp_path / "shop_app.py"
    app_file.write_text(
        "import os\nDATABASE_URL = os.environ['DATABASE_URL']\n" + block.code, encoding="utf-8"
    )
    with psycopg.connect(_url(private_db)) as conn:  # the reader's migration
        conn.execute(
            "CREATE TABLE orders (id serial PRIMARY KEY, name text NOT NULL,"
            " email text NOT NULL, total text NOT NULL)"
        )
    port = _free_port()
    log = tmp_path / "uvicorn.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "shop_app:app", "--port", str(port)],
            cwd=tmp_path, env=_env(private_db, PYTHONPATH=f"{tmp_path}:{ROOT}"),
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for(f"{url}/docs", server, log)
        order = {"name": "Alice", "email": "alice@example.com", "total": "12.00"}
        first = httpx.post(f"{url}/orders", json=order, timeout=30)
        second = httpx.post(f"{url}/orders", json={**order, "email": "bob@example.com"}, timeout=30)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert first.status_code == 200, log.read_text()  # no MissingGreenlet after the commit
    assert second.status_code == 200, log.read_text()
    ids = [first.json()["id"], second.json()["id"]]
    assert _emails(private_db) == [
        (f"order-{ids[0]}", "alice@example.com"),
        (f"order-{ids[1]}", "bob@example.com"),
    ]


@pytest.fixture
def outbox_web(private_db: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(the URL of a real ``outbox web`` on the private database, a key of it)."""
    env = _env(private_db)
    made = subprocess.run(
        [sys.executable, "-m", "outbox.cli", "api-keys", "create", "docs"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    key = re.search(r"obx_[A-Za-z0-9_-]+", made.stdout)
    assert key, made.stdout
    port = _free_port()
    log = tmp_path / "web.log"
    with log.open("wb") as out:
        web = subprocess.Popen(
            [sys.executable, "-m", "outbox.cli", "web", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for(f"{url}/v1/openapi.json", web, log)
        yield url, key.group(0)
    finally:
        web.terminate()
        web.wait(timeout=30)


@pytest.mark.node
@pytest.mark.parametrize("block", HTTP, ids=lambda b: b.name)
def test_a_curl_or_node_example_enqueues_through_outbox_web(
    block: markdown.Block, outbox_web: tuple[str, str], private_db: str, tmp_path: Path
) -> None:
    url, key = outbox_web
    code = block.code.replace(markdown.BASE_URL, url)
    assert code != block.code, f"{block.name} does not address {markdown.BASE_URL}"
    env = {**os.environ, "OUTBOX_API_KEY": key}
    if block.tag == "js":
        tool = shutil.which("node")
        assert tool, "node is missing: apt-get install nodejs (./dev test does)"
        script = tmp_path / "example.mjs"  # a module: top-level await
        script.write_text(NODE_GIVEN + code, encoding="utf-8")
        command = [tool, str(script)]
    else:
        assert shutil.which("curl"), "curl is missing: apt-get install curl (./dev test does)"
        command = ["bash", "-euo", "pipefail", "-c", code]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, f"{block.name}:\n{run.stdout}{run.stderr}"
    (email,) = _emails(private_db)  # exactly one email, under the example's key
    assert email[1] == "alice@example.com", email
    if block.tag == "sh":
        answer = json.loads(run.stdout)
        assert email[0].endswith(answer["idempotency_key"])  # stored under the key's owner
        assert answer["status"] == "accepted"
