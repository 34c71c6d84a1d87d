"""Literal-guarded phrase rules."""

from __future__ import annotations

import pytest

from outbox.bounce_parsing import reasons
from outbox.bounce_parsing.patterns import (
    Manual,
    prepare,
    required_literal,
    rules,
    split_alternatives,
)


@pytest.mark.parametrize(
    ("source", "literal"),
    [
        (r"\bpipe to\b", "pipe to"),
        (r"(?:over|exceed(?:ed)?)(?: the)? (?:disk )?quota", "quota"),
        (r"mail ?box\b[^.]{0,30}\bfull", "mail"),
        (r"doesn'?t exist", "t exist"),
        (r"(?:^|[\s#])5\.1\.0 address rejected", "5.1.0 address rejected"),
        (r"recip(?:ient)?notfound", "notfound"),
        (r"users?x", "user"),
        (r"a{0,3}bcd", "bcd"),
        (r"(?:a|b) (?:c|d)", None),
        (r"\d{3} ok", None),
    ],
)
def test_required_literal(source: str, literal: str | None) -> None:
    assert required_literal(source) == literal


def test_split_alternatives_respects_groups_and_classes() -> None:
    assert split_alternatives(r"ab|c(?:d|e)|[|x]y") == ["ab", "c(?:d|e)", "[|x]y"]


def test_rules_refuse_patterns_without_literal() -> None:
    with pytest.raises(ValueError, match="required literal"):
        rules(r"(?:a|b) (?:c|d)")
    (rule,) = rules(Manual(r"(?:a|b) (?:c|d)", (" c", " d")))
    assert rule.search("b d")
    assert not rule.search("x y")


def test_prepare_lowers_and_collapses_space() -> None:
    assert prepare("Recipient address\n    REJECTED:\tUser  unknown") == (
        "recipient address rejected: user unknown"
    )


def test_every_table_rule_is_triggered_by_its_own_literal() -> None:
    tables = (reasons.OVERRIDE_HARD, reasons.SPECIFIC_SOFT, reasons.HARD, reasons.GENERIC_SOFT)
    for table in tables:
        for reason, rule_set in table:
            assert rule_set, reason
            for rule in rule_set:
                assert rule.triggers, (reason, rule.pattern.pattern)
                assert all(t == t.lower() for t in rule.triggers)
                assert rule.pattern.flags & 2 == 0  # not re.IGNORECASE: input is lowered
