"""MTA-STS and TLS-RPT records and policies judged, and the bounce domain's MX."""

from __future__ import annotations

import pytest

from outbox.domain_auth.findings import Answer, Finding, State
from outbox.domain_auth.mta_sts import (
    Policy,
    PolicyFetch,
    judge_bounce_mx,
    judge_mta_sts,
    judge_tls_rpt,
    mx_matches,
    parse_policy,
    policy_url,
)

POLICY = (
    "version: STSv1\r\nmode: enforce\r\nmx: mx1.shop.example\r\nmx: *.mail.example\r\n"
    "max_age: 604800\r\n"
)
TXT = Answer(("v=STSv1; id=20260101T000000",))
MX = Answer(("mx1.shop.example", "b.mail.example"))


def judge(text: str = POLICY, txt: Answer = TXT, mx: Answer = MX, failure: str = "") -> Finding:
    return judge_mta_sts("shop.example", txt, PolicyFetch(text, failure), mx)


def test_the_policy_url() -> None:
    assert policy_url("shop.example") == "https://mta-sts.shop.example/.well-known/mta-sts.txt"


def test_a_policy_parses_with_crlf_or_lf() -> None:
    expected = Policy("enforce", 604800, ("mx1.shop.example", "*.mail.example"))
    assert parse_policy(POLICY) == expected
    assert parse_policy(POLICY.replace("\r\n", "\n")) == expected


@pytest.mark.parametrize(
    ("text", "said"),
    [("mode: enforce\nmx: a\nmax_age: 1", "has no version: STSv1"),
     ("version: STSv1\nmode: strict\nmx: a\nmax_age: 1", "mode strict is not enforce"),
     ("version: STSv1\nmode: enforce\nmx: a\nmax_age: soon", "max_age soon is not a number"),
     ("version: STSv1\nmode: enforce\nmx: a\nmax_age: 99999999", "max_age 99999999 is not"),
     ("version: STSv1\nmode: enforce\nmax_age: 86400", "names no mx"),
     ("version: STSv1\n<html>", "is not key: value")],
)  # fmt: skip
def test_broken_policies(text: str, said: str) -> None:
    parsed = parse_policy(text)
    assert isinstance(parsed, str)
    assert said in parsed


@pytest.mark.parametrize(
    ("pattern", "host", "result"),
    [("mx1.shop.example", "MX1.shop.example.", True), ("*.mail.example", "b.mail.example", True),
     ("*.mail.example", "a.b.mail.example", False), ("*.mail.example", "mail.example", False),
     ("mx1.shop.example", "mx2.shop.example", False)],
)  # fmt: skip
def test_mx_patterns(pattern: str, host: str, result: bool) -> None:
    assert mx_matches(pattern, host) is result


def test_an_enforced_policy_covering_every_mx_is_ok() -> None:
    found = judge()
    assert found.state is State.OK
    assert found.found == "id=20260101T000000 mode=enforce max_age=604800"


def test_an_mx_the_enforced_policy_does_not_name_is_an_error() -> None:
    found = judge(mx=Answer(("mx1.shop.example", "mx2.shop.example")))
    assert found.state is State.ERROR
    assert "MX mx2.shop.example not named by the policy's mx" in found.found
    assert found.fix.startswith("add mx: mx2.shop.example to https://mta-sts.shop.example/")


def test_testing_mode_and_a_short_max_age_are_warnings() -> None:
    found = judge(POLICY.replace("enforce", "testing").replace("604800", "3600"))
    assert found.state is State.WARNING
    assert "mode testing" in found.found
    assert "max_age 3600 s" in found.found
    uncovered = judge(POLICY.replace("enforce", "testing"), mx=Answer(("mx9.other.example",)))
    assert uncovered.state is State.WARNING  # testing: mail is still delivered
    assert judge("version: STSv1\nmode: none\nmax_age: 86400\n").state is State.WARNING


def test_no_record_is_a_warning_unless_the_domain_takes_no_mail() -> None:
    missing = judge(txt=Answer())
    assert missing.state is State.WARNING
    assert missing.fix.startswith('publish TXT at _mta-sts.shop.example: "v=STSv1; id=')
    assert judge(txt=Answer(), mx=Answer()).state is State.OK


@pytest.mark.parametrize(
    "txt",
    [
        Answer(("v=STSv1",)),
        Answer(("v=STSv1; id=a-b",)),
        Answer(("v=STSv1; id=1", "v=STSv1; id=2")),
    ],
)
def test_a_record_without_one_good_id_is_an_error(txt: Answer) -> None:
    assert judge(txt=txt).state is State.ERROR


def test_a_policy_that_cannot_be_fetched_or_read_is_an_error() -> None:
    failed = judge(failure="HTTP 404 (it must be 200, no redirect)")
    assert failed.state is State.ERROR
    assert "policy: HTTP 404" in failed.found
    assert failed.fix.startswith("serve https://mta-sts.shop.example/.well-known/mta-sts.txt")
    unreadable = judge(text="<html></html>")
    assert unreadable.state is State.ERROR
    not_fetched = judge_mta_sts("shop.example", TXT, None, MX)
    assert "policy: not fetched" in not_fetched.found
    assert judge(txt=Answer(failure="Timeout")).state is State.ERROR


@pytest.mark.parametrize(
    ("records", "state"),
    [(("v=TLSRPTv1; rua=mailto:tls@shop.example",), State.OK),
     (("v=TLSRPTv1; rua=https://reports.example/tls,mailto:t@x",), State.OK),
     ((), State.WARNING),
     (("v=TLSRPTv1; rua=tls@shop.example",), State.ERROR),
     (("v=TLSRPTv1",), State.ERROR),
     (("v=TLSRPTv1; rua=mailto:a@x", "v=TLSRPTv1; rua=mailto:b@x"), State.ERROR)],
)  # fmt: skip
def test_tls_rpt(records: tuple[str, ...], state: State) -> None:
    found = judge_tls_rpt("shop.example", Answer(records))
    assert found.state is state
    if state is not State.OK:
        assert found.fix.startswith('publish TXT at _smtp._tls.shop.example: "v=TLSRPTv1; rua=')


def test_the_bounce_domain_needs_an_mx() -> None:
    ok = judge_bounce_mx("shop.example", "bounces.shop.example", Answer(("in.shop.example",)))
    assert ok.state is State.OK
    assert ok.found == "bounces.shop.example MX in.shop.example"
    for answer, said in ((Answer(), "has no MX"), (Answer((".",)), "refuses mail (null MX)")):
        found = judge_bounce_mx("shop.example", "bounces.shop.example", answer)
        assert found.state is State.ERROR
        assert said in found.found
        assert found.fix.startswith("publish MX at bounces.shop.example: 10 ")
    failed = judge_bounce_mx("shop.example", "b.example", Answer(failure="Timeout"))
    assert failed.state is State.ERROR
