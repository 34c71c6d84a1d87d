"""The console in a real browser: Debian's Chromium driven by Playwright,
against `outbox web` started as its own process on loopback.

Chromium is Debian's ``chromium`` package (``apt-get install -y chromium``);
Playwright never downloads a browser here. Without it this test fails, it
does not skip.
"""

from __future__ import annotations

import io
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, sync_playwright

from outbox.config import Settings
from outbox.redact import recipient_tag
from outbox.testing.sink import ACCEPT
from tests.integration.console_run import OPERATOR, VIEWER, console_settings
from tests.integration.helpers import add_login, harness, query, wait_until
from tests.integration.test_console import make_dead
from tests.keys import SECRET

# Drives the console in headless Chromium.
pytestmark = pytest.mark.chromium

DAVE = "dave.dead@example.com"
CAROL = "carol.customer@example.com"
WIDTHS = (1280, 390)  # a desktop, a phone


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "headless Chromium is missing: install Debian's package with `apt-get install -y chromium`"
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"]
        )
        yield launched
        launched.close()


@pytest.fixture
def console(settings: Settings) -> Settings:
    return console_settings(settings, max_attempts=1)


@pytest.fixture
def web_url(console: Settings) -> Iterator[str]:
    """`outbox web` as the Procfile runs it: its own process, uvicorn, this database."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "outbox.cli", "web", "--host", "127.0.0.1", "--port", str(port)],
        env={**console.to_env(), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"outbox web exited: {process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(up, timeout=30)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)
        assert process.stderr is not None
        process.stderr.close()


def sign_in(browser: Browser, url: str, user: tuple[str, str], width: int = 1280) -> Page:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(f"{url}/console/")
    assert page.url.endswith("/console/login")  # signed out: sent to sign in
    page.fill("input[name=name]", user[0])
    page.fill("input[name=password]", user[1])
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Overview')")
    return page


def test_an_operator_finds_a_dead_email_requeues_it_and_sees_it_sent(
    browser: Browser, console: Settings, web_url: str
) -> None:
    outbox_id = make_dead(console, "order-5150-login", DAVE)
    page = sign_in(browser, web_url, OPERATOR)
    assert page.inner_text("#counts").count("dead") == 1
    page.click("header a:has-text('Emails')")
    page.fill("input[name=q]", "order-5150-login")
    page.click("#search button[type=submit]")
    page.click("a:has-text('order-5150-login')")
    assert page.url.endswith(f"/console/emails/{outbox_id}")
    assert "451 4.3.0 try again later" in page.inner_text("#attempts")
    assert "sending → dead" in page.inner_text("#timeline")
    page.fill("#actions input[name=reason]", "relay was down, back now")
    page.click("#requeue")
    page.wait_for_selector(".notice")
    assert "Requeued" in page.inner_text(".notice")
    with harness(console, lambda _: ACCEPT) as (h, sink):
        h.run()
    assert [m.recipients for m in sink.messages] == [[DAVE]]
    page.reload()
    assert page.inner_text("h1").endswith("sent")
    assert "attempt #1: sent" in page.inner_text("#timeline")
    assert "dead → pending" in page.inner_text("#timeline")
    page.click("header a:has-text('Audit')")
    audit = page.inner_text("#audit")
    assert "requeue" in audit
    assert "relay was down, back now" in audit
    page.close()


def test_a_viewer_never_sees_an_address_on_any_page(
    browser: Browser, console: Settings, web_url: str
) -> None:
    dead_id = make_dead(console, "dead-for-viewer", DAVE)
    carol_id = add_login(console, "carol-login", CAROL)
    page = sign_in(browser, web_url, VIEWER)
    seen: list[str] = []

    def look() -> None:
        seen.append(page.content())
        seen.extend(frame.content() for frame in page.frames[1:])

    look()
    for link in ("Emails", "Dead", "Held", "Suppressions", "Audit"):
        page.click(f"header a:has-text('{link}')")
        look()
    for outbox_id in (dead_id, carol_id):
        page.goto(f"{web_url}/console/emails/{outbox_id}")
        look()
        assert page.locator("#actions").count() == 0  # nothing to press
    page.goto(f"{web_url}/console/emails")
    page.fill("input[name=q]", CAROL)
    page.click("#search button[type=submit]")
    look()
    assert "carol-login" in page.inner_text("#results")
    assert recipient_tag(CAROL, secret=SECRET) in page.inner_text("#results")
    for html in seen:
        for address in (DAVE, CAROL):
            assert address not in html
            assert address.split("@")[0] not in html
    page.close()


def test_a_forged_or_missing_csrf_token_is_refused(
    browser: Browser, console: Settings, web_url: str
) -> None:
    outbox_id = make_dead(console, "dead-csrf", DAVE)
    page = sign_in(browser, web_url, OPERATOR)
    for forge in (
        "document.querySelector('#actions input[name=csrf]').value = 'f'.repeat(32)",
        "document.querySelector('#actions input[name=csrf]').remove()",
    ):
        page.goto(f"{web_url}/console/emails/{outbox_id}")
        page.evaluate(forge)
        page.fill("#actions input[name=reason]", "forged")
        with page.expect_response(f"**/console/emails/{outbox_id}/requeue") as answer:
            page.click("#requeue")
        assert answer.value.status == 403
    assert query(console, "SELECT status FROM email_outbox WHERE id = %s", outbox_id) == [("dead",)]
    assert query(console, "SELECT action FROM console_audit ORDER BY id") == [("sign-in",)]
    page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_pages_lay_out_within_the_screen(
    browser: Browser, console: Settings, web_url: str, width: int
) -> None:
    dead_id = make_dead(console, "layout-dead", DAVE)
    add_login(console, "layout-login", CAROL)
    page = sign_in(browser, web_url, OPERATOR, width=width)
    for path in ("/console/", "/console/emails", f"/console/emails/{dead_id}",
                 "/console/suppressions", "/console/audit"):  # fmt: skip
        page.goto(f"{web_url}{path}")
        image = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("RGB")
        colours = image.getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 20, f"{path} at {width}px looks blank"
        assert image.width == width
        overflow = page.evaluate("document.documentElement.scrollWidth")
        assert overflow <= width, f"{path} at {width}px scrolls sideways ({overflow}px)"
        boxes = page.evaluate(
            """() => [...document.querySelectorAll('header, main, .card, h1, form, table')]
                .map(e => { const r = e.getBoundingClientRect();
                            return [e.tagName + '.' + e.className, r.left, r.right]; })"""
        )
        assert boxes
        for name, left, right in boxes:
            assert left >= 0, f"{name} starts off-screen on {path} at {width}px"
            assert right <= width + 0.5, f"{name} ends off-screen on {path} at {width}px"
    page.close()
