"""Message composition cost: one command, figures on stdout, no servers needed.

    .venv/bin/python bench/bench_render.py [--messages N]

Per shipped template: the one-off compile (MJML, text derivation, Jinja
parsing) in a fresh cache, then per message with the cache warm: the Jinja
render, the MIME build, the whole composition a worker runs, the DKIM
signature alone (RSA-2048, Ed25519) and the composition with RSA, as p50 /
p99 microseconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import platform
import statistics
import time
from collections.abc import Callable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from outbox.config import PACKAGE_TEMPLATES, Settings
from outbox.db.store import sending
from outbox.message.build import Envelope, build_message
from outbox.message.compose import Composer
from outbox.message.render import TemplateSet

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def percentiles(run: Callable[[], object], count: int) -> tuple[float, float]:
    for _ in range(min(200, count)):  # warm-up
        run()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(count):
        started = clock()
        run()
        samples.append((clock() - started) / 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def pem(key: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=2000, help="messages per figure")
    args = parser.parse_args()
    count = args.messages

    base = Settings(
        secret="bench",
        unsubscribe_url="https://mail.outbox.example/unsubscribe",
        bounce_domain="bounces.outbox.example",
    )
    signed = {
        "none": base,
        "rsa-2048": dataclasses.replace(
            base,
            dkim_selector="s1",
            dkim_domain="outbox.example",
            dkim_private_key=pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        ),
        "ed25519": dataclasses.replace(
            base,
            dkim_selector="s2",
            dkim_domain="outbox.example",
            dkim_private_key=pem(ed25519.Ed25519PrivateKey.generate()),
        ),
    }
    composers = {label: Composer(settings) for label, settings in signed.items()}

    print(f"# compose benchmark: {platform.python_implementation()} {platform.python_version()}")
    print(f"# {platform.machine()}, {os.cpu_count()} CPUs, {count} messages per figure\n")
    columns = ["render", "build", "compose", "dkim rsa", "dkim ed25519", "compose+rsa"]
    header = f"{'template':<19} {'compile ms':>10} " + " ".join(f"{c:>14}" for c in columns)
    print(header)
    print(f"{'':<19} {'(once)':>10} " + " ".join(f"{'p50/p99 µs':>14}" for _ in columns))
    print("-" * len(header))
    for name in TemplateSet(PACKAGE_TEMPLATES).names():
        started = time.perf_counter()
        template = TemplateSet(PACKAGE_TEMPLATES).get(name)  # a fresh cache: the one-off cost
        compile_ms = (time.perf_counter() - started) * 1000
        warm = composers["none"].templates.get(name)
        params = dict(template.example)
        row = sending.OutboxRow(
            id=123456,
            idempotency_key=f"bench-{name}",
            recipient="alice@example.com",
            template=name,
            params=params,
            message_id="<0123456789abcdef0123456789abcdef@outbox.example>",
            priority=template.priority or "bulk",
            attempts=1,
            created_at=NOW,
            age_from=NOW,
            template_version=warm.version,
        )
        rendered = warm.render(params)
        envelope = Envelope(base.sender, row.recipient, rendered.subject, row.message_id, NOW, ())
        unsigned = composers["none"].message(row, to=row.recipient, connect=_no_db)
        rsa_signer = composers["rsa-2048"].signers.default
        ed_signer = composers["ed25519"].signers.default
        assert rsa_signer is not None
        assert ed_signer is not None
        runs: list[Callable[[], object]] = [
            lambda: warm.render(params),  # noqa: B023 - each runs before the next template
            lambda: build_message(envelope, rendered.text, rendered.html),  # noqa: B023
            lambda: composers["none"].message(row, to=row.recipient, connect=_no_db),  # noqa: B023
            lambda: rsa_signer.sign(unsigned),  # noqa: B023
            lambda: ed_signer.sign(unsigned),  # noqa: B023
            lambda: composers["rsa-2048"].message(row, to=row.recipient, connect=_no_db),  # noqa: B023
        ]
        figures = [percentiles(run, count) for run in runs]
        cells = " ".join(f"{f'{p50:.0f}/{p99:.0f}':>14}" for p50, p99 in figures)
        print(f"{name:<19} {compile_ms:>10.1f} {cells}")
    print(
        "\ncompile: MJML, text derivation and Jinja parsing, once per template version and process."
        "\nrender: Jinja (subject, text, HTML); build: the MIME bytes;"
        "\ncompose: what Delivery.build runs per message (version lookup, render, list headers,"
        " MIME);\ndkim: signing those bytes (RSA-2048 in OpenSSL, or Ed25519)."
    )
    every_option(composers, count)


def every_option(composers: dict[str, Composer], count: int) -> None:
    """One template message plain and with every per-message field, in the same run."""
    composer = composers["none"]
    template = composer.templates.get("login_code")
    plain = sending.OutboxRow(
        id=123456,
        idempotency_key="bench-plain",
        recipient="alice@example.com",
        template="login_code",
        params=dict(template.example),
        message_id="<0123456789abcdef0123456789abcdef@outbox.example>",
        priority="high",
        attempts=1,
        created_at=NOW,
        age_from=NOW,
        template_version=template.version,
    )
    full = dataclasses.replace(
        plain,
        sender='"Billing, Shop" <billing@outbox.example>',
        reply_to=("Support <help@shop.example>", "Ärger <complaints@shop.example>"),
        headers=(
            ("X-Campaign", "spring-2026"),
            ("X-Note", "Grüße aus Köln"),
            ("List-Id", "Shop news <news.shop.example>"),
            ("In-Reply-To", "<ticket-1@shop.example>"),
            ("References", "<ticket-0@shop.example> <ticket-1@shop.example>"),
        ),
        tags=("welcome", "v2"),
        metadata={"order_id": "1001", "items": 3},
        cc=("boss@example.org", "team@example.org"),
        bcc=("audit@example.net",),
    )
    print("\n# every per-message field (sender, 2 reply-to, 5 headers, 2 cc, 1 bcc, tags)")
    print(f"{'message':<30} {'compose p50/p99 µs':>20} {'compose+rsa p50/p99 µs':>24}")
    medians = {}
    for label, row in (("login_code, plain", plain), ("login_code, every field", full)):
        figures = [
            percentiles(
                lambda c=c, r=row: c.message(r, to=r.recipient, connect=_no_db),  # type: ignore[misc]
                count,
            )
            for c in (composers["none"], composers["rsa-2048"])
        ]
        medians[label] = figures[0][0], figures[1][0]
        cells = [f"{p50:.0f}/{p99:.0f}" for p50, p99 in figures]
        print(f"{label:<30} {cells[0]:>20} {cells[1]:>24}")
    (plain_ms, plain_rsa), (full_ms, full_rsa) = medians.values()
    print(
        f"extra cost of every field (p50): {100 * (full_ms / plain_ms - 1):+.0f} % without DKIM,"
        f" {100 * (full_rsa / plain_rsa - 1):+.0f} % with RSA-2048"
    )


def _no_db() -> object:
    raise RuntimeError("the current template version needs no database")


if __name__ == "__main__":
    main()
