"""Plain-text bounces from MTAs that send no (or no usable) RFC 3464 report.

The shapes covered are the ones the common MTAs and providers document or emit:

* Exim: "The following address(es) failed:" then the address on its own line with
  indented SMTP details (``X-Failed-Recipients`` header lists the addresses).
* qmail-send ("Hi. This is the qmail-send program"): ``<address>:`` blocks separated
  by blank lines, "Remote host said: ...".
* Postfix/Sendmail text parts: ``<address>: host ... said: 550 ...`` or a bare
  ``<address>`` list followed by a ``>>> RCPT`` / ``<<< 550`` transcript; old
  Sendmail ``554 <address>... reason``.
* Provider notices (Gmail, Yahoo, Outlook.com/Exchange, AOL, Zoho, GMX, Courier,
  Domino, appliances, ...): an address after a phrase such as "delivery to the
  following recipient failed", "Your message to ... couldn't be delivered",
  "Recipient address:", or on its own line, with the reason nearby.

The reader finds *anchors* (lines naming a failed address) and takes the text that
belongs to each anchor as that recipient's diagnostic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from outbox.bounce_parsing import reasons, status_codes
from outbox.bounce_parsing.addresses import ADDRESS_RE, same_address

_A = ADDRESS_RE.pattern

# Where the copy of the original message starts; everything after it is the
# sender's own text and must not be read as the failure report. The lead-in
# and the dash runs are bounded and the lead-in stays on the marker's line:
# unbounded, they rescanned the rest of the text from every line (quadratic
# on a body of "> > >" lines or one long line of dashes).
_MARKERS = re.compile(
    r"^(?:[^\S\n]|[>*=#-]){0,80}(?:"
    r"-{2,80}\s*(?:this is a copy of|original message|below this line|enclosed is)"
    r"|(?:this is a copy of (?:the|your) message)"
    r"|below this line is a copy"
    r"|enclosed (?:is|are) (?:a copy|the original)"
    r"|included is a copy of the message"
    r"|original message (?:follows|headers|-{2,})"
    r"|-{2,80}\s*original message\s*-{2,}"
    r"|(?:the )?header of the original message"
    r"|unsent message follows"
    r"|-{3,80}\s*returned message"
    r"|message headers follow"
    r"|-{3,80}\s*original (?:mail|message)"
    r"|below is a copy of the original"
    r"|original message details"
    r"|your original message"
    r"|the original message headers"
    r")",
    re.I | re.M,
)

_HEADER_LINE = re.compile(
    r"^\s*(?:from|to|cc|bcc|reply-to|sender|return-path|message-id|subject|date|received|"
    r"errors-to|in-reply-to|references|delivered-to|x-[\w-]+)\s*:",
    re.I,
)
# "Display Name <address>: reason" - the bracketed address is the one that failed.
_NAMED = re.compile(rf"^[^<>\s]+(?:\s+[^<>\s]+)*\s+<({_A})>\s*:\s*(.*)$")
_ALONE = re.compile(rf"^(?:[*•>-]+\s*)?[<\"]?({_A})[>\"]?\s*:?\s*$")
_LEAD = re.compile(
    rf"^(?:[*•>-]+\s*)?[<\"]?({_A})[>\"]?(?:\s*\(expanded from [^)]*\))?"
    r"(?:\s*:|\.\.\.|\s+(?=\S))\s*(.*)$"
)
_COLON_LEAD = re.compile(rf"^(?:[*•>-]+\s*)?[<\"]?({_A})[>\"]?\s*:\s*(.*)$")
_SMTP_LEAD = re.compile(rf"^\d{{3}}[ -](?:[245]\.\d\.\d+\s+)?<({_A})>\.\.\.\s*(.*)$")
_PHRASE = re.compile(
    r"(?:recipient(?: address)?|addressed to|(?:could not be |was not |wasn't |been )?"
    r"delivered to|deliver(?:ing|ed)? (?:your |the )?(?:mail|message|e-?mail) to|"
    r"delivery to|delivery failed|message to|undeliverable to|rcpt to|unknown user|"
    r"invalid final delivery userid|original address|permanent errors?|failed to)"
    rf"\s*[:\-]?\s*[<\"(]?({_A})[>\")]?(.*)$",
    re.I,
)

# After a list's subject tag too: a warning that came through list software is
# still a warning.
_DELAY_SUBJECT = re.compile(
    r"\bdelay(?:ed)?\b|^\s*(?:\[[^\]\n]{1,80}\]\s*)?warning\b|still being retried", re.I
)
_DELAY_BODY = re.compile(
    r"this is a warning(?: message)? only|has not yet been delivered|will be retried for|"
    r"still being retried|delivery incomplete|only a temporary failure report|"
    r"message (?:is|has been) delayed|delivery to the following recipients? has been delayed|"
    r"will keep trying|is still undelivered|still undelivered after",
    re.I,
)


_SUMMARY_LINES = 200
_RULE = re.compile(r"^[\s\W_]*$")


@dataclass
class Anchor:
    address: str
    line: int
    strong: bool
    rest: str


def notification_section(text: str) -> str:
    """The part of the notification text before the returned original message."""
    match = _MARKERS.search(text)
    return text[: match.start()] if match else text


def is_delay_notice(subject: str, text: str) -> bool:
    return bool(_DELAY_SUBJECT.search(subject) or _DELAY_BODY.search(text))


def informative(text: str) -> bool:
    """Does the text carry a reply code or a recognisable reason?"""
    if not text.strip():
        return False
    return _has_code(text) or _names_reason(text)


def summary(text: str) -> str | None:
    """The most telling line of a notice: one quoting a reply code, else one naming a
    recognisable reason.  Used to show something useful when the text near the
    address says nothing."""
    lines = [ln.strip() for ln in text.split("\n")[:_SUMMARY_LINES]]
    lines = [ln for ln in lines if ln and not _HEADER_LINE.match(ln)]
    for line in lines:
        if _has_code(line) and _names_reason(line):
            return line
    for line in lines:
        if _names_reason(line):
            return line
    return None


def _names_reason(text: str) -> bool:
    return any(
        reasons.first_match(table, text)
        for table in (reasons.SPECIFIC_SOFT, reasons.HARD, reasons.GENERIC_SOFT)
    )


def _anchor_of(line: str, index: int) -> Anchor | None:
    stripped = line.strip()
    if not stripped or "@" not in stripped or _HEADER_LINE.match(stripped):
        return None
    match = _ALONE.match(stripped)
    if match:
        return Anchor(match.group(1), index, True, "")
    # "address: reply" names the recipient even when the reply quotes it again.
    match = _COLON_LEAD.match(stripped) or _NAMED.match(stripped)
    match = match or _SMTP_LEAD.match(stripped) or _LEAD.match(stripped)
    if match:
        return Anchor(match.group(1), index, True, match.group(2))
    match = _PHRASE.search(stripped)
    if match:
        return Anchor(match.group(1), index, False, match.group(2))
    return None


def find_anchors(lines: list[str]) -> list[Anchor]:
    anchors: list[Anchor] = []
    for index, line in enumerate(lines):
        anchor = _anchor_of(line, index)
        if anchor is not None:
            anchor.address = anchor.address.rstrip(".")
            anchors.append(anchor)
    return anchors


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


# Lines after a recipient read for its diagnostic: a server's answer takes a
# few; without a bound, every recipient of a long notice read all of it.
_BLOCK_LINES = 200


def block_text(lines: list[str], anchor: Anchor, stop: int) -> str:
    """Diagnostic text belonging to ``anchor``: its own line and wrapped continuation
    if that says something, else the following lines up to ``stop``."""
    stop = min(stop, anchor.line + 1 + _BLOCK_LINES)
    base = _indent(lines[anchor.line])
    own = [anchor.rest]
    for line in lines[anchor.line + 1 : stop]:
        if line.strip() and _indent(line) > base and anchor.rest:
            own.append(line.strip())
        else:
            break
    text = " ".join(part for part in own if part).strip()
    if informative(text):
        return text
    following: list[str] = []
    checked = 0  # lines of ``following`` already searched for a code
    for line in lines[anchor.line + 1 : stop]:
        if not line.strip():
            # A paragraph that quoted the server's code is the answer; what follows
            # is boilerplate ("No action is required on your part ...").
            if _has_code(" ".join(following[checked:])):
                break
            checked = len(following)
            continue
        if not _RULE.match(line):
            following.append(line.strip())
    return " ".join([text, *following]).strip()


def _has_code(text: str) -> bool:
    return bool(status_codes.find_all(text) or status_codes.find_reply_code(text) is not None)


# Recipients one notice is read for. Each is matched against the others, so
# the cost grows with their square: a notice naming thousands is a forgery or
# a flood, and its first hundred say what the rest would.
_MAX_RECIPIENTS = 100


def recipient_blocks(section: str, known: list[str], exclude: list[str]) -> list[tuple[str, str]]:
    """(address, diagnostic) pairs for the failed recipients of a text section.

    ``known`` is an authoritative recipient list (e.g. X-Failed-Recipients); when it is
    empty the anchors decide.  ``exclude`` holds the addresses of the bounce's own
    addressee and the original sender, ignored unless nothing else is found.
    """
    lines = section.split("\n")
    anchors = find_anchors(lines)[:_MAX_RECIPIENTS]
    wanted: list[str] = []
    if known:
        wanted = known[:_MAX_RECIPIENTS]
    else:
        # Only addresses named as failures compete; a bare address that is not
        # one (a list footer's, a signature's) must not hide one found after
        # failure wording.
        evident = [a for a in anchors if _evident(lines, anchors, a)]
        strong = [a.address for a in evident if a.strong]
        candidates = strong or [a.address for a in evident if not a.strong]
        kept = [a for a in candidates if not any(same_address(a, x) for x in exclude)]
        # The bounce's own addressee or the original sender is a failed recipient
        # only when the notice quotes a server's code for it (mail sent to oneself);
        # a notice that names them in prose alone is a forgery or about something else.
        wanted = kept or [a for a in candidates if _has_code(_diagnostic_for(a, lines, anchors))]
    result: list[tuple[str, str]] = []
    seen: set[str] = set()
    for address in wanted:
        key = address.lower()
        if key in seen:
            continue
        seen.add(key)
        result.append((address, _diagnostic_for(address, lines, anchors)))
    return result


# A heading that introduces a list of failed recipients ("The following recipients
# were affected:", "did not reach the following recipient(s):", "Unable to deliver
# message to the following address(es).").
_LIST_HEADING = re.compile(
    r"\b(?:following|these|those|the)\b.{0,40}\b(?:recipients?|address(?:es|\(es\))?|"
    r"users?|destinations?)\b"
    r"|\brecipients?\b.{0,40}\b(?:affected|failed|could not|couldn'?t|were not|unreachable)"
    r"|could(?: not|n'?t) be (?:delivered|reached)|undeliverable|permanent(?: fatal)? error"
    r"|delivery (?:has )?failed|failed (?:recipients?|addresses)",
    re.I,
)


def _evident(lines: list[str], anchors: list[Anchor], anchor: Anchor) -> bool:
    """Is this address named *as a failure*?  Its lines quote a code or name a
    reason, it follows failure wording on its own line, or it stands in a list under
    a heading that introduces failed recipients.  Addresses merely mentioned in a
    notice (or harvested from a look-alike's body) are not."""
    if not anchor.strong:
        return True  # found after failure wording ("could not be delivered to ...")
    if informative(_diagnostic_for(anchor.address, lines, anchors)):
        return True
    listed = {a.line for a in anchors if not a.rest}
    index = anchor.line - 1
    while index >= 0 and (not lines[index].strip() or index in listed):
        index -= 1
    return index >= 0 and bool(_LIST_HEADING.search(lines[index]))


def _diagnostic_for(address: str, lines: list[str], anchors: list[Anchor]) -> str:
    own = [a for a in anchors if same_address(a.address, address)]
    if not own:
        for index, line in enumerate(lines):
            if address.lower() in line.lower():
                own = [Anchor(address, index, True, line.split(address, 1)[-1])]
                break
    if not own:
        return ""
    first = own[0]
    others = [
        a.line for a in anchors if a.line > first.line and not same_address(a.address, address)
    ]
    stop = min(others) if others else len(lines)
    return block_text(lines, first, stop)
