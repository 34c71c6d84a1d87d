"""Unsubscribe requests sent to a ``List-Unsubscribe: <mailto:...>`` address.

RFC 2369 section 3.2 lets a client unsubscribe by mailing the list's unsubscribe
address; mail apps (Apple Mail, Gmail, Outlook) send a short message with the subject
"unsubscribe" on the user's behalf.  For a transactional sender that is as strong a
"stop mailing me" as a complaint, so it is reported as one, for the From address.
"""

from __future__ import annotations

import re

from outbox.bounce_parsing import mime
from outbox.bounce_parsing.addresses import clean_address, is_plausible

_SUBJECT = re.compile(r"^\s*(?:unsubscribe|opt[- ]?out)\s*$", re.I)


def requester(msg: mime.Part) -> str | None:
    """The address asking to be removed, or ``None`` if this is not such a request."""
    if not _SUBJECT.match(mime.header(msg, "Subject")):
        return None
    if mime.content_type(msg) == "multipart/report":
        return None
    address = clean_address(mime.header(msg, "From"))
    return address if is_plausible(address) else None
