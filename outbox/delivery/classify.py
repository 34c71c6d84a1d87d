"""What one attempt's reply means (pure).

RFC 5321 section 4.2.1: 2yz accepted, 4yz transient (the same command may
succeed later), 5yz permanent (do not repeat it unchanged). RFC 3463 enhanced
status codes are kept for the record and for bounce statistics.
"""

from __future__ import annotations

import re

from outbox.models import HttpReply, Outcome, Reply, Stage, Verdict

_ENHANCED = re.compile(r"^\s*([245])\.(\d{1,3})\.(\d{1,3})\b")

# Queue ids in 250 replies of common relays, most specific first.
_QUEUE_ID_PATTERNS = (
    re.compile(r"queued as ([A-Za-z0-9]+)"),  # Postfix, smtp-sink
    re.compile(r"\bid=([A-Za-z0-9-]+)"),  # Exim
    re.compile(r"<([^<>\s]+@[^<>\s]+)>.*\bqueued", re.IGNORECASE),  # Exchange: <id> Queued mail
    re.compile(r"\bOK\s+\d+\s+(\S+)\s+-\s+gsmtp"),  # Gmail
    re.compile(r"^Ok ([0-9a-f]{16}-[0-9a-f-]{20,})", re.IGNORECASE),  # Amazon SES
    re.compile(r"^([A-Za-z0-9]{8,}) Message accepted for delivery"),  # sendmail
    re.compile(r"\bqueued (?:as|with id) ([A-Za-z0-9.-]+)", re.IGNORECASE),
)

_GREYLIST = re.compile(
    r"grey-?list|gray-?list|try again later|please retry later|temporarily deferred|"
    r"deferred, try again|not yet authorized to deliver|\bpostgrey\b",
    re.IGNORECASE,
)

# RFC 5321 section 4.5.3.1.10: a 552 to RCPT about the recipient count is to be
# treated as the transient 452.
_TOO_MANY_RECIPIENTS = re.compile(r"too many recipients", re.IGNORECASE)


# RFC 3463 section 3.2: the address does not exist (X.1.1 bad mailbox, X.1.2 bad
# system, X.1.3 bad syntax, X.1.6 moved with no forwarding address) or cannot
# receive mail at all (X.1.10, RFC 7505 null MX). A policy refusal (X.7.x), a
# full mailbox (X.2.2) or a disabled one (X.2.1, sometimes only for a while)
# says nothing about the address.
_NO_SUCH_ADDRESS = frozenset({"1.1", "1.2", "1.3", "1.6", "1.10"})


def refuses_address(reply: Reply) -> bool:
    """A 5yz to RCPT TO saying the address does not exist: final, as a hard bounce is.

    Said by the receiving server in our own session, so no one else can make
    it up; the address is suppressed as a hard bounce's would be
    (:mod:`outbox.bounce_receiving.policy`).
    """
    if reply.stage is not Stage.RCPT or reply.code is None or not 500 <= reply.code < 600:
        return False
    status = enhanced_status(reply.text)
    return status is not None and status.startswith("5.") and status[2:] in _NO_SUCH_ADDRESS


def enhanced_status(text: str) -> str | None:
    """The RFC 3463 code that opens a reply text, e.g. ``"5.1.1"``."""
    match = _ENHANCED.match(text)
    return ".".join(match.groups()) if match else None


def queue_id(text: str) -> str | None:
    """The relay's own id for an accepted message, when its 250 reply names one."""
    body = _ENHANCED.sub("", text, count=1).strip()
    for pattern in _QUEUE_ID_PATTERNS:
        match = pattern.search(body)
        if match:
            return match.group(1)
    return None


def is_greylisting(code: int, text: str) -> bool:
    """A 4yz that asks the sender to come back later on purpose."""
    return 400 <= code < 500 and bool(_GREYLIST.search(text))


