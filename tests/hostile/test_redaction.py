"""Every address email-validator accepts is tagged in every output, and a tag is no address."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import string

import email_validator
import httpx
import pytest
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from outbox import redact
from outbox.config import Settings
from outbox.message.message_id import message_id
from outbox.message.return_path import return_path
from outbox.telemetry.tracing import email_attributes, label_attributes
from outbox.testing.sink import Behaviour
from tests.integration.console_run import VIEWER, console_settings, signed_in, web
from tests.integration.helpers import add_login, harness
from tests.integration.test_cli import outbox
from tests.integration.test_http_api import running
from tests.keys import SECRET

SENDER = "Shop <noreply@shop.example>"
HOSTILE = [
    "हिंदी@example.org",  # the local part ends in a combining mark
    "deadbeef0123@example.org",  # twelve hex digits: the old tag's shape
    "o'brien&co@example.org",  # HTML-escaped on a page: o&#39;brien&amp;co
    "ceo@shop.example",  # at the sender's own domain
]


def _redactor() -> redact.Redactor:
    return redact.Redactor.from_settings(Settings(secret=SECRET, sender=SENDER))


def _accepted(address: str) -> bool:
    try:
        email_validator.validate_email(address, check_deliverability=False)
    except email_validator.EmailNotValidError:
        return False
    return True


_ATEXT = string.ascii_letters + string.digits + "!#$%&'*+-/=?^_`{|}~"
_INTERNATIONAL = st.characters(
    categories=["L", "M", "N", "P", "S"], min_codepoint=0x80, max_codepoint=0x2FFFF
)
_ATOM = st.text(st.one_of(st.sampled_from(_ATEXT), _INTERNATIONAL), min_size=1, max_size=12)
_LOCAL = st.lists(_ATOM, min_size=1, max_size=3).map(".".join)
_DOMAIN = st.sampled_from(
    ["example.org", "bücher.example", "пример.рф", "例え.jp", "shop.example", "mail.co.uk"]
)


@st.composite
def _addresses(draw: st.DrawFn) -> str:
    """An address email-validator accepts, internationalised or not."""
    address = draw(st.one_of(st.emails(), st.builds("{}@{}".format, _LOCAL, _DOMAIN)))
    assume(_accepted(address))
    return address


# Text around an address that is no part of it: the tag takes the address's place exactly.
_APART = ["{}", "<{}>", "to {}.", "({})", "{}, x@y.example", '"{}"', "550 5.1.1 <{}>: unknown"]
# Text that may be read as part of a local part: the address is hidden, the tag may differ.
_ADJOINING = ["'{}'", "key=welcome-{}", "“{}”", "{}/{}", "{}@{}"]
_TAGS = re.compile(r"\[[0-9a-f]{12}\]@[^\s<>()\"',]*")


@hypothesis_settings(max_examples=300, suppress_health_check=[HealthCheck.filter_too_much])
@given(address=_addresses())
def test_no_generated_address_survives_redaction(address: str) -> None:
    redactor = _redactor()
    tag = redact.recipient_tag(address, secret=SECRET)
    assert not _accepted(tag), tag  # a tag is never mistaken for an address
    assert redactor.text(tag) == tag
    for context in _APART:
        cleaned = redactor.text(context.format(address))
        assert cleaned == context.format(tag).replace(
            "x@y.example", redact.recipient_tag("x@y.example", secret=SECRET)
        )
    for context in _ADJOINING:
        cleaned = redactor.text(context.format(address, address))
        assert address.casefold() not in cleaned.casefold()
        local = address.rpartition("@")[0]
        if len(local) >= 3:  # shorter ones occur in any text
            assert local not in _TAGS.sub("", cleaned)


@hypothesis_settings(max_examples=200, suppress_health_check=[HealthCheck.filter_too_much])
@given(address=_addresses())
def test_no_generated_address_survives_in_span_attributes(address: str) -> None:
    attributes = {
        **email_attributes(
            outbox_id=1,
            idempotency_key=f"welcome:{address}",
            message_id=message_id(address, "shop.example", SECRET),
            template="welcome",
            priority="high",
            recipient=address,
            tag_secret=SECRET,
        ),
        **label_attributes(["t"], {"customer": address}, tag_secret=SECRET),
    }
    dump = json.dumps(attributes, ensure_ascii=False)
    assert address not in dump
    # Support still recognises the key: only its address part is tagged.
    assert attributes["outbox.idempotency_key"].startswith("welcome:")


@pytest.mark.parametrize("address", HOSTILE)
def test_hostile_addresses_are_tagged(address: str) -> None:
    cleaned = _redactor().text(f"550 5.1.1 <{address}>: unknown; to={address}")
    assert address.rpartition("@")[0] not in cleaned
    assert redact.recipient_tag(address, secret=SECRET) in cleaned


def test_only_our_own_addresses_stay_readable() -> None:
    settings = Settings(secret=SECRET, sender=SENDER, bounce_domain="bounces.shop.example")
    ours = [
        "noreply@shop.example",
        message_id("order-1", settings.message_id_domain, SECRET).strip("<>"),
        return_path(12, domain="bounces.shop.example", secret=SECRET),
        return_path(12, domain="shop.example", secret=SECRET),
    ]
    redactor = redact.Redactor.from_settings(settings)
    for address in ours:
        assert redactor.text(f"<{address}>") == f"<{address}>"
    for person in ("ceo@shop.example", "bob@bounces.shop.example", "abc@outbox.localhost"):
        assert person not in redactor.text(f"<{person}>")


# -- every output ------------------------------------------------------------------


def _reply(address: str) -> Behaviour:
    return Behaviour(rcpt_reply=f"550 5.1.1 <{address}>: Recipient address rejected")


def _assert_hidden(text: str, where: str) -> None:
    for address in HOSTILE:
        assert address.rpartition("@")[0] not in text, f"{address} in {where}"


def test_no_hostile_address_in_logs_spans_show_api_or_console(
    settings: Settings, caplog: pytest.LogCaptureFixture, spans: InMemorySpanExporter
) -> None:
    """One failed login code to each hostile address, its key naming the address."""
    settings = console_settings(settings, sender=SENDER, max_attempts=1)
    spans.clear()
    caplog.set_level(logging.DEBUG)
    ids = {address: add_login(settings, f"login-{address}", address) for address in HOSTILE}
    with harness(settings, _reply) as (h, _):
        h.run()
    assert "Recipient address rejected" in caplog.text
    _assert_hidden(caplog.text, "worker logs")
    finished = [
        (s.name, dict(s.attributes or {}), [dict(e.attributes or {}) for e in s.events])
        for s in spans.get_finished_spans()
    ]
    dump = json.dumps(finished, default=str, ensure_ascii=False)
    assert "outbox.idempotency_key" in dump
    _assert_hidden(dump, "span attributes")
    for address in HOSTILE:
        shown = outbox(settings, "show", f"login-{address}")
        assert shown.returncode == 0, shown.stderr
        assert "Recipient address rejected" in shown.stdout
        _assert_hidden(shown.stdout, "outbox show")
    as_json = outbox(settings, "show", str(ids[HOSTILE[0]]), "--json")
    _assert_hidden(as_json.stdout, "outbox show --json")
    for api in running(settings):
        sender = api.key("send")
        for outbox_id in ids.values():
            answer = api.get(f"/v1/emails/{outbox_id}", sender)
            assert answer.status_code == 200
            _assert_hidden(json.dumps(answer.json(), ensure_ascii=False), "the HTTP API")
    with web(settings) as r:
        client: httpx.Client = signed_in(r, VIEWER)
        pages = [client.get("/console/emails").text]
        pages += [client.get(f"/console/emails/{i}").text for i in ids.values()]
    for page in pages:
        assert "Recipient address rejected" in pages[1]
        _assert_hidden(page, "the console")


def test_regression_console_tags_an_address_html_escapes(settings: Settings) -> None:
    settings = console_settings(dataclasses.replace(settings, sender=SENDER))
    address = "o'brien&co@example.org"
    outbox_id = add_login(settings, "login-o1", address)
    with web(settings) as r:
        page = signed_in(r, VIEWER).get(f"/console/emails/{outbox_id}").text
    assert "brien" not in page
    assert redact.recipient_tag(address, secret=SECRET) in page


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("pw-dead1@example.com", "pw-{dead1}"),  # the key's own words stay readable
        ("reset:Dead1@Example.COM", "reset:{dead1}"),  # case folded, as the tag is
        ("dead1@example.com", "{dead1}"),
        ("a/dead1@example.com/b", "a/{dead1}/b"),
        ("pw-dead1@example.com and erin@example.com", "pw-{dead1} and {erin}"),
        # Part of a longer word: no known address there, tagged whole.
        ("alice.dead1@example.com", "{alice.dead1}"),
        ("pw-dead1@example.community", "{pw-dead1@example.community}"),
        ("xdead1@example.com", "{xdead1}"),
        ("order-7", "order-7"),
    ],
)
def test_known_addresses_are_tagged_apart_from_the_words_around_them(text: str, shown: str) -> None:
    known = ["dead1@example.com", "erin@example.com"]

    def tag(name: str) -> str:
        address = name if "@" in name else f"{name}@example.com"
        return redact.recipient_tag(address, secret=SECRET)

    expected = re.sub(r"\{([^}]+)\}", lambda m: tag(m.group(1)), shown)
    assert redact.known_addresses(text, known, secret=SECRET) == expected
    assert "dead1@" not in redact.known_addresses(text, known, secret=SECRET)
