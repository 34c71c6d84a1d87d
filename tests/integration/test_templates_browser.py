"""Every shipped template, previewed by the CLI and drawn by headless Chromium.

Chromium is Debian's ``chromium`` package (``apt-get install -y chromium``);
without it this test fails, it does not skip. The pages load nothing from
the network: the compiled templates reference no fonts or images.
"""

from __future__ import annotations

import email
import email.policy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from outbox.config import PACKAGE_TEMPLATES, Settings
from outbox.message.render import TemplateSet

SHIPPED = TemplateSet(PACKAGE_TEMPLATES).names()


def outbox(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "outbox.cli", *args],
        env=settings.to_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "headless Chromium is missing: install Debian's package with `apt-get install -y chromium`"
    )


def screenshot(page: Path, png: Path, profile: Path) -> Image.Image:
    result = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            "--window-size=800,1000",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert png.is_file(), f"chromium wrote no screenshot: {result.stderr[-2000:]}"
    return Image.open(png).convert("L")


def test_templates_check_passes_for_the_shipped_templates() -> None:
    result = outbox(Settings(), "templates", "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("ok ") == len(SHIPPED)
    assert "example rendered" in result.stdout


def test_templates_check_fails_on_a_broken_template(tmp_path: Path) -> None:
    shutil.copytree(PACKAGE_TEMPLATES / "login_code", tmp_path / "login_code")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "subject.txt").write_text("x")
    (tmp_path / "broken" / "body.mjml").write_text("<mjml><mj-body><mj-section>")
    result = outbox(Settings(templates=tmp_path), "templates", "check")
    assert result.returncode == 1
    assert "ok   login_code" in result.stdout
    assert "FAIL broken" in result.stdout


@pytest.mark.chromium
@pytest.mark.parametrize("name", SHIPPED)
def test_each_template_draws_a_readable_page(name: str, tmp_path: Path) -> None:
    result = outbox(Settings(), "templates", "preview", name, "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    eml, html = tmp_path / f"{name}.eml", tmp_path / f"{name}.html"
    assert result.stdout.split() == [str(eml), str(html)]
    message = email.message_from_bytes(eml.read_bytes(), policy=email.policy.default)
    assert message.defects == []
    assert message.get_content_type() == "multipart/alternative"
    image = screenshot(html, tmp_path / f"{name}.png", tmp_path / "profile")
    assert image.size == (800, 1000)
    histogram = image.histogram()
    dark = sum(histogram[:128])  # glyphs: a blank or unstyled failure page has none or few
    light = sum(histogram[200:])
    assert dark > 500, f"{name}: the page looks blank ({dark} dark pixels)"
    assert light > 400_000, f"{name}: the page is not mostly light ({light} light pixels)"


def test_preview_takes_params(tmp_path: Path) -> None:
    params = '{"name": "Bob", "code": "777111", "product": "Tea", "minutes": 5}'
    result = outbox(
        Settings(), "templates", "preview", "login_code", "--params", params, "--out", str(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    message = email.message_from_bytes(
        (tmp_path / "login_code.eml").read_bytes(), policy=email.policy.default
    )
    assert message["Subject"] == "777111 is your Tea login code"
    assert message["Auto-Submitted"] == "auto-generated"
    missing = outbox(Settings(), "templates", "preview", "login_code", "--params", '{"name": "B"}')
    assert missing.returncode == 2
    assert "needs params" in missing.stderr
