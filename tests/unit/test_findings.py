"""A check's finding: the worst problem decides, every problem is said, tag lists parse."""

from __future__ import annotations

from outbox.domain_auth.findings import (
    Finding,
    State,
    error,
    finding_lines,
    judged,
    ok,
    tags,
    warning,
    worst,
)


def test_no_problem_is_ok_with_no_fix() -> None:
    assert judged("d.example", "spf", "found", []) == Finding("d.example", "spf", State.OK, "found")


def test_the_worst_problem_gives_the_state_and_the_fix_every_one_is_said() -> None:
    found = judged(
        "d.example",
        "dmarc",
        "rec",
        [warning("w1", "fix w1"), error("e1", "fix e1"), error("e2", "x")],
    )
    assert found.state is State.ERROR
    assert found.found == "rec: w1; e1; e2"
    assert found.fix == "fix e1"


def test_a_note_leaves_the_state_ok() -> None:
    found = judged("d.example", "dkim", "", [ok("signed elsewhere")])
    assert (found.state, found.found, found.fix) == (State.OK, "signed elsewhere", "")


def test_worst_of_none_is_ok_and_states_order() -> None:
    assert worst([]) is State.OK
    assert State.OK < State.WARNING < State.ERROR
    assert [s.word for s in State] == ["ok", "warning", "error"]


def test_tag_lists() -> None:
    assert tags(" v=DKIM1 ; K=rsa; p=AB CD\n EF ;; t=y; k=ed25519") == {
        "v": "DKIM1",
        "k": "rsa",
        "p": "ABCDEF",
        "t": "y",
    }


def test_lines_show_the_fix_under_its_finding() -> None:
    findings = [
        Finding("d.example", "spf", State.OK, "fine"),
        Finding("d.example", "dkim", State.ERROR, "wrong key", "publish it"),
    ]
    assert finding_lines(findings) == [
        "  ok       spf        fine",
        "  error    dkim       wrong key",
        "                      fix: publish it",
    ]
    assert finding_lines(findings, only_fixes=True) == finding_lines(findings)[1:]
