"""Scenario 8: hostile and broken input at enqueue, property-based, against real Postgres.

Arbitrary strings in every field, CR/LF/NUL header injection, invalid and
internationalised addresses, params over the size limit, unknown templates,
missing template variables. Every case is either accepted, and then renders
(through the worker's own :meth:`Delivery.build`) to a message whose headers
are exactly the expected set, or refused with an ``InvalidMessage`` subclass.
No partial row is ever written: the tables hold exactly what was accepted.
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import itertools
import tomllib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

import outbox
from outbox.config import Settings
from outbox.db.store import sending
from outbox.delivery.deliver import Delivery
from outbox.errors import InvalidMessage, TemplateError
from tests.acceptance.checks import report

EXAMPLES = 100
TEMPLATE_NAMES = ["login_code", "password_reset", "order_confirmation", "invoice", "newsletter"]
REQUIRED = {"From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type"}
OPTIONAL = {
    "Content-Transfer-Encoding",
    "Auto-Submitted",  # transactional mail
    "List-Unsubscribe",
    "List-Unsubscribe-Post",
    "DKIM-Signature",
}
BREAKERS = ["\r\n", "\n", "\r", "\x00", "\r\nBcc: victim@example.com", "\nX-Injected: yes"]
ADDRESSES = [
    "alice@example.com",
    "jörg@bücher.example",  # IDN domain, non-ASCII local part
    "anna@bücher.example",  # IDN domain only: sent as xn--
    "用户@例子.广告",
    "δοκιμή@παράδειγμα.δοκιμή",
    "user@xn--bcher-kva.example",
    "ñoño@example.com",
    "first.last+tag@sub.example.org",
    '"quoted local"@example.com',
    "a@b",
    "@example.com",
    "alice@",
    "alice@@example.com",
    "alice@exa mple.com",
    "x" * 65 + "@example.com",
    "alice@" + "d" * 250 + ".com",
    "",
]
COUNTS = {"accepted": 0, "refused": 0, "existing": 0}
REFUSALS: dict[str, int] = {}
# Accepted at enqueue, yet the template cannot render the params' shape (a list
# where it reads attributes, a number where it loops). A broken promise of its
# own, shown deterministically by test_send_safety's poison email; counted here.
UNRENDERABLE: dict[str, int] = {}
KNOWN_UNRENDERABLE = (TypeError, AttributeError, TemplateError)
STRUCTURED = {"order_confirmation"}  # loops over items and reads their fields


def _examples(settings: Settings) -> dict[str, dict[str, Any]]:
    found = {}
    for name in TEMPLATE_NAMES:
        meta = tomllib.loads((settings.templates / name / "template.toml").read_text())
        found[name] = meta["example"]
    return found


hostile_text = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda a, b, c: a + b + c,
        st.text(max_size=10),
        st.sampled_from(BREAKERS),
        st.text(max_size=10),
    ),
    st.sampled_from(["=?utf-8?q?Subject?=", "<script>alert(1)</script>", "\u202e", "\ufeff"]),
)
values = st.one_of(
    hostile_text,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(hostile_text, max_size=3),
)
addresses = st.one_of(
    st.sampled_from(ADDRESSES),
    st.emails(),
    st.builds(lambda a, b: a + b, st.sampled_from(ADDRESSES[:3]), st.sampled_from(BREAKERS)),
    st.builds(lambda a, b: a + b + "@example.com", st.text(max_size=8), st.sampled_from(BREAKERS)),
    st.text(max_size=30),
)
keys = st.one_of(
    st.from_regex(r"[a-z0-9-]{1,20}", fullmatch=True),
    st.text(max_size=30),
    st.text(min_size=250, max_size=270, alphabet="k"),
    st.builds(lambda a, b: a + b, st.text(max_size=5), st.sampled_from(BREAKERS)),
)


VALID_ADDRESSES = ADDRESSES[:9]
_SERIAL = itertools.count()
FIELDS = ["idempotency_key", "to", "template", "params", "priority"]


@st.composite
def emails(draw: st.DrawFn, examples: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One email with none, one or two of its fields broken (or merely odd)."""
    broken = draw(st.sets(st.sampled_from(FIELDS), max_size=2))
    template = draw(st.sampled_from(TEMPLATE_NAMES))
    params: Any = dict(examples[template])
    case = {
        "idempotency_key": f"k-{next(_SERIAL)}",  # unique unless the key is the broken field
        "to": draw(st.sampled_from(VALID_ADDRESSES)),
        "template": template,
        "params": params,
        "priority": draw(st.sampled_from(["high", "bulk"])),
    }
    if "idempotency_key" in broken:
        case["idempotency_key"] = draw(keys)
    if "to" in broken:
        case["to"] = draw(addresses)
    if "template" in broken:
        case["template"] = draw(st.one_of(st.text(max_size=12), st.sampled_from(TEMPLATE_NAMES)))
    if "priority" in broken:
        case["priority"] = draw(st.one_of(st.text(max_size=5), st.sampled_from(["HIGH", None])))
    if "params" in broken:
        shape = draw(st.sampled_from(["hostile", "hostile", "missing", "extra", "huge", "odd"]))
        if shape == "hostile":
            for name in draw(st.lists(st.sampled_from(sorted(params)), min_size=1, max_size=3)):
                params[name] = draw(values)
        elif shape == "missing":
            params.pop(draw(st.sampled_from(sorted(params))))
        elif shape == "extra":
            params[draw(st.text(max_size=10))] = draw(values)
        elif shape == "huge":
            params[draw(st.sampled_from(sorted(params)))] = "x" * draw(
                st.integers(min_value=60_000, max_value=70_000)
            )
        else:
            case["params"] = draw(st.one_of(st.none(), st.lists(values, max_size=2), hostile_text))
    return case


