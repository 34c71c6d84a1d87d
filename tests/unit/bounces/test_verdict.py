"""Class rules: hard only for dead addresses, everything policy-like or temporary is soft."""

from __future__ import annotations

import pytest

from outbox.bounce_parsing.bounce_result import Failure
from outbox.bounce_parsing.verdict import judge


def verdict(diagnostic: str = "", **kwargs: str | bool | None) -> tuple[str, str, str]:
    kwargs.setdefault("recipient", "a@example.net")
    result = judge(Failure(diagnostic=diagnostic, **kwargs))  # type: ignore[arg-type]
    assert result is not None
    return result.klass, result.reason, result.status


@pytest.mark.parametrize(
    ("diagnostic", "status_field", "klass", "reason"),
    [
        (
            "550 5.1.1 <a@example.net>: Recipient address rejected: User unknown",
            "5.1.1",
            "hard",
            "user_unknown",
        ),
        ("550 No such user here", "5.1.1", "hard", "user_unknown"),
        ("550 No such user here", None, "hard", "user_unknown"),
        (
            "553 sorry, that domain isn't in my list of allowed rcpthosts",
            None,
            "soft",
            "relay_denied",
        ),
        ("550 5.1.2 Host unknown (Name server: host not found)", None, "hard", "host_unknown"),
        ("551 5.1.6 User not local; please try <b@example.org>", None, "hard", "has_moved"),
        ("556 5.1.10 Recipient address has null MX", None, "hard", "no_mail_host"),
        ("553 5.1.3 Bad recipient address syntax", None, "hard", "bad_address"),
        (
            "550 5.7.1 Service unavailable; client [192.0.2.1] blocked using dnsbl.example.org",
            None,
            "soft",
            "blocked",
        ),
        ("554 5.7.1 This message has been identified as spam", None, "soft", "spam"),
        (
            "550 5.7.26 Unauthenticated email is not accepted due to domain's DMARC policy",
            None,
            "soft",
            "authentication",
        ),
        ("552 5.2.2 Mailbox full", None, "soft", "mailbox_full"),
        (
            "552 5.3.4 Message size exceeds fixed maximum message size",
            None,
            "soft",
            "message_too_big",
        ),
        ("421 4.7.0 Too many connections from your IP", None, "soft", "rate_limited"),
        (
            "450 4.2.1 The user you are trying to contact is receiving mail at a rate that "
            "prevents additional messages from being delivered",
            None,
            "soft",
            "rate_limited",
        ),
        (
            "550 5.2.1 The email account that you tried to reach is disabled",
            None,
            "soft",
            "suspended",
        ),
        ("554 5.7.9 Message not accepted for policy reasons", None, "soft", "content"),
        ("550 Rejected", None, "soft", "policy"),
        ("retry timeout exceeded", None, "soft", "expired"),
        ("Connection timed out", None, "soft", "network"),
        ("554 Service currently unavailable", None, "soft", "system"),
    ],
)
def test_reason_and_class(
    diagnostic: str, status_field: str | None, klass: str, reason: str
) -> None:
    got = verdict(diagnostic, status=status_field)
    assert got[:2] == (klass, reason)


def test_policy_text_wins_over_an_address_status_code() -> None:
    assert verdict("550 5.7.1 IP address blacklisted by recipient", status="5.1.1")[:2] == (
        "soft",
        "blocked",
    )
    assert verdict("552 sorry, mailbox over quota temporarily (#5.1.1)")[:2] == (
        "soft",
        "mailbox_full",
    )


def test_user_unknown_wording_under_a_policy_status_is_soft() -> None:
    assert verdict("550 5.7.1 550 User Unknown: a@example.net", status="5.0.0")[0] == "soft"


def test_temporary_status_is_never_hard() -> None:
    klass, reason, code = verdict("DNS Error: Domain name not found: example.net", status="4.0.0")
    assert (klass, reason, code) == ("soft", "host_unknown", "4.0.0")
    assert (
        verdict("450 4.1.1 <a@example.net>: Recipient address rejected: User unknown")[0] == "soft"
    )


def test_delayed_action_is_soft_delayed() -> None:
    assert verdict("Connection timed out", status="4.4.1", action="delayed") == (
        "soft",
        "delayed",
        "4.4.1",
    )
    assert verdict("", action="delayed") == ("soft", "delayed", "4.0.0")


@pytest.mark.parametrize("action", ["delivered", "relayed", "expanded", "Delivered"])
def test_success_actions_are_not_failures(action: str) -> None:
    assert judge(Failure(recipient="a@example.net", action=action, status="2.0.0")) is None


