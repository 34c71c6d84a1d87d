"""SPF records judged: parsing, lookups counted through includes and redirects, the ending."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from outbox.domain_auth.findings import Answer, Finding, State
from outbox.domain_auth.spf import SpfSyntax, is_spf, judge_spf, parse_spf, walk


def zone(**records: str | list[str]) -> dict[str, Answer]:
    """TXT answers by name, the name's dots written as underscores."""
    return {
        name.replace("_", "."): Answer(tuple(value if isinstance(value, list) else [value]))
        for name, value in records.items()
    }


def lookups(records: dict[str, Answer]) -> Callable[[str], Answer]:
    return lambda name: records.get(name, Answer())


def judge(
    record: str | list[str],
    others: dict[str, Answer] | None = None,
    *,
    expect: tuple[str, bool] | None = None,
) -> Finding:
    answer = Answer(tuple(record if isinstance(record, list) else [record]))
    return judge_spf("shop.example", answer, lookups(others or {}), expect=expect)


@pytest.mark.parametrize(
    ("text", "spf"),
    [("v=spf1 -all", True), ("V=SPF1 -all", True), ("v=spf1", True), ("v=spf10 -all", False),
     ("google-site-verification=x", False), ("v=DMARC1; p=none", False)],
)  # fmt: skip
def test_an_spf_record_is_told_apart(text: str, spf: bool) -> None:
    assert is_spf(text) is spf


def test_terms_are_parsed_with_qualifiers_and_values() -> None:
    terms = parse_spf(
        "v=spf1 ip4:192.0.2.0/24 a/24 ~mx:mail.example include:x.example exp=e.x -all"
    )
    assert [(t.qualifier, t.name, t.value, t.modifier) for t in terms] == [
        ("+", "ip4", "192.0.2.0/24", False),
        ("+", "a", "/24", False),
        ("~", "mx", "mail.example", False),
        ("+", "include", "x.example", False),
        ("+", "exp", "e.x", True),
        ("-", "all", "", False),
    ]


@pytest.mark.parametrize(
    "record",
    ["spf1 -all", "v=spf1 foo:bar -all", "v=spf1 redirect=a.example redirect=b.example",
     "v=spf1 include -all", "v=spf1 -redirect=a.example", "v=spf1 ip4:1.2.3.4 @bad"],
)  # fmt: skip
def test_records_a_receiver_would_refuse_do_not_parse(record: str) -> None:
    with pytest.raises(SpfSyntax):
        parse_spf(record)


def test_a_simple_record_ending_in_minus_all_is_ok() -> None:
    found = judge("v=spf1 ip4:192.0.2.1 -all")
    assert found.state is State.OK
    assert found.found == '"v=spf1 ip4:192.0.2.1 -all" (0 lookups)'
    assert found.fix == ""


def test_no_record_is_an_error_saying_what_to_publish() -> None:
    found = judge("some-verification=abc")
    assert found.state is State.ERROR
    assert found.fix.startswith('publish TXT at shop.example: "v=spf1 include:')


def test_two_records_are_an_error() -> None:
    found = judge(["v=spf1 -all", "v=spf1 ~all"])
    assert found.state is State.ERROR
    assert "2 SPF records" in found.found


def test_a_dns_failure_is_an_error_naming_the_name() -> None:
    found = judge_spf("shop.example", Answer(failure="Timeout"), lookups({}), expect=None)
    assert found.state is State.ERROR
    assert "DNS gave no answer for shop.example (Timeout)" in found.found


@pytest.mark.parametrize(
    ("ending", "state"),
    [("-all", State.OK), ("~all", State.OK), ("?all", State.WARNING), ("", State.WARNING),
     ("+all", State.ERROR), ("all", State.ERROR)],
)  # fmt: skip
def test_the_ending_decides(ending: str, state: State) -> None:
    assert judge(f"v=spf1 ip4:192.0.2.1 {ending}".strip()).state is state


def test_lookups_are_counted_through_includes() -> None:
    others = zone(
        a_example="v=spf1 include:b.example a mx ~all",
        b_example="v=spf1 exists:%{i}.x.example ptr -all",
    )
    found = walk("shop.example", "v=spf1 include:a.example mx -all", lookups(others))
    # include a (1), mx (2); in a: include b (3), a (4), mx (5); in b: exists (6), ptr (7)
    assert found.lookups == 7
    assert found.includes == ["a.example", "b.example"]
    assert found.ptr
    assert found.macros
    assert found.final_all == "-"


