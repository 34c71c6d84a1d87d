"""What a server's rejection text means: keyword tables grouped by reason.

Phrases are the wording real MTAs use (Postfix, Sendmail, Exim, qmail, Exchange,
Gmail, Yahoo, Outlook.com, ...), written as small regex families so that variants
("user unknown", "unknown user", "user not found", "no such user") share one rule.

Three tiers, checked in order by :mod:`outbox.bounce_parsing.verdict`:

* ``SPECIFIC_SOFT`` - refusals that say *why* the mail was refused without saying the
  address is dead (block lists, spam, authentication, quota, size, rate, relaying,
  sender problems, suspended accounts, content).  These win over everything, because
  many policy refusals are phrased "Recipient address rejected: ...".
* ``HARD`` - the address or its domain does not exist.
* ``GENERIC_SOFT`` - vague or temporary wording (timeouts, expiry, "service
  unavailable", "denied", "rejected").

The wording one product documents for "no such address", which backs these
tables up, is :mod:`outbox.bounce_parsing.product_rules`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from outbox.bounce_parsing.patterns import Manual, Rule, prepare
from outbox.bounce_parsing.patterns import rules as _rx

_STATES = (
    "disabled",
    "suspended",
    "inactive",
    "deactivated",
    "frozen",
    "locked",
    "terminated",
    "archived",
    "on hold",
    "blocked",
)

_USER_STATES = (
    "unknown",
    " not ",
    "n't",
    "exist",
    "invalid",
    "missing",
)

# Patterns are written in lower case and matched against lower-cased text with white
# space collapsed (see :func:`outbox.bounce_parsing.patterns.prepare`).
Table = Sequence[tuple[str, tuple[Rule, ...]]]

# RFC 7505 null MX: the domain states it accepts no mail at all, so the failure is
# final even when the reporting MTA labelled it 4.x.x.
NULL_MX = re.compile(r"null ?mx|does not accept (?:e-?)?mail|doesn'?t receive (?:e-?)?mail", re.I)

# Office 365 directory-based edge blocking answers unknown recipients this way
# (Microsoft: "550 5.4.1 Recipient address rejected: Access denied").  It must be
# checked before the generic "access denied" block rule below.
OVERRIDE_HARD: Table = (
    (
        "user_unknown",
        _rx(
            r"recipient address rejected:\s*access denied\.?\s*as\(",
            # The same Exchange Online rejection before the AS( codes were added.
            r"\b5\.4\.1 .{0,120}?recipient address rejected:\s*access denied",
        ),
    ),
)

SPECIFIC_SOFT: Table = (
    (
        "authentication",
        _rx(
            r"\bdmarc\b",
            r"\bspf\b",
            r"\bdkim\b",
            r"unauthenticated (?:e-?mail|mail|message)",
            r"authentication (?:checks? )?(?:failed|failure|required)",
            r"(?:was |is )?not authenticated",
            r"sender policy framework",
            r"does not pass (?:\w+ )?verification",
        ),
    ),
    (
        # A resolver that failed (SERVFAIL, a broken or unreachable name server, a
        # timeout) says nothing about whether the domain exists, even when the MTA
        # gives up with 5.4.4; NXDOMAIN wording is host_unknown below.
        "network",
        _rx(
            r"malformed or unexpected name server reply",
            r"name server (?:timeout|failure|error|not responding)",
            r"temporary failure in name resolution",
            # The resolver's TRY_AGAIN text, which Postfix passes on: "Name service
            # error for name=... type=MX: Host not found, try again".
            r"host not found, try again",
            r"\bservfail\b",
            r"dns (?:timeout|server failure|servfail)",
        ),
    ),
    ("virus", _rx(r"\bvirus(?:es)?\b", r"malware", r"\binfected\b", r"\btrojan\b")),
    (
        "spam",
        _rx(
            r"\bspam\b",
            r"\bspam(?:my|[- ]?like|[- ]?score|[- ]?classification|assassin)",
            r"\bjunk\b",
            r"\bube\b",
            r"unsolicited",
            r"bulk (?:e-?mail|mail)",
            r"phishing",
            r"\bspamsignature",
        ),
    ),
    (
        "relay_denied",
        _rx(
            r"relay(?:ing)? (?:denied|not (?:permitted|allowed)|access denied|prohibited|refused)",
            r"not (?:configured|permitted|allowed|authori[sz]ed) to relay",
            r"(?:unable|refuse) to relay",
            r"we do not relay",
            r"\bno relaying\b",
            r"isn't in my list of allowed rcpthosts",
        ),
    ),
    (
        "sender_rejected",
        _rx(
            r"sender (?:address|domain|verify|verification|rejected|denied|is not|not allowed|"
            r"blacklisted|unknown|invalid)",
            r"domain of sender",
            Manual(
                r"(?:mail from|envelope from|from address|from domain|return path)\b[^.]{0,60}"
                r"(?:rejected|invalid|denied|refused|not (?:allowed|verified|accepted))",
                ("mail from", "envelope from", "from address", "from domain", "return path"),
            ),
            r"unroute?able sender",
            r"invalid sender",
            r"bad sender",
            r"unauthenticated senders?",
            r"address is not verified",
            r"identities failed",
            r"valid from:",
            r"senders? (?:are )?not allowed",
        ),
    ),
    (
        "rate_limited",
        _rx(
            Manual(r"(?:sending|daily|hourly|message|send) (?:quota|limit)", (" quota", " limit")),
            r"rate[- ]?limit",
            r"too many (?:connections|messages|mails|e-?mails|recipients|concurrent|sessions|"
            r"simultaneous|rcpt)",
            r"frequency limit",
            r"receiving mail at a rate",
            Manual(
                r"(?:rate|volume) (?:of|that) ",
                ("rate of", "rate that", "volume of", "volume that"),
            ),
            r"temporarily deferred",
            r"unexpected volume",
            r"throttl",
            r"slow down",
            r"\bspeed(?:ing)? limit",
        ),
    ),
    (
        "blocked",
        _rx(
            r"black ?list",
            r"block ?list",
            r"\bblocked\b",
            r"\bdnsbl\b",
            r"\brbl\b",
            r"spamhaus",
            r"spamcop",
            r"barracuda",
            r"\bsorbs\b",
            r"abuseat",
            r"reputation",
            r"reverse (?:dns|lookup)",
            r"\brdns\b",
            r"\bptr\b",
            r"client host (?:\S+ )?rejected",
            r"helo command rejected",
            Manual(r"(?:your|sending|client|the) ip\b", (" ip",)),
            r"dynamic ip",
            r"not allowed to (?:connect|send)",
            r"smtp server of your isp",
            r"weren't sent",
            r"refused to talk to me",
            r"not accepting connections",
            r"(?<!not )\blisted (?:at|in|on|by) ",
            r"\bbanned\b",
            r"access denied",
            r"may not be (?:a )?mail exchanger",
            r"too many errors",
            r"forbidden by",
            r"valid sender domain",
            r"unverifiable sending ip|unverifyable sending ip",
        ),
    ),
    (
        "message_too_big",
        _rx(
            Manual(
                r"(?:message|mail|e-?mail|size|length)\b[^.]{0,40}\b(?:too (?:large|big)|exceed)",
                ("too large", "too big", "exceed"),
            ),
            r"too (?:large|big) for",
            r"(?:message|mail) size limit",
            r"maximum (?:message |allowed )?size",
            r"exceeds (?:the )?(?:fixed )?(?:maximum|max|administrative|size)",
            r"recip(?:ient)?sizelimit",
            r"\bmessage too (?:large|big)",
        ),
    ),
    (
        "mailbox_full",
        _rx(
            r"mail ?box\b[^.]{0,30}\b(?:full|quota|exceed|storage|size limit)",
            r"(?:over|exceed(?:ed|s|ing)?)(?: (?:the|its|his|her|their|your))?"
            r" (?:allowed |disk |storage |mail )?quota",
            r"quota (?:exceeded|full|violation|limit|reached)",
            r"\bdisk quota",
            r"insufficient (?:disk |storage |system )?(?:space|storage)",
            r"not enough (?:disk |storage )?space",
            Manual(
                r"(?:disk|storage|inbox|mailfolder|mail folder|folder) (?:is )?(?:full|out of)",
                (" full", " out of"),
            ),
            r"out of (?:storage|disk) space",
            r"storage (?:allocation|quota|space|limit)",
            r"no space left",
            r"too many messages (?:in|on|for)",
            r"full mailbox",
            r"exceeded the local limit",
            Manual(
                r"(?:account|user|recipient) (?:is |has )?(?:over|exceeded)"
                r" (?:its |the )?(?:limit|quota)",
                ("limit", "quota"),
            ),
            r"boite (?:du destinataire )?pleine",
            r"mailbox exceeds",
        ),
    ),
    (
        "suspended",
        _rx(
            Manual(
                r"\b(?:account|mail ?box|user|recipient|address|e-?mail)\b[^.]{0,50}\b(?:disabled|"
                r"suspended|inactive|deactivated|frozen|locked|terminated|archived|on hold)\b",
                _STATES,
            ),
            Manual(
                r"\b(?:disabled|suspended|inactive|deactivated|archived|blocked)"
                r" (?:account|mail ?box|user|recipient)",
                _STATES,
            ),
        ),
    ),
    (
        "content",
        _rx(
            r"content (?:rejected|refused|not accepted)",
            r"message content",
            r"not rfc ?\d* ?compliant",
            r"\brfc ?(?:5322|2822)\b",
            r"(?:duplicate|invalid|malformed|missing|multiple|too many) (?:\w+ )?headers?\b",
            r"headers? (?:error|syntax|too)",
            r"media error",
            r"message (?:not allowed|not accepted|rejected|refused|blocked)",
            r"mail (?:rejected|rejete)",
            r"e-?mail rejected",
            r"\bcontent\b.{0,40}\b(?:policy|guidelines|security issue)",
            # Exim's parse error for a header address list ("a@x <b@y>"): the message's
            # header is broken, the address itself is well formed.
            r"malformed address: .{1,80}? may not follow ",
        ),
    ),
    (
        "system",
        _rx(
            # A local delivery program (procmail, a pipe) that cannot create or write the
            # mailbox file: its "no such user" is about the host's own set-up.
            Manual(
                r"(?:couldn'?t|could not|can'?t|cannot|unable to) (?:create|write(?: to)?|open|"
                r"lock) (?:[\"'/]|(?:the )?(?:file|lock ?file|spool|maildir|mail ?folder|"
                r"directory)\b)",
                (" create", " write", " open", " lock"),
            ),
        ),
    ),
)

HARD: Table = (
    (
        "no_mail_host",
        _rx(
            # The recipient's domain says it takes no mail at all -- one rule, worded
            # as the standards and MTAs in general word it:
            #   RFC 7505 null MX ("556 5.1.10 Recipient address has null MX");
            #   RFC 7504 / RFC 1846 "521 Host does not accept mail", "556 Domain does
            #   not accept mail";
            #   Exim routers/dnslookup.c "an MX or SRV record indicated no SMTP service".
            Manual(
                r"null ?mx|(?:does not|doesn'?t) accept (?:e-?)?mail"
                r"|record indicated no smtp service",
                ("null", "mx", "accept", "no smtp service"),
            ),
            r"doesn'?t receive (?:e-?)?mail",
            r"no mx (?:record )?(?:found )?for (?:the )?domain",
            r"mail receiving disabled",
        ),
    ),
    (
        "bad_address",
        _rx(
            r"(?:bad|invalid|illegal) (?:recipient |destination |e-?mail )?address syntax",
            r"syntax error in (?:the )?(?:recipient )?address",
            r"malformed (?:recipient )?address",
            r"(?:recipient )?address syntax",
            r"invalid (?:e-?mail )?address format",
            r"need fully[- ]qualified address",
        ),
    ),
    (
        "has_moved",
        _rx(
            r"(?:user|recipient|mailbox|address|addressee) (?:has )?moved",
            r"\bhas moved\b",
            r"no longer (?:on|at) (?:this |the )?(?:server|address|host|site)",
            r"not our (?:customer|user)",
            r"has been replaced by",
            r"user not local;? please try",
        ),
    ),
    (
        "host_unknown",
        _rx(
            # The recipient's domain has no mail route: its name does not resolve
            # (NXDOMAIN) or names no reachable host.  One rule, worded as the
            # standards and MTAs in general word it (RFC 3463 X.1.2 "bad destination
            # system address", X.4.4 "unable to route"):
            #   Postfix "Host or domain name not found. Name service error for ...:
            #   Host not found" (the resolver's HOST_NOT_FOUND text);
            #   Sendmail "550 <host>... Host unknown (Name server: ...: host not
            #   found)" (Oracle Solaris sendmail guide);
            #   Exim "Unrouteable address", "all relevant MX records point to
            #   non-existent hosts";
            #   qmail-remote "Sorry, I couldn't find any host named ... (#5.1.2)",
            #   "Sorry, I couldn't find a mail exchanger or IP address. (#5.4.4)";
            #   Exchange Online "550 5.4.310 DNS domain <name> does not exist";
            #   getaddrinfo's EAI_NONAME "Name or service not known".
            # A resolver that could not answer ("Host not found, try again",
            # SERVFAIL, timeouts) is the network rule of SPECIFIC_SOFT, read first.
            Manual(
                r"host (?:or domain name )?(?:unknown|not found)|unknown host"
                r"|(?:no such|unknown|non-?existent) (?:domain|host)"
                r"|domain (?:name )?(?:not found|does not exist|doesn'?t exist|unknown)"
                r"|(?:^|\s)(?:[a-z0-9-]+\.)+[a-z]{2,}\.? (?:does not|doesn'?t) exist"
                r"|unroute?able (?:address|domain|recipient)"
                r"|could(?: not|n'?t) find (?:a|any) (?:mail exchanger|host)"
                r"|name or service not known|\bnxdomain\b",
                ("host", "domain", "exist", "unrout", "find a", "find any", "name or service"),
            ),
            # Outlook.com's own wording ("... because the domain is not reachable").
            r"domain (?:name )?(?:is not reachable|must exist)",
            r"mail domain mentioned in email address is unknown",
            r"\binvalid (?:recipient )?domain\b",
            # DragonFly Mail Agent: "DNS lookup failure: host example.org not found"
            r"dns lookup failure: host [a-z0-9.-]+ not found",
        ),
    ),
    (
        "user_unknown",
        _rx(
            Manual(
                r"(?:user|recipient|addressee|mail ?box|account|e-?mail address|local ?part|"
                r"userid|username|recipient name|alias)(?: name)? (?:is |was )?(?:unknown|not "
                r"(?:found|known|listed|valid|recogni[sz]ed|local|exist)|does ?n[o']t exist|"
                r"doesn'?t exist|invalid|non-?existent|missing)",
                _USER_STATES,
            ),
            Manual(
                r"(?:unknown|invalid|non-?existent|bad|illegal)"
                r"(?: (?!ip\b|sender\b|from\b|return\b|helo\b|host\b|client\b|dns\b|domain\b)"
                r"\w+){0,2} (?:user|userid|recipient|mail ?box|address|account|local ?part|"
                r"addressee|person)\b",
                ("unknown", "invalid", "existent", "bad", "illegal"),
            ),
            r"no such (?:user|mail ?box|account|recipient|addressee|person)\b",
            Manual(
                r"no (?:user|mail ?box|account|recipient)s?"
                r" (?:here|by that name|available|found|at this)",
                ("no user", "no mail", "no account", "no recipient"),
            ),
            r"recip(?:ient)?notfound",
            r"doesn'?t have an? .{1,60}? account",
            r"not (?:a )?valid (?:user|recipient|mailbox|address)",
            r"not listed in (?:the )?(?:domino directory|public name|directory)",
            Manual(
                r"(?:is not|isn't) a (?:known|valid) (?:user|recipient|mailbox)",
                (" a known", " a valid"),
            ),
            r"there is no one at this address",
            r"please check if (?:the )?address is correct",
            r"\bdoes not exist\b",
            r"\bdoesn'?t exist\b",
            r"<[^<>@\s]+@[^<>\s]+>\s*not found",
            r"utilisateur inconnu|destinataire inconnu|adresse (?:destinataire )?invalide",
            r"destinataire invalide",
            r"benutzer unbekannt|unbekannte?r? (?:empf[aä]nger|benutzer)|existiert nicht",
            r"usuario (?:desconocido|inexistente|no existe)|no existe",
            r"utente (?:sconosciuto|inesistente)|nessun utente",
        ),
    ),
    (
        # Wording RFC 5321 and many servers also use for policy refusals ("550
        # Requested action not taken: mailbox unavailable (e.g., mailbox not found,
        # no access, or command rejected for policy reasons)", section 4.2.3): an
        # unknown user only when an X.1 code, the RCPT stage or the receiver's own
        # verdict backs it (rule D1 in outbox/bounce_parsing/README.md).
        "unconfirmed_user",
        _rx(
            Manual(
                r"(?:user|recipient|addressee|mail ?box|account|address)(?: name)?"
                r" (?:is )?(?:currently )?unavailable",
                ("unavailable",),
            ),
            # A server's answer that names only the recipient as rejected -- its
            # address, or the words "recipient" / "address" -- and says nothing else:
            # "550 <a@b>: Recipient address rejected.", "550 5.1.0 Address rejected",
            # "554 a@b rejected".  A reason after it ("...rejected: over quota") is read
            # by the other rules; Postfix's "(in reply to ... command)" note may follow.
            Manual(
                r"(?:^|\s)\d{3}[ -](?:#?[245]\.\d{1,3}\.\d{1,3}\s+)?"
                r"(?:<?[^\s@<>]+@[^\s<>]+?>?:?\s+(?:recipient\s+)?(?:address\s+)?"
                r"|(?:recipient\s+)?address\s+|recipient\s+)"
                r"rejected\W*(?:\(in reply to [^()]*\)\W*)?$",
                ("rejected",),
            ),
        ),
    ),
)

GENERIC_SOFT: Table = (
    (
        "expired",
        _rx(
            r"retry time(?:out)? (?:exceeded|not reached)",
            r"\bexpired\b",
            r"in (?:the )?queue too long",
            r"too long in (?:the )?queue",
            r"could not be delivered for (?:more than |too long|\d)",
            r"could not deliver for the last",
            r"delivery time expired",
            r"unable to deliver (?:the )?message after",
            r"maximum (?:time|number of retries)",
        ),
    ),
    (
        "network",
        _rx(
            r"connection (?:timed out|refused|reset|lost|closed|dropped)",
            r"timed out",
            r"lost connection",
            Manual(
                r"(?:could not|couldn'?t|unable to|failed to) (?:connect|establish|contact)",
                (" connect", " establish", " contact"),
            ),
            r"no route to host",
            r"(?:network|host) (?:is )?unreachable",
            r"name (?:service|server)",
            r"\bdns\b",
            r"host name lookup",
            r"lookup fail",
            r"socket error",
            r"routing loop|mail loop|loops back|hop count|too many hops",
            r"starttls|\btls\b|certificate",
            r"did not accept our requests to connect",
            r"not reachable",
        ),
    ),
    (
        "system",
        _rx(
            r"service (?:currently |temporarily )?(?:unavailable|not available)",
            r"temporar(?:y|ily) (?:failure|unavailable|error|problem|suspended)",
            r"system (?:error|problem|config|failure)",
            r"mailer error",
            r"internal (?:server )?error",
            r"configuration error",
            r"operating system error",
            r"insufficient (?:permission|resources)",
            r"i/o error",
            r"try (?:again )?later",
            r"command output",
            r"procmail",
            r"\bpipe to\b",
            r"permission denied",
            r"transaction failed",
            r"could not load",
            r"protocol error",
            r"not implemented",
            r"unspecified error",
            r"out of memory",
            r"\bbusy\b",
        ),
    ),
    (
        "policy",
        _rx(
            r"polic(?:y|ies)",
            r"not (?:allowed|authori[sz]ed|permitted|accepted)",
            r"prohibited",
            r"\bdenied\b",
            r"forbidden",
            r"\brefused\b",
            r"\brejected\b",
            r"\breject\b",
            r"security (?:polic|reason|issue|risk|check)",
            r"protocol violation",
            r"administrative",
            r"restricted",
            r"not a member",
        ),
    ),
)


def first_match(table: Table, text: str) -> str | None:
    """The first reason of ``table`` (most specific first) whose wording occurs."""
    low = prepare(text)
    for reason, rule_set in table:
        for rule in rule_set:
            for trigger in rule.triggers:
                if trigger in low:
                    if rule.pattern.search(low):
                        return reason
                    break
    return None
