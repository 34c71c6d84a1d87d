from __future__ import annotations

import pytest

from outbox.bounce_parsing import BounceResult
from outbox.bounce_receiving.policy import Link, effects, rights, soft_streak_reached

HARD = BounceResult("hard", "a@example.com", "5.1.1")
SOFT = BounceResult("soft", "a@example.com", "4.2.2")
COMPLAINT = BounceResult("complaint", "a@example.com")
DELAYED = BounceResult("soft", "a@example.com", "4.4.7", reason="delayed")
OTHER = BounceResult("other", "a@example.com")
VERP = Link("verp", 7, "a@example.com")


def test_verp_link_acts_on_the_rows_recipient() -> None:
    [effect] = effects(VERP, [BounceResult("hard", "A@Example.com", "5.1.1")])
    assert (effect.klass, effect.address, effect.suppress) == (
        "hard",
        "a@example.com",
        "hard_bounce",
    )
    assert effect.reason == "hard bounce 5.1.1 (verp)"


@pytest.mark.parametrize(
    ("result", "suppress"),
    [(HARD, "hard_bounce"), (COMPLAINT, "complaint"), (SOFT, "soft_streak")],
)
def test_each_class(result: BounceResult, suppress: str) -> None:
    [effect] = effects(VERP, [result])
    assert effect.suppress == suppress
    assert effect.klass == result.klass


@pytest.mark.parametrize("result", [DELAYED, OTHER])
def test_no_verdict(result: BounceResult) -> None:
    assert effects(VERP, [result]) == []


@pytest.mark.parametrize(
    "link",
    [
        Link("none", forged=True),
        Link("verp", 7, "a@example.com", forged=True),
        Link("none"),
        Link("message_id", None, None),
    ],
)
def test_untrusted_links_do_nothing(link: Link) -> None:
    assert effects(link, [HARD, COMPLAINT]) == []


@pytest.mark.parametrize(
    "result",
    [
        HARD,
        SOFT,
        COMPLAINT,
        BounceResult("complaint", "a@example.com", reason="unsubscribe"),
        BounceResult("hard", "A@Example.com", "5.1.1"),
    ],
)
def test_regression_message_id_link_never_acts(result: BounceResult) -> None:
    """Finding 1: a forged DSN or "unsubscribe" mail quoting a computable Message-ID
    suppressed its victim. A Message-ID is public: recorded, never acted on."""
    assert effects(Link("message_id", 7, "a@example.com"), [result]) == []


def test_provider_webhook_link_acts() -> None:
    [effect] = effects(Link("provider_id", 7, "a@example.com"), [HARD])
    assert (effect.address, effect.suppress) == ("a@example.com", "hard_bounce")


@pytest.mark.parametrize(
    ("recent", "reached"),
    [
        (["soft"] * 5, True),
        (["soft"] * 6, True),
        (["soft"] * 4, False),
        (["soft", "soft", None, "soft", "soft", "soft"], False),
        (["soft"] * 4 + ["hard"], False),
        ([], False),
    ],
)
def test_soft_streak(recent: list[str | None], reached: bool) -> None:
    assert soft_streak_reached(recent, 5) is reached


def test_an_unsubscribe_reply_stops_only_newsletters() -> None:
    request = BounceResult("complaint", "a@example.com", reason="unsubscribe")
    [effect] = effects(VERP, [request])
    assert (effect.suppress, effect.scope) == ("unsubscribe", "bulk")


def test_a_report_about_a_cc_or_bcc_of_the_row_acts_on_nobody() -> None:
    link = Link("verp", 7, "a@example.com", copies=frozenset({"cc@example.org", "bcc@example.net"}))
    for address in ("cc@example.org", "BCC@example.net"):
        assert effects(link, [BounceResult("hard", address, "5.1.1")]) == []
        assert effects(link, [BounceResult("complaint", address)]) == []
    # A provider's webhook names the recipient it means: the `to` still counts.
    reported = Link("provider_id", 7, "a@example.com", copies=link.copies)
    [effect] = effects(reported, [BounceResult("hard", "a@example.com", "5.1.1")])
    assert effect.address == "a@example.com"


def test_a_return_path_every_copy_carried_acts_on_nobody() -> None:
    """One SMTP transaction, one envelope sender: a cc or bcc reader knows the
    Return-Path as well as the `to` does, and may name the `to` in a made-up DSN."""
    link = Link("verp", 7, "a@example.com", copies=frozenset({"cc@example.org"}))
    assert rights(link) == "record"
    assert effects(link, [BounceResult("hard", "a@example.com", "5.1.1"), COMPLAINT]) == []


def test_a_bounce_naming_another_recipient_acts_on_nobody() -> None:
    for link in (VERP, Link("provider_id", 7, "a@example.com")):
        assert effects(link, [BounceResult("hard", "final@elsewhere.example", "5.1.1")]) == []
        assert effects(link, [BounceResult("soft", "other@example.com", "4.2.2")]) == []
    # The same address spelled with an IDNA domain is the same recipient.
    idn = Link("verp", 7, "a@bücher.example")
    [effect] = effects(idn, [BounceResult("hard", "A@xn--bcher-kva.example", "5.1.1")])
    assert effect.address == "a@bücher.example"


def test_an_unsubscribe_token_can_only_unsubscribe() -> None:
    link = Link("verp", 7, "a@example.com", proof="unsubscribe", bulk=True)
    assert rights(link) == "unsubscribe"
    assert effects(link, [HARD, SOFT]) == []
    for report in (COMPLAINT, BounceResult("complaint", "a@example.com", reason="unsubscribe")):
        [effect] = effects(link, [report])
        assert (effect.suppress, effect.scope) == ("unsubscribe", "bulk")


@pytest.mark.parametrize(
    ("link", "allowed"),
    [
        (Link("verp", 7, "a@example.com", proof="previous"), "all"),
        (Link("verp", 7, "a@example.com", proof="previous", bulk=True), "unsubscribe"),
        (
            Link("verp", 7, "a@example.com", proof="previous", copies=frozenset({"c@x.org"})),
            "record",
        ),
        (Link("verp", 7, "a@example.com", bulk=True), "all"),
    ],
)
def test_what_a_previous_release_token_may_do(link: Link, allowed: str) -> None:
    assert rights(link) == allowed