def test_success_status_is_not_a_failure() -> None:
    assert judge(Failure(recipient="a@example.net", status="2.1.5", action="failed")) is None


def test_refusal_of_mail_from_is_about_the_sender() -> None:
    text = "SMTP error after MAIL FROM:<b@example.com>: 553 domain mail.example.com does not exist"
    assert verdict(text)[:2] == ("soft", "sender_rejected")
    assert verdict("550 5.1.8 <b@example.com>: Sender address rejected: Domain not found")[:2] == (
        "soft",
        "sender_rejected",
    )


def test_unknown_user_after_data_is_a_filter() -> None:
    text = ">>> DATA\n<<< 550 Unknown user a@example.net\n554 5.0.0 Service unavailable"
    assert verdict("550 Unknown user a@example.net", status="5.2.0", context=text)[:2] == (
        "soft",
        "filtered",
    )
    # A directory lookup status keeps it hard even when reported after DATA.
    assert verdict("550 unknown user", status="5.1.1", context=text)[0] == "hard"
    # So does wording that states the account does not exist.
    explicit = (
        "554 delivery error: dd This user doesn't have a example.net account "
        "(in reply to end of DATA command)"
    )
    assert verdict(explicit)[0] == "hard"


def test_mailbox_omitted_unknown_user_reply_is_a_filter() -> None:
    assert verdict("550 : User unknown")[:2] == ("soft", "filtered")
    rcpt = "550 <a@example.net>: User unknown (in reply to RCPT TO command)"
    assert verdict(rcpt)[0] == "hard"


def test_mailbox_status_code_outweighs_unknown_user_wording() -> None:
    # RFC 3463 X.2.1: the mailbox exists but is disabled.
    text = "550 5.2.1 <a@example.net>... User Unknown"
    assert verdict(text, status="5.2.1") == ("soft", "suspended", "5.2.1")
    # Answered to RCPT TO, the words are the directory's own answer.
    rcpt = f"host mx.example.net[192.0.2.1] said: {text} (in reply to RCPT TO command)"
    assert verdict(rcpt, status="5.2.1")[:2] == ("hard", "user_unknown")
    qmail = "192.0.2.1 does not like recipient."
    assert verdict(text, status="5.2.1", context=qmail)[:2] == ("hard", "user_unknown")


def test_system_or_content_status_code_outweighs_unknown_user_wording() -> None:
    relayed = "5.3.0 - Other mail system problem 550-'Unknown user a@example.net'"
    assert verdict(relayed, status="5.0.0") == ("soft", "system", "5.3.0")
    assert verdict("554 5.6.0 Unknown user a@example.net")[:2] == ("soft", "content")
    rcpt = "SMTP:RCPT host 192.0.2.8: 553 5.3.0 <a@example.net>... No such user here"
    assert verdict(rcpt)[:2] == ("hard", "user_unknown")


def test_address_and_generic_status_codes_keep_unknown_user_hard() -> None:
    assert verdict("550 5.1.1 <a@example.net>... User Unknown")[:2] == ("hard", "user_unknown")
    # X.5.0 is what many servers put on any bare 550: the RCPT stage decides.
    text = "550 Requested action not taken: mailbox unavailable (in reply to RCPT TO command)"
    assert verdict(text, status="5.5.0")[:2] == ("hard", "user_unknown")


def test_local_delivery_program_failure_is_not_an_unknown_user() -> None:
    text = 'procmail: Couldn\'t create "/var/spool/mail/b" id: b.example.org: No such user'
    assert verdict(text, status="5.1.1")[:2] == ("soft", "system")
    # Postfix local(8) naming a missing local user stays hard.
    assert verdict('unknown user: "b"', status="5.1.1")[:2] == ("hard", "user_unknown")


def test_exim_header_address_list_error_is_not_a_bad_address() -> None:
    text = (
        "a@example.org <a@example.net>: malformed address: <a@example.net> "
        "may not follow a@example.org"
    )
    assert verdict(text)[:2] == ("soft", "content")
    assert verdict("553 5.1.3 malformed address: a@@example.net")[:2] == ("hard", "bad_address")


