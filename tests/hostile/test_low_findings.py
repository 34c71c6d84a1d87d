"""The issue's low findings, each replayed: preview tokens, attachment names,
params of the wrong shape, --params of the wrong kind, addresses."""

from __future__ import annotations

import email
import email.policy
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import outbox
from outbox.config import Settings
from outbox.errors import ConfigError, InvalidAddress, InvalidParams, TemplateError
from outbox.message import list_unsubscribe as unsubscribe
from outbox.message.preview import preview
from outbox.message.render import template_set
from outbox.message.return_path import outbox_id_from_token, row_token_from_address
from outbox.validate import check_params_shape, normalize_address
from tests.integration.helpers import query
from tests.keys import SECRET

ORDER = {
    "name": "Alice",
    "order_number": "1234",
    "total": "20.00",
    "items": [{"quantity": 2, "title": "Green tea", "price": "8.00"}],
}


def test_regression_preview_mints_no_working_token_for_a_real_row(tmp_path: Path) -> None:
    settings = Settings(
        secret=SECRET,
        bounce_domain="bounces.shop.example",
        unsubscribe_url="https://shop.example/unsubscribe",
    )
    written = preview(settings, "newsletter", None, out_dir=tmp_path)
    message = email.message_from_bytes(written.eml.read_bytes(), policy=email.policy.default)
    header = str(message["List-Unsubscribe"])
    link = header.split("<", 1)[1].split(">", 1)[0]
    token = link.partition("token=")[2]
    assert unsubscribe.outbox_id_from_token(token, secret=SECRET) is None  # names no row
    mailto = header.split("mailto:", 1)[1].split("?", 1)[0]
    verp = row_token_from_address(mailto)
    assert verp is not None
    assert outbox_id_from_token(verp, secret=SECRET) in (None, 0)  # ids start at 1


def test_regression_long_attachment_path_component_is_invalid_params(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    settings = Settings(attachments_dir=str(tmp_path / "files"))
    params = {**ORDER, "attachments": [{"path": "a" * 300 + ".pdf"}]}
    with pytest.raises(InvalidParams, match="attachment"):
        preview(settings, "order_confirmation", params, out_dir=tmp_path)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({**ORDER, "items": 5}, "must be a list"),
        ({**ORDER, "items": "tea"}, "must be a list"),
        ({**ORDER, "items": [5]}, r"\[0\] must be an object"),
        ({**ORDER, "items": [{"title": "x", "price": "1"}]}, "lacks 'quantity'"),
        ({**ORDER, "name": ["Alice"]}, "must be a plain value"),
        ({**ORDER, "total": {"amount": 1}}, "must be a plain value"),
    ],
)
def test_regression_params_of_the_wrong_shape_are_refused_at_enqueue(
    params: dict[str, object], message: str
) -> None:
    template = template_set(Settings().templates).get("order_confirmation")
    with pytest.raises(InvalidParams, match=message):
        check_params_shape(template, params)


@pytest.mark.parametrize(
    "params",
    [
        ORDER,
        {**ORDER, "items": []},
        {**ORDER, "order_number": 1234, "total": 20.0},  # scalars stand for each other
        {**ORDER, "items": [{"quantity": 1, "title": "x", "price": "1", "extra": True}]},
    ],
)
def test_params_of_the_right_shape_pass(params: dict[str, object]) -> None:
    template = template_set(Settings().templates).get("order_confirmation")
    check_params_shape(template, params)
    template.render(params)  # and the template indeed renders them


def test_wrong_shape_writes_nothing(
    conn: psycopg.Connection[tuple[object, ...]], settings: Settings
) -> None:
    with pytest.raises(InvalidParams):
        outbox.enqueue(
            conn,
            idempotency_key="order-1",
            to="alice@example.com",
            template="order_confirmation",
            params={**ORDER, "items": 5},
            settings=settings,
        )
    conn.rollback()
    assert query(settings, "SELECT count(*) FROM email_outbox")[0][0] == 0


@pytest.mark.parametrize("params", ["[1]", "5", '"x"', "null", "[]"])
def test_regression_preview_params_of_the_wrong_kind_are_a_clear_error(
    settings: Settings, tmp_path: Path, params: str
) -> None:
    command = ["templates", "preview", "login_code", "--params", params, "--out", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "-m", "outbox.cli", *command],
        env=settings.to_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if params == "null":  # JSON null: the example params
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "JSON object" in result.stderr


@pytest.mark.parametrize(
    "address",
    [
        "=?utf-8?b?YWRtaW4=?=@example.com",
        "=?ISO-8859-1?Q?Andr=E9?=@example.com",
        "x=?utf-8?q?a?=y@example.com",
        "a" * 65 + "@example.com",
        "é" * 33 + "@example.com",  # 33 characters, 66 octets
    ],
)
def test_regression_encoded_words_and_long_local_parts_are_refused(address: str) -> None:
    with pytest.raises(InvalidAddress):
        normalize_address(address)


@pytest.mark.parametrize(
    "address", ["a" * 64 + "@example.com", "é" * 32 + "@example.com", "a=b?c@example.com"]
)
def test_local_parts_up_to_64_octets_pass(address: str) -> None:
    assert normalize_address(address).endswith("@example.com")


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(document.cookie)",
        " JavaScript:alert(1)",
        "java\tscript:alert(1)",
        "\x01javascript:alert(1)",
        "vbscript:msgbox(1)",
        "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    ],
)
def test_regression_a_param_cannot_make_a_script_link(url: str) -> None:
    """The newsletter's button took any `url`: `href="javascript:…"` went out."""
    newsletter = template_set(Path(outbox.__file__).parent / "templates").get("newsletter")
    params = {"name": "Alice", "title": "News", "intro": "Hi", "url": url}
    with pytest.raises(TemplateError, match="http"):
        newsletter.render(params)


def test_http_links_and_relative_ones_still_render() -> None:
    newsletter = template_set(Path(outbox.__file__).parent / "templates").get("newsletter")
    for url in ("https://shop.example/news?a=1&b=2", "http://shop.example/", "/news", "#top"):
        rendered = newsletter.render({"name": "A", "title": "T", "intro": "I", "url": url})
        assert rendered.html is not None


@pytest.mark.parametrize(
    "value",
    [
        "shop-example-outbox-production-secret-2026",
        "ShopExampleOutboxProductionSecret2026",
        "correct horse battery staple outbox secret",
        "our_outbox_signing_key_for_production_use",
    ],
)
def test_regression_a_secret_made_of_words_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="words"):
        Settings.from_env({"OUTBOX_SECRET": value})