def test_eleven_lookups_are_an_error_ten_are_not() -> None:
    ten = "v=spf1 " + " ".join(["a"] * 10) + " -all"
    eleven = "v=spf1 " + " ".join(["a"] * 11) + " -all"
    assert judge(ten).state is State.OK
    over = judge(eleven)
    assert over.state is State.ERROR
    assert "11 DNS-querying terms after expansion (limit 10)" in over.found
    assert over.fix.startswith("flatten includes")


def test_ip4_ip6_and_all_cost_no_lookup() -> None:
    assert walk("x", "v=spf1 ip4:1.2.3.4 ip6:2001:db8::/32 -all", lookups({})).lookups == 0


def test_a_redirect_counts_and_its_ending_is_the_records() -> None:
    others = zone(spf_hoster_example="v=spf1 ip4:192.0.2.0/24 -all")
    found = judge("v=spf1 redirect=spf.hoster.example", others)
    assert found.state is State.OK
    assert "(1 lookups)" in found.found
    soft = judge("v=spf1 redirect=spf.hoster.example", zone(spf_hoster_example="v=spf1 ?all"))
    assert soft.state is State.WARNING


def test_a_redirect_next_to_an_all_is_ignored() -> None:
    found = walk("x", "v=spf1 -all redirect=elsewhere.example", lookups({}))
    assert found.lookups == 0
    assert found.final_all == "-"


def test_an_include_without_spf_is_an_error_and_a_void_lookup() -> None:
    found = judge("v=spf1 include:gone.example -all")
    assert found.state is State.ERROR
    assert "gone.example (included or redirected to) has no usable SPF record" in found.found
    three = judge("v=spf1 include:a.example include:b.example include:c.example -all")
    assert "3 includes find nothing (limit 2)" in three.found


def test_an_include_dns_cannot_answer_is_said_as_such() -> None:
    others = {"slow.example": Answer(failure="Timeout")}
    found = judge("v=spf1 include:slow.example -all", others)
    assert found.state is State.ERROR
    assert "DNS gave no answer for slow.example (Timeout)" in found.found


def test_an_include_loop_is_an_error_and_ends() -> None:
    others = zone(
        a_example="v=spf1 include:b.example -all", b_example="v=spf1 include:a.example -all"
    )
    found = judge("v=spf1 include:a.example -all", others)
    assert found.state is State.ERROR
    assert "a.example includes itself (a loop)" in found.found


def test_an_included_record_that_does_not_parse_is_an_error() -> None:
    found = judge("v=spf1 include:a.example -all", zone(a_example="v=spf1 bogus -all"))
    assert found.state is State.ERROR
    assert "the SPF record of a.example 'bogus' is no SPF mechanism" in found.found


def test_ptr_is_a_warning() -> None:
    found = judge("v=spf1 ptr -all")
    assert found.state is State.WARNING
    assert found.fix == "replace ptr with ip4:"


def test_a_macro_is_counted_but_not_followed() -> None:
    found = judge("v=spf1 include:%{d}.spf.example -all")
    assert found.state is State.OK
    assert "macros not followed" in found.found


def test_the_transports_include_is_a_warning_when_missing_an_asked_one_an_error() -> None:
    others = zone(spf_mtasv_net="v=spf1 ip4:50.31.156.0/23 -all")
    with_it = judge("v=spf1 include:spf.mtasv.net -all", others, expect=("spf.mtasv.net", False))
    assert with_it.state is State.OK
    missing = judge("v=spf1 ip4:192.0.2.1 -all", expect=("amazonses.com", False))
    assert missing.state is State.WARNING
    assert (
        missing.fix == "add include:amazonses.com to the SPF record at shop.example, before its all"
    )
    asked = judge("v=spf1 ip4:192.0.2.1 -all", expect=("relay.example", True))
    assert asked.state is State.ERROR


def test_an_expected_include_deeper_down_counts() -> None:
    others = zone(a_example="v=spf1 include:relay.example -all", relay_example="v=spf1 -all")
    found = judge("v=spf1 include:a.example -all", others, expect=("relay.example", True))
    assert found.state is State.OK
