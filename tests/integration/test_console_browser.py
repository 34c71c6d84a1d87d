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
from pathlib import Path

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
WIDTHS = (1366, 390)  # a laptop, a phone


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
    assert "attempt #2 (try 1 after a requeue): sent" in page.inner_text("#timeline")
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


# Per page: every timestamp and status on one line, no word broken anywhere it
# fits (no break-all), and each table either within its box or in a wrapper
# that scrolls sideways (never clipped by its card).
LAYOUT = """() => {
  const lines = e => { const r = document.createRange(); r.selectNodeContents(e);
    const em = parseFloat(getComputedStyle(e).fontSize);
    const tops = [...r.getClientRects()].filter(b => b.width > 0).map(b => b.top)
      .sort((a, b) => a - b);
    return tops.filter((t, i) => i === 0 || t - tops[i - 1] > em * 0.8).length; };
  const visible = e => e.getClientRects().length > 0;
  const wrapped = [...document.querySelectorAll('.time, .status, td.num')]
    .filter(e => visible(e) && lines(e) > 1).map(e => e.className + ': ' + e.textContent);
  const breakAll = [...document.querySelectorAll('body *')]
    .filter(e => getComputedStyle(e).wordBreak === 'break-all').map(e => e.tagName);
  const clipped = [...document.querySelectorAll('table')].filter(t => {
    const box = t.parentElement;
    if (t.scrollWidth <= box.clientWidth + 1) return false;
    return !(box.classList.contains('scroll') && getComputedStyle(box).overflowX === 'auto');
  }).map(t => t.id || t.className || 'table');
  const scrollers = [...document.querySelectorAll('.scroll')].map(e => {
    const r = e.getBoundingClientRect(); return [r.left, r.right]; });
  return {wrapped, breakAll, clipped, scrollers,
          times: document.querySelectorAll('.time').length};
}"""


def long_email(settings: Settings) -> int:
    """An email with long words in every column: a key, a reason, a reply."""
    key = "checkout-2026-12-04-order-000123456789-payment-confirmation-" + CAROL
    outbox_id = add_login(settings, key, CAROL)
    query(
        settings,
        "UPDATE email_outbox SET status = 'failed', status_reason = %s, last_error = %s"
        " WHERE id = %s RETURNING id",
        "550 5.7.1 processing refused: recipient-domain-policy-rejection-undeliverable",
        "550 5.7.1 processing refused: recipient-domain-policy-rejection-undeliverable",
        outbox_id,
    )
    query(
        settings,
        "INSERT INTO email_suppression (address, scope, reason, detail) VALUES"
        " ('carol.customer@example.com', 'all', 'hard_bounce', %s) RETURNING address",
        "550-5.1.1 The email account that you tried to reach does not exist; please-try-"
        "double-checking-the-recipient's-email-address-for-typos-or-unnecessary-spaces",
    )
    return outbox_id


@pytest.mark.parametrize("width", WIDTHS)
def test_pages_lay_out_within_the_screen(
    browser: Browser, console: Settings, web_url: str, width: int, tmp_path: Path
) -> None:
    dead_id = make_dead(console, "layout-dead", DAVE)
    long_id = long_email(console)
    page = sign_in(browser, web_url, OPERATOR, width=width)
    paths = ("/console/", "/console/emails", "/console/emails?status=failed",
             f"/console/emails/{dead_id}", f"/console/emails/{long_id}",
             "/console/suppressions", "/console/audit")  # fmt: skip
    for n, path in enumerate(paths):
        page.goto(f"{web_url}{path}")
        shot = page.screenshot(full_page=True)
        (tmp_path / f"{width}-{n}.png").write_bytes(shot)
        image = Image.open(io.BytesIO(shot)).convert("RGB")
        colours = image.getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 20, f"{path} at {width}px looks blank"
        assert image.width == width
        overflow = page.evaluate("document.documentElement.scrollWidth")
        assert overflow <= width, f"{path} at {width}px scrolls sideways ({overflow}px)"
        boxes = page.evaluate(
            """() => [...document.querySelectorAll('header, main, .card, h1, form, .scroll')]
                .filter(e => e.matches('.scroll') || !e.closest('.scroll'))  // those scroll
                .map(e => { const r = e.getBoundingClientRect();
                            return [e.tagName + '.' + e.className, r.left, r.right]; })"""
        )
        assert boxes
        for name, left, right in boxes:
            assert left >= 0, f"{name} starts off-screen on {path} at {width}px"
            assert right <= width + 0.5, f"{name} ends off-screen on {path} at {width}px"
        layout = page.evaluate(LAYOUT)
        assert layout["wrapped"] == [], f"broken over lines on {path} at {width}px"
        assert layout["breakAll"] == [], f"words broken anywhere on {path} at {width}px"
        assert layout["clipped"] == [], f"tables clipped on {path} at {width}px"
        if "/emails" in path:
            assert layout["times"] > 0, f"no timestamp on {path}"
    page.close()