def test_office365_directory_edge_blocking_is_hard() -> None:
    text = "550 5.4.1 Recipient address rejected: Access denied. AS(201806281) [X.prod.example.com]"
    assert verdict(text) == ("hard", "user_unknown", "5.4.1")
    # The same rejection before Exchange Online added the AS( codes.
    older = (
        "host example-org.mail.protection.outlook.com said: 550 5.4.1 [a@example.org]: "
        "Recipient address rejected: Access denied [BL2.prod.outlook.com] "
        "(in reply to RCPT TO command)"
    )
    assert verdict(older, status="5.4.1") == ("hard", "user_unknown", "5.4.1")
    # A plain Postfix access-map REJECT is a policy, whatever it says.
    assert verdict("554 5.7.1 <a@example.org>: Recipient address rejected: Access denied")[0] == (
        "soft"
    )
    assert verdict("550 5.7.1 <a@example.net>... Access denied")[0] == "soft"


def test_reply_521_means_the_host_takes_no_mail() -> None:
    assert verdict("521 5.3.2 <a@example.net>: Recipient address rejected: not accepting")[:2] == (
        "hard",
        "no_mail_host",
    )
    assert verdict("521-5.7.1 client blocked using dnsbl.example.org")[:2] == ("soft", "blocked")


def test_status_alone_decides_when_text_says_nothing() -> None:
    assert verdict("", status="5.1.1") == ("hard", "user_unknown", "5.1.1")
    assert verdict("", status="5.2.2") == ("soft", "mailbox_full", "5.2.2")
    assert verdict("", status="5.7.1") == ("soft", "policy", "5.7.1")
    assert verdict("", status="5.0.0") == ("soft", "unknown", "5.0.0")


def test_context_is_used_when_the_diagnostic_is_silent() -> None:
    assert verdict("", status="5.0.0", context="mailbox is full: retry timeout exceeded")[:2] == (
        "soft",
        "mailbox_full",
    )


def test_status_is_derived_when_absent() -> None:
    text = "550 Requested action not taken: no such user here"
    assert verdict(text, command="rcpt") == ("hard", "user_unknown", "5.1.1")
    # Clear words need no stage to be hard; the code is derived from the reason.
    assert verdict(text) == ("hard", "user_unknown", "5.1.1")
    assert verdict("452 Insufficient system storage") == ("soft", "mailbox_full", "4.2.2")


@pytest.mark.parametrize(
    "text",
    [
        "550 kijitora@example.net... No such user",
        "550 Unknown user a@example.net",
        "550 <a@example.net>... User not exist",
        "[User unknown]",
        "This user doesn't have a example.net account (a@example.net) [-9]",
        "The email account that you tried to reach does not exist.",
        # Apache James's notice restates the reply; it is no lookup of its own.
        "Error: Invalid user address Error message below: 550 - Requested action not taken: "
        "no such user here",
    ],
)
def test_clear_unknown_user_words_are_hard_without_a_stage(text: str) -> None:
    # Words that say the address does not exist, with nothing against them (no DATA
    # stage, no policy or mailbox-state code, no sender stage), are a verdict.
    assert verdict(text)[:2] == ("hard", "user_unknown")
    assert verdict(text, status="5.0.0")[:2] == ("hard", "user_unknown")


@pytest.mark.parametrize(
    ("text", "kwargs"),
    [
        ("550 No such user", {"status": "5.1.1"}),
        ("550 5.1.10 Recipient not found", {}),
        ("550 No such user", {"command": "rcpt"}),
        ("host mx.example.net said: 550 No such user (in reply to RCPT TO command)", {}),
        ("SMTP error from remote mail server after RCPT TO:<a@example.net>: 550 No such user", {}),
    ],
)
def test_status_code_or_rcpt_stage_confirms_unknown_user(text: str, kwargs: dict[str, str]) -> None:
    assert verdict(text, **kwargs)[:2] == ("hard", "user_unknown")


def test_a_temporary_addressing_code_confirms_the_reason_but_not_the_class() -> None:
    assert verdict("450 No such user", status="4.1.1")[:2] == ("soft", "user_unknown")


@pytest.mark.parametrize(
    ("diagnostic", "context"),
    [
        ("mail.local: unknown user: b", ""),
        ("550 <b@example.net>: User unknown", "** Address not found ** Your message wasn't"),
        ("The recipient name is not recognized", ""),
        ("Unable to deliver message to <b@example.net>. Please check if address is correct.", ""),
        ("Invalid final delivery userid: b@example.net", ""),
        ("User b (b@example.net) not listed in Domino Directory", ""),
        ("554 delivery error: dd This user doesn't have a example.net account", ""),
        ("550 5.4.1 Recipient address rejected: Access denied. AS(201806281)", ""),
    ],
)
def test_a_receiving_systems_own_verdict_confirms_unknown_user(
    diagnostic: str, context: str
) -> None:
    assert verdict(diagnostic, context=context)[:2] == ("hard", "user_unknown")


