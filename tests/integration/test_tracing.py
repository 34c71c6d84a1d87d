"""One trace per email, from the business event through a retry to the final send,
exported over real OTLP/HTTP by real processes."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from outbox.config import Settings
from outbox.message.return_path import return_path
from outbox.telemetry.setup import is_enabled
from outbox.testing.pipeline import Pipeline
from outbox.testing.sink import ACCEPT, Behaviour, SmtpSink
from tests.integration.helpers import query, wait_until
from tests.integration.otlp import Receiver, otlp_receiver
from tests.integration.test_bounces import BOUNCE_DOMAIN, dsn
from tests.keys import SECRET

RECIPIENT = "alice.private@example.com"
APP = """
import json, sys, psycopg
from opentelemetry import trace
from outbox.telemetry.setup import setup_tracing
from outbox import enqueue
from outbox.config import default_settings

assert setup_tracing("shop")
settings = default_settings()
with trace.get_tracer("shop").start_as_current_span("place order") as span:
    with psycopg.connect(settings.database_url) as conn:
        params = {"name": "Alice", "code": "123456", "product": "Shop", "minutes": 5}
        result = enqueue(conn, idempotency_key="order-1234-login", to=sys.argv[1],
                         template="login_code", priority="high", params=params)
        conn.commit()
    print(json.dumps({"trace_id": f"{span.get_span_context().trace_id:032x}",
                      "message_id": result.message_id, "id": result.id}))
trace.get_tracer_provider().shutdown()
"""
KIND_PRODUCER, KIND_CONSUMER, KIND_CLIENT = 4, 5, 3


def otel_env(receiver: Receiver) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }


@pytest.mark.slow
def test_one_trace_from_business_event_through_retry_to_send(
    settings: Settings, tmp_path: Path
) -> None:
    tries = itertools.count()

    def greylist_once(address: str) -> Behaviour:
        if next(tries) == 0:
            return Behaviour(rcpt_reply="450 4.7.1 Greylisted, please try again later")
        return ACCEPT

    with otlp_receiver() as receiver, SmtpSink(greylist_once) as sink:
        settings = dataclasses.replace(
            settings, smtp_url=sink.url, bounce_domain=BOUNCE_DOMAIN, secret=SECRET
        )
        env = {**settings.to_env(), **otel_env(receiver)}
        app = subprocess.run(
            [sys.executable, "-c", APP, RECIPIENT],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        event = json.loads(app.stdout)
        with Pipeline(env, high=(1, 2), bulk=(0, 0), log_dir=tmp_path):
            wait_until(lambda: len(sink.messages) == 1, timeout=30)
            wait_until(lambda: len(receiver.named("outbox deliver")) == 2, timeout=15)
            wait_until(lambda: len(receiver.named("process email_high")) == 2, timeout=15)
        # Days later the address bounces to its VERP return path, as the
        # README's pipe form hands it over: the bounce joins the same trace.
        verp = return_path(event["id"], domain=BOUNCE_DOMAIN, secret=SECRET)
        assert sink.messages[0].mail_from == verp
        subprocess.run(
            [sys.executable, "-m", "outbox.cli", "bounces", "ingest", "--to", verp, "-"],
            input=dsn(RECIPIENT, event["message_id"], to=verp),
            env=env,
            capture_output=True,
            check=True,
        )
        wait_until(lambda: len(receiver.named("outbox bounce")) == 1, timeout=15)
        spans = list(receiver.spans)

    trace_id = event["trace_id"]
    ours = [s for s in spans if s.trace_id == trace_id]
    by_name: dict[str, list] = {}
    for span in ours:
        by_name.setdefault(span.name, []).append(span)
    [order] = by_name["place order"]
    [enqueued] = by_name["outbox enqueue"]
    assert enqueued.parent_span_id == order.span_id
    assert enqueued.attributes["email.message_id"] == event["message_id"]
    assert enqueued.attributes["outbox.id"] == event["id"]

    # Two publishes (first try, then the retry), each under the business event.
    sends = by_name["send email_high"]
    assert len(sends) == 2
    assert all(s.kind == KIND_PRODUCER and s.parent_span_id == enqueued.span_id for s in sends)
    assert {s.service for s in sends} == {"outbox-relay"}
    consumers = by_name["process email_high"]
    assert {c.parent_span_id for c in consumers} == {s.span_id for s in sends}
    assert all(c.kind == KIND_CONSUMER and c.service == "outbox-worker" for c in consumers)

    # Each attempt is its own span under the enqueue span, linked to its consumer span.
    attempts = sorted(by_name["outbox deliver"], key=lambda s: s.attributes["outbox.attempt"])
    assert [a.parent_span_id for a in attempts] == [enqueued.span_id] * 2
    assert all(a.kind == KIND_CLIENT for a in attempts)
    assert {a.links[0][1] for a in attempts} == {c.span_id for c in consumers}
    first, second = (a.attributes for a in attempts)
    assert (first["outbox.attempt"], first["smtp.reply_code"], first["outbox.verdict"]) == (
        1,
        450,
        "retry",
    )
    assert first["smtp.enhanced_status"] == "4.7.1"
    assert [name for name, _ in attempts[0].events] == ["retry scheduled"]
    assert (second["outbox.attempt"], second["smtp.reply_code"], second["outbox.status"]) == (
        2,
        250,
        "sent",
    )
    stored = query(settings, "SELECT provider_message_id FROM email_outbox")[0][0]
    assert second["email.provider.message_id"] == stored
    for attributes in (first, second):
        assert attributes["email.message_id"] == event["message_id"]
        assert attributes["outbox.idempotency_key"] == "order-1234-login"
        assert attributes["outbox.id"] == event["id"]
        assert attributes["email.template"] == "login_code"
        assert attributes["outbox.priority"] == "high"
        assert attributes["email.recipient.domain"] == "example.com"

    # The bounce, under the business event too, names the send it is about.
    [bounce] = by_name["outbox bounce"]
    assert bounce.parent_span_id == enqueued.span_id
    assert bounce.kind == KIND_CONSUMER
    assert bounce.service == "outbox-bounces"
    assert bounce.attributes["outbox.bounce.class"] == "hard"
    assert bounce.attributes["outbox.bounce.status"] == "5.1.1"
    assert bounce.attributes["outbox.bounce.link"] == "verp"
    assert bounce.attributes["outbox.bounce.suppressed"] is True
    assert bounce.attributes["email.provider.message_id"] == stored
    assert bounce.attributes["email.message_id"] == event["message_id"]

    # The address itself appears nowhere, in any span of any process.
    dump = json.dumps([(s.name, s.attributes, s.events) for s in spans], default=str)
    assert "alice.private" not in dump

    # `outbox show` names the trace to look up.
    shown = subprocess.run(
        [sys.executable, "-m", "outbox.cli", "show", "order-1234-login"],
        env=settings.to_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"trace_id: {trace_id}" in shown.stdout


def test_tracing_is_off_without_an_exporter() -> None:
    assert not is_enabled({})
    assert is_enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert not is_enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"})
    assert not is_enabled(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}
    )


LABELLED_APP = """
import sys, psycopg
from opentelemetry import trace
from outbox.telemetry.setup import setup_tracing
from outbox import enqueue
from outbox.config import default_settings