def _count(settings: Settings) -> tuple[int, int, int]:
    with psycopg.connect(settings.database_url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM email_outbox), (SELECT count(*) FROM email_event),"
            " (SELECT count(*) FROM email_attempt)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


class _Connections:
    """What Delivery.build asks of its pool, without a pool's background threads
    (their use of ``random`` would trip Hypothesis's check on strategies)."""

    def __init__(self, url: str) -> None:
        self.url = url

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        with psycopg.connect(self.url) as conn:
            yield conn


@pytest.fixture
def delivery(settings: Settings) -> Delivery:
    # Build only: no transport is needed to turn a row into its message bytes.
    return Delivery(settings, _Connections(settings.database_url), transport=None)  # type: ignore[arg-type]


def _check_rendered(settings: Settings, delivery: Delivery, outbox_id: int, key: str) -> None:
    """The message a worker would send: exactly the expected headers, nothing injected."""
    with psycopg.connect(settings.database_url) as conn:
        # As a relay would: published, then taken by a worker.
        conn.execute("UPDATE email_outbox SET status = 'queued' WHERE id = %s", (outbox_id,))
        rows = sending.take_for_sending(conn, [outbox_id], "hostile-input-check")
        conn.commit()
    assert len(rows) == 1, key
    row = rows[0]
    try:
        message = delivery.build(row)
    except KNOWN_UNRENDERABLE as exc:
        if row.template not in STRUCTURED:
            raise  # a template that only prints its params must render any JSON value
        UNRENDERABLE[type(exc).__name__] = UNRENDERABLE.get(type(exc).__name__, 0) + 1
        return
    parsed = email.message_from_bytes(message.data, policy=email.policy.default)
    names = [name for name, _ in parsed.items()]
    assert len(names) == len(set(names)), f"a header appears twice: {names}"
    assert REQUIRED <= set(names) <= REQUIRED | OPTIONAL, names
    assert ("Auto-Submitted" in names) == (row.priority == "high")
    assert parsed["Message-ID"] == row.message_id
    assert str(parsed["To"]) == message.recipient
    subject = str(parsed["Subject"])
    assert not {"\r", "\n", "\x00"} & set(subject), subject
    header_block = message.data.split(b"\r\n\r\n", 1)[0]
    assert b"\x00" not in header_block
    assert all(len(line) <= 998 for line in header_block.split(b"\r\n"))
    # Every line of the header block starts a known header or continues one.
    for line in header_block.split(b"\r\n"):
        if line[:1] not in (b" ", b"\t"):
            name = line.split(b":", 1)[0].decode()
            assert name in REQUIRED | OPTIONAL, f"unexpected header line {line[:80]!r}"


def test_hostile_input_is_refused_or_sent_as_exactly_the_expected_message(
    settings: Settings, delivery: Delivery
) -> None:
    examples = _examples(settings)

    @hypothesis_settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(case=emails(examples))
    def one(case: dict[str, Any]) -> None:
        before = _count(settings)
        try:
            with psycopg.connect(settings.database_url) as conn:
                result = outbox.enqueue(conn, settings=settings, **case)
                conn.commit()
        except InvalidMessage as exc:
            refusal = type(exc).__name__
        else:
            refusal = None
        if refusal:
            COUNTS["refused"] += 1
            REFUSALS[refusal] = REFUSALS.get(refusal, 0) + 1
            assert _count(settings) == before, f"refused ({refusal}) but rows changed"
            return
        after = _count(settings)
        assert after == (before[0] + int(result.created), before[1], before[2]), case
        if result.created:
            COUNTS["accepted"] += 1
            _check_rendered(settings, delivery, result.id, case["idempotency_key"])
        else:
            COUNTS["existing"] += 1

    one()
    report(
        "8 hostile input at enqueue (single)",
        examples=EXAMPLES,
        **COUNTS,
        refusals=REFUSALS,
        accepted_but_unrenderable=UNRENDERABLE,
    )
    assert COUNTS["accepted"] > 0
    assert COUNTS["refused"] > 0


def test_hostile_batches_are_all_or_nothing(settings: Settings) -> None:
    examples = _examples(settings)
    outcome = {"batches_accepted": 0, "batches_refused": 0}

    @hypothesis_settings(
        max_examples=EXAMPLES // 3,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(batch=st.lists(emails(examples), min_size=1, max_size=6))
    def one(batch: list[dict[str, Any]]) -> None:
        before = _count(settings)
        try:
            with psycopg.connect(settings.database_url) as conn:
                results = outbox.enqueue_many(conn, batch, settings=settings)
                conn.commit()
        except InvalidMessage:
            refused = True
        else:
            refused = False
        if refused:
            outcome["batches_refused"] += 1
            assert _count(settings) == before
            return
        outcome["batches_accepted"] += 1
        created = sum(r.created for r in results)
        assert _count(settings) == (before[0] + created, before[1], before[2])

    one()
    report("8 hostile input at enqueue (batches)", examples=EXAMPLES // 3, **outcome)