def test_provider_wording_confirms_only_from_that_providers_hosts() -> None:
    text = "550 Requested action not taken: mailbox unavailable (-0000000022:2222)"
    assert verdict(text, status="5.5.0", reporting_mta="BAY004-MC1.hotmail.com")[0] == "hard"
    assert verdict(text, status="5.5.0", remote_mta="mx1.outlook.com")[0] == "hard"
    assert verdict(text, status="5.5.0", remote_mta="mx.example.net")[:2] == (
        "soft",
        "unconfirmed_user",
    )
    assert verdict(text, status="5.5.0", remote_mta="hotmail.com.example.net")[0] == "soft"


def test_a_notice_that_contradicts_its_own_report_is_soft() -> None:
    diagnostic = "550 5.1.1 <b@example.net>... User Unknown"
    notice = "Your message to <b> was automatically rejected: Not enough disk space"
    assert verdict(diagnostic, context=notice, sole=True) == ("soft", "mailbox_full", "5.1.1")
    # In a report about several recipients the notice may be about another one.
    assert verdict(diagnostic, context=notice)[0] == "hard"
    # Policy words in a notice's boilerplate do not count against the report.
    boilerplate = "If the message was rejected as spam, contact your administrator."
    assert verdict(diagnostic, context=boilerplate, sole=True)[0] == "hard"


@pytest.mark.parametrize(
    "text",
    [
        "550 5.4.4 Invalid domain",
        "DNS lookup failure: host gone.example.net not found",
    ],
)
def test_a_domain_that_does_not_exist_is_hard(text: str) -> None:
    assert verdict(text)[:2] == ("hard", "host_unknown")


def test_qmail_names_the_rcpt_stage_when_every_mx_refused() -> None:
    text = (
        "Sorry, no SMTP connection got far enough; most progress was RCPT TO response; "
        "remote host 192.0.2.1 said: 550 Unknown user a@example.org . (#5.5.0)"
    )
    assert verdict(text)[:2] == ("hard", "user_unknown")


def test_a_final_report_of_a_temporary_unknown_user_is_hard() -> None:
    text = "450 4.1.1 <a@example.org>: Recipient address rejected: User unknown"
    assert verdict(text, status="4.1.1", action="failed")[:2] == ("hard", "user_unknown")
    # Still being retried: not a verdict on the address yet.
    assert verdict(text, status="4.1.1", action="delayed")[:2] == ("soft", "delayed")
    # Only codes that say the mailbox or domain does not exist.
    full = "452 4.2.2 Mailbox full"
    assert verdict(full, status="4.2.2", action="failed")[:2] == ("soft", "mailbox_full")


def test_au_names_the_mailbox_only_when_it_does_not_exist() -> None:
    named = "550 <a@ezweb.ne.jp>: User unknown"
    assert verdict(named, recipient="a@ezweb.ne.jp")[:2] == ("hard", "user_unknown")
    assert verdict("550 : User unknown", recipient="a@ezweb.ne.jp")[:2] == ("soft", "filtered")
    # Named or not by a provider, the words about a named mailbox are clear.
    other = "550 <a@example.org>: User unknown"
    assert verdict(other, recipient="a@example.org")[:2] == ("hard", "user_unknown")


def test_a_bare_report_code_gives_way_to_the_notices_specific_one() -> None:
    context = "550 5.1.1 <a@example.org>: Recipient address rejected: User unknown"
    assert verdict("", status="5.0.0", context=context) == ("hard", "user_unknown", "5.1.1")