assert setup_tracing("shop")
settings = default_settings()
with psycopg.connect(settings.database_url) as conn:
    params = {"name": "Alice", "code": "123456", "product": "Shop", "minutes": 5}
    enqueue(conn, idempotency_key="labelled", to=sys.argv[1], template="login_code",
            priority="high", params=params, tags=["welcome", "v2"],
            metadata={"order_id": "1001", "customer": sys.argv[1], "items": 3})
    conn.commit()
trace.get_tracer_provider().shutdown()
"""


@pytest.mark.slow
def test_tags_and_metadata_reach_the_spans_without_an_address(
    settings: Settings, tmp_path: Path
) -> None:
    with otlp_receiver() as receiver, SmtpSink() as sink:
        settings = dataclasses.replace(settings, smtp_url=sink.url, secret=SECRET)
        env = {**settings.to_env(), **otel_env(receiver)}
        subprocess.run(
            [sys.executable, "-c", LABELLED_APP, RECIPIENT], env=env, capture_output=True,
            text=True, check=True,
        )  # fmt: skip
        with Pipeline(env, high=(1, 1), bulk=(0, 0), log_dir=tmp_path):
            wait_until(lambda: len(sink.messages) == 1, timeout=30)
            wait_until(lambda: len(receiver.named("outbox deliver")) == 1, timeout=15)
        spans = receiver.named("outbox enqueue") + receiver.named("outbox deliver")
    assert len(spans) == 2
    for span in spans:
        assert span.attributes["outbox.tags"] == ["welcome", "v2"]
        assert span.attributes["outbox.metadata.order_id"] == "1001"
        assert span.attributes["outbox.metadata.items"] == "3"
        customer = span.attributes["outbox.metadata.customer"]
        assert "alice.private" not in customer
        assert customer.endswith("@example.com")
    assert all("alice.private" not in json.dumps(s.attributes) for s in spans)