def classify(reply: Reply) -> Outcome:
    """Decide what an attempt means for its row."""
    if reply.code is None:
        return _classify_broken_exchange(reply)
    code, text = reply.code, reply.text.strip()
    status = enhanced_status(text)
    summary = f"{code} {text}".strip()
    if 200 <= code < 300:
        return Outcome(Verdict.SENT, summary, status, queue_id(text))
    if 400 <= code < 500:
        return Outcome(Verdict.RETRY, summary, status, greylisted=is_greylisting(code, text))
    if 500 <= code < 600:
        if reply.stage.is_session:
            # A relay refusing our session or credentials has not judged this
            # message; failing every email for good over a config error would
            # lose them all.
            return Outcome(Verdict.RETRY, f"session refused: {summary}", status)
        if code == 552 and reply.stage is Stage.RCPT and _TOO_MANY_RECIPIENTS.search(text):
            return Outcome(Verdict.RETRY, summary, status)
        return Outcome(Verdict.FAILED, summary, status)
    # 1yz and 3yz are never final replies; a peer sending one is broken.
    return Outcome(Verdict.RETRY, f"unexpected reply: {summary}", status)


def _classify_broken_exchange(reply: Reply) -> Outcome:
    error = reply.error or "connection lost"
    where = f"{error} at {reply.stage.value}"
    if reply.stage is Stage.FINAL_REPLY:
        # The end-of-data dot was sent; the relay may well have queued the
        # message. Only the stored Message-ID makes a resend harmless.
        return Outcome(Verdict.UNCERTAIN, f"no final reply: {where}")
    return Outcome(Verdict.RETRY, where)


def classify_reply(reply: Reply) -> Outcome:
    """Either kind of reply: an HTTP provider's, or an SMTP relay's."""
    return classify_http(reply) if isinstance(reply, HttpReply) else classify(reply)


# RFC 9110 section 15.5.9: the server gave up waiting for the request; nothing was done.
_REQUEST_TIMEOUT = 408
_TOO_MANY_REQUESTS = 429  # RFC 6585 section 4, usually with Retry-After
# Credentials missing or refused: a configuration error, not a verdict on this message.
_UNAUTHORIZED = frozenset({401, 403})


def classify_http(reply: HttpReply) -> Outcome:
    """The SMTP rules, said in HTTP (RFC 9110 section 15).

    2xx is sent, with the provider's message id. 429, 408 and 5xx are retried,
    no sooner than the response's Retry-After (RFC 9110 section 10.2.3). 401,
    403 and the 4xx the provider marks as transient are retried like SMTP's
    refused sessions; every other 4xx fails at once with the provider's text.
    A response lost after the whole request left is uncertain, unless the
    request carried an idempotency key the provider honours: then sending it
    again is safe and it is a plain retry.
    """
    if reply.code is None:
        where = f"{reply.error or 'connection lost'} at {reply.stage.value}"
        if reply.stage is Stage.RESPONSE:
            if reply.idempotent:
                return Outcome(Verdict.RETRY, f"no response, resent with the same key: {where}")
            return Outcome(Verdict.UNCERTAIN, f"no response: {where}")
        return Outcome(Verdict.RETRY, where)
    code, text = reply.code, reply.text.strip()
    summary = f"{code} {text}".strip()
    if 200 <= code < 300:
        return Outcome(Verdict.SENT, summary, provider_message_id=reply.provider_message_id)
    if code in (_REQUEST_TIMEOUT, _TOO_MANY_REQUESTS) or 500 <= code < 600:
        return Outcome(Verdict.RETRY, summary, retry_after=reply.retry_after)
    if 400 <= code < 500:
        if code in _UNAUTHORIZED or reply.transient:
            reason = f"provider refused the account or request, not the message: {summary}"
            return Outcome(Verdict.RETRY, reason, retry_after=reply.retry_after)
        return Outcome(Verdict.FAILED, summary)
    # 1xx and 3xx are never a final answer to a send; a peer sending one is broken.
    return Outcome(Verdict.RETRY, f"unexpected response: {summary}", retry_after=reply.retry_after)