@pytest.mark.parametrize(
    ("diagnostic", "fields", "expected"),
    [
        # The refused recipient's address alone, or "recipient" / "address", then
        # "rejected" and nothing more: weak wording, hard once something backs it.
        ("554 5.1.0 <a@example.net> rejected", {}, ("hard", "user_unknown")),
        ("550 #5.1.0 Recipient rejected.", {}, ("hard", "user_unknown")),
        (
            "550 Recipient address rejected",
            {"context": "remote host said: 550 Recipient address rejected (in reply to RCPT TO)"},
            ("hard", "user_unknown"),
        ),
        ("550 a@example.net rejected", {}, ("hard", "user_unknown")),
        # Unbacked: RFC 5321's 550 is also the policy refusal.
        ("550 Recipient rejected", {}, ("soft", "unconfirmed_user")),
        # Another mailbox's address opening the answer is no echo of this recipient.
        ("550 <other@example.net> rejected", {}, ("soft", "unconfirmed_user")),
        # Not the shape: nothing about the recipient, or a reason after the words.
        ("550 Rejected", {}, ("soft", "policy")),
        ("550 5.0.0 Recipient address rejected: greylisted", {}, ("soft", "policy")),
        ("550 5.1.0 Address rejected: over quota", {}, ("soft", "mailbox_full")),
        ("451 4.1.0 <a@example.net> rejected", {}, ("soft", "user_unknown")),
    ],
)
def test_a_bare_refusal_of_the_recipient_is_weak_unknown_user_wording(
    diagnostic: str, fields: dict[str, str], expected: tuple[str, str]
) -> None:
    assert verdict(diagnostic, **fields)[:2] == expected


def test_an_answer_echoing_the_recipient_backs_weak_wording_only_when_no_stage_is_known() -> None:
    text = "550 <a@example.net>: mailbox unavailable"
    assert verdict(text)[:2] == ("hard", "user_unknown")
    # The notice says the refusal came after DATA: the echo does not move it to RCPT.
    assert verdict(text, context=">>> DATA\n<<< " + text)[:2] == ("soft", "unconfirmed_user")


@pytest.mark.parametrize(
    ("diagnostic", "fields", "reason"),
    [
        # Postfix, passing on the resolver's HOST_NOT_FOUND answer.
        (
            "Host or domain name not found. Name service error for name=gone.example.net "
            "type=MX: Host not found",
            {},
            "host_unknown",
        ),
        # Sendmail.
        (
            "550 gone.example.net... Host unknown (Name server: gone.example.net: host not found)",
            {},
            "host_unknown",
        ),
        ("554 <a@gone.example.net>... 550 Host unknown", {}, "host_unknown"),
        # Exim.
        ("Unrouteable address", {}, "host_unknown"),
        ("all relevant MX records point to non-existent hosts", {}, "host_unknown"),
        # qmail-remote, without its parenthesised code.
        ("Sorry, I couldn't find any host named gone.example.net.", {}, "host_unknown"),
        ("Sorry, I couldn't find a mail exchanger or IP address.", {}, "host_unknown"),
        # Exchange Online: a code of the X.4 subject, which leaves the reason to the words.
        ("550 5.4.310 DNS domain gone.example.net does not exist", {}, "host_unknown"),
        # getaddrinfo's answer for a name that does not exist.
        ("lookup of gone.example.net: Name or service not known", {}, "host_unknown"),
        # RFC 7504's reply texts, and Exim's reading of a null MX.
        ("521 Host does not accept mail", {}, "no_mail_host"),
        ("550 Domain does not accept mail", {}, "no_mail_host"),
        # Sendmail puts RFC 7505's X.7.27 on a recipient domain's null MX.
        ("550 Host does not accept mail", {"status": "5.7.27"}, "no_mail_host"),
        ("an MX or SRV record indicated no SMTP service", {}, "no_mail_host"),
    ],
)
def test_a_recipient_domain_without_a_mail_route_is_hard(
    diagnostic: str, fields: dict[str, str], reason: str
) -> None:
    assert verdict(diagnostic, **fields)[:2] == ("hard", reason)


@pytest.mark.parametrize(
    ("diagnostic", "fields", "expected"),
    [
        # The resolver could not answer: the domain may well exist.
        (
            "Host or domain name not found. Name service error for name=slow.example.net "
            "type=MX: Host not found, try again",
            {},
            ("soft", "network"),
        ),
        ("Host unknown (Temporary failure in name resolution)", {}, ("soft", "network")),
        ("550 Host unknown (Name server: slow.example.net: SERVFAIL)", {}, ("soft", "network")),
        # A temporary code or a delay warning is never hard, whatever the words.
        ("451 4.4.4 Unrouteable address", {}, ("soft", "host_unknown")),
        ("Host unknown", {"status": "4.4.3"}, ("soft", "host_unknown")),
        ("No MX found for domain", {"action": "delayed", "status": "4.4.4"}, ("soft", "delayed")),
        ("Host does not accept mail", {"action": "delayed"}, ("soft", "delayed")),
    ],
)
def test_a_domain_failure_that_may_clear_stays_soft(
    diagnostic: str, fields: dict[str, str], expected: tuple[str, str]
) -> None:
    assert verdict(diagnostic, **fields)[:2] == expected
