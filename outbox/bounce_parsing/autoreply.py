"""Recognising automatic replies (RFC 3834) and bounce-shaped messages.

An auto-reply (vacation, out-of-office, "thanks for your mail") is not a bounce: the
address works.  RFC 3834 section 5 asks responders to send ``Auto-Submitted:
auto-replied``, but delivery-status notifications carry the same header (Exim, Mail.ru,
Exchange), so the header alone cannot tell the two apart; the sender and subject can.
"""

from __future__ import annotations

import re

from outbox.bounce_parsing import mime
from outbox.bounce_parsing.addresses import clean_address, is_system_address

# A list's subject tag ("[team] ") comes before the responder's wording when the
# reply went to, or came through, a mailing list.
LIST_TAG = r"^\s*(?:\[[^\]\n]{1,80}\]\s*)?"
# Subject wording of out-of-office and auto-reply messages in common languages.
_AUTO_SUBJECT = re.compile(
    LIST_TAG + r"(?:"
    r"auto(?:matic|matische|matisk|matisch|matique|m[aá]tica|matico)?[ _-]?"
    r"(?:reply|response|respond|antwort|svar|antwoord|risposta|respuesta|resposta|r[ée]ponse)"
    r"|autoreply|autoresponse|out of (?:the )?office|away from (?:the )?office|i am away|"
    r"i'm away|away until|on vacation|vacation|abwesenheit|abwesend|absence|absent|"
    r"r[ée]ponse automatique|risposta automatica|respuesta autom[aá]tica|"
    r"resposta autom[aá]tica|automatisch antwoord|automatisk svar|automaattinen vastaus|"
    r"odpowied[zź] automatyczna|fuera de la oficina|ausente|fuori sede|assente|afwezig|"
    r"niet aanwezig|frånvaro|fravær|poissa|"
    r"自動応答|自動返信|自动回复|自動回覆|不在|автоответ|otomatik yan\u0131t|otomatik yanit"
    r")",
    re.I,
)
_AUTO_PREFIX = re.compile(
    LIST_TAG + r"(?:auto|automatic reply|autoreply|ooo|out of office)\s*:", re.I
)
_BOUNCE_SUBJECT = re.compile(
    r"undeliver|undelivered|not (?:be )?delivered|returned mail|returning message|"
    r"delivery (?:status|failure|failed|notification|report|problem|has failed|incomplete)|"
    r"failure notice|failed delivery|mail delivery|delivery notification|non remis|"
    r"unzustellbar|non recapitabile|no entregado|no se puede entregar|niet bezorgd|"
    r"mail system error|could not be delivered|error sending your mail|"
    r"returned to sender|message delivery|nondeliverable|non-delivery|"
    r"warning: (?:message|could not)|delayed mail|mail failure|sorry, your message",
    re.I,
)
_BOUNCE_SENDER_NAME = re.compile(
    r"mail delivery|mailer[- ]?daemon|postmaster|delivery (?:subsystem|system)|"
    r"mail administrator|interscan|content[- ]filter",
    re.I,
)
_BOUNCE_BODY = re.compile(
    r"could not be delivered|couldn'?t be delivered|wasn'?t delivered|was not delivered|"
    r"undeliverable|delivery (?:has )?failed|delivery to the following|permanent(?: fatal)? error|"
    r"unable to deliver|failed permanently|not be delivered|delivery status notification|"
    r"following addresses had|returned to (?:the )?sender|mail delivery (?:software|system)|"
    r"error (?:occurred|delivering)|delivery problems|has not yet been delivered|"
    r"message delivery failed|non-?delivery|retry timeout exceeded|"
    r"did not reach the following recipient|rejected your message|delivery failure",
    re.I,
)


def _header_flags(msg: mime.Part) -> bool:
    auto = mime.header(msg, "Auto-Submitted").lower()
    if auto.startswith("auto-replied"):
        return True
    if mime.header(msg, "X-Autoreply") or mime.header(msg, "X-Autorespond"):
        return True
    if mime.header(msg, "X-Auto-Reply") or mime.header(msg, "X-Vacation"):
        return True
    precedence = mime.header(msg, "Precedence").lower()
    return precedence.startswith("auto_reply") or precedence.startswith("auto-reply")


def is_auto_reply(msg: mime.Part) -> bool:
    """Vacation/out-of-office style message by headers or subject (not a bounce test)."""
    subject = mime.header(msg, "Subject")
    return _header_flags(msg) or bool(_AUTO_SUBJECT.search(subject) or _AUTO_PREFIX.search(subject))


def looks_like_bounce(msg: mime.Part, first_text: str) -> bool:
    """Sender, subject or opening text typical of a delivery failure notice."""
    sender = mime.header(msg, "From")
    address = clean_address(sender)
    if (address and is_system_address(address)) or _BOUNCE_SENDER_NAME.search(sender):
        return True
    if sender.strip().lower() in ("mailer-daemon", "<>", ""):
        return True
    if _BOUNCE_SUBJECT.search(mime.header(msg, "Subject")):
        return True
    if mime.header(msg, "X-Failed-Recipients"):
        return True
    return bool(_BOUNCE_BODY.search(first_text[:4000]))
