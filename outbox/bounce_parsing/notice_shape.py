"""Is a message that carries no delivery report a failure notice?

Text notices (qmail, Exim, old Sendmail, providers, appliances) have no fields to
read, so the message is judged by what it says, from three kinds of evidence:

* who sent it: a mail-system role address (MAILER-DAEMON, postmaster) or an
  ``X-Failed-Recipients`` header, which only mail software writes;
* whether a person or a responder wrote it: an auto-reply's markers, a subject that
  answers or forwards another message, or text quoted under an attribution line;
* what it says: it returns the original message, quotes a server's failure code
  on its own (unquoted) lines, or names a recipient as failed with a reason
  ("Could not be delivered to: <address> As their mailbox is full").

No single header decides.  List headers (``List-Id``, ``List-Unsubscribe``) are
no evidence either way: a notice that travelled through list software carries
them, and so does bulk mail dressed as a notice; the second quotes no server code
and returns no message, which is what gives it away.
"""

from __future__ import annotations

import re

from outbox.bounce_parsing import autoreply, mime, plain_notices, status_codes
from outbox.bounce_parsing.addresses import clean_address, is_system_address

# Subject prefixes of answers and forwards in common mail clients and languages,
# after an optional list tag ("[team] Re: ...").
_REPLY_SUBJECT = re.compile(
    autoreply.LIST_TAG + r"(?:re|fwd?|aw|wg|sv|vs|vb|tr|rv|enc|odp|pd|antw|doorst|ynt|ilt|r)"
    r"(?:\[\d{1,3}\])?\s*:",
    re.I,
)
# "On Mon, 3 Mar 2025, Dana <dana@example.org> wrote:" and its translations ("Am
# 3. März 2025 schrieb Dana:"): the lines after it are another message's, quoted.
_ATTRIBUTION = re.compile(
    r"^[^\S\n]*(?:on|am|le|el|il|op|em|den|dne|w dniu)\b[^\n]{0,300}"
    r"(?:wrote|schrieb|a [ée]crit|escribi[óo]|ha scritto|schreef|skrev|escreveu|napisa[łl])"
    r"[^\n]{0,120}:[^\S\n]*$",
    re.I | re.M,
)
_QUOTED_LINE = re.compile(r"^[^\S\n]*>", re.M)


def sent_by_mail_system(msg: mime.Part) -> bool:
    """The From address is a mail-system role, or the message lists failed
    recipients in the header only mail software writes."""
    sender = mime.header(msg, "From")
    if sender.strip().lower() in ("mailer-daemon", "<>", ""):
        return True
    address = clean_address(sender)
    if address and is_system_address(address):
        return True
    return bool(mime.header(msg, "X-Failed-Recipients"))


def written_as_reply(msg: mime.Part, text: str) -> bool:
    """An automatic reply, or a person's answer to or forward of another message."""
    if autoreply.is_auto_reply(msg):
        return True
    if _REPLY_SUBJECT.match(mime.header(msg, "Subject")):
        return True
    attribution = _ATTRIBUTION.search(text)
    return bool(attribution and _QUOTED_LINE.search(text, attribution.end()))


def own_lines(text: str) -> str:
    """``text`` without the lines it quotes from another message (``>`` lines)."""
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(">"))


def quotes_failure_code(text: str) -> bool:
    """A server's failure status in ``text``: a 4.x.x/5.x.x enhanced code, or a
    4xx/5xx reply code opening a line or given as what a server said.  A bare
    three-digit number elsewhere is a price, a size or an id."""
    if any(code[0] in "45" for code in status_codes.find_all(text)):
        return True
    return bool(_STATUS_LINE.search(text))


_STATUS_LINE = re.compile(
    r"^[^\S\n]*\W{0,3}[45][0-5]\d(?:[ -]|$)"
    r"|\b(?:said|says|replied|answered|response|reply|error)[^\S\n]*:?[^\S\n]*[45][0-5]\d\b",
    re.I | re.M,
)


def names_failed_recipient(text: str) -> bool:
    """Does ``text`` name an address as failed and say why?"""
    return any(
        plain_notices.informative(why) for _, why in plain_notices.recipient_blocks(text, [], [])
    )


def is_failure_notice(
    msg: mime.Part, texts: list[str], section: str, returns_original: bool
) -> bool:
    """Should the text of a message with no delivery report be read for failed
    recipients?  ``section`` is the notice's text before the returned message;
    ``returns_original`` says whether the message carries that original."""
    first = texts[0] if texts else ""
    if not autoreply.looks_like_bounce(msg, first):
        return False
    if sent_by_mail_system(msg):
        return True
    # A person or a responder answering: a subject quoting the original's
    # ("Automatic reply: Delivery failed ...") or a quoted notice is theirs.
    if written_as_reply(msg, first):
        return False
    own = own_lines(section)
    return returns_original or quotes_failure_code(own) or names_failed_recipient(own)
