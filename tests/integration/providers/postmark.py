"""Postmark's ``POST /email`` as its documentation describes it.

Authentication by ``X-Postmark-Server-Token`` (401 with ErrorCode 10 when
missing or wrong); JSON only; 422 with ``{"ErrorCode", "Message"}`` for an
invalid request (300) or an inactive recipient (406); 200 with ``{"To",
"SubmittedAt", "MessageID", "ErrorCode": 0, "Message": "OK"}``.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from dataclasses import dataclass
from typing import Any

from tests.integration.providers.server import FakeProvider, Request, Response

TOKEN = "server-token-for-tests"


@dataclass(frozen=True)
class Accepted:
    message_id: str  # Postmark's MessageID
    email: dict[str, Any]  # the request body

    def header(self, name: str) -> str | None:
        for item in self.email.get("Headers", []):
            if item["Name"].lower() == name.lower():
                return str(item["Value"])
        return None


class FakePostmark(FakeProvider):
    def __init__(self, *, inactive: frozenset[str] = frozenset(), latency: float = 0.0) -> None:
        super().__init__(latency=latency)
        self.inactive = inactive  # addresses that hard-bounced or complained
        self.accepted: list[Accepted] = []

    def process(self, request: Request, delay: float) -> Response:
        if request.path != "/email":
            return Response(404, {"ErrorCode": 404, "Message": "Not found"})
        if request.headers.get("x-postmark-server-token") != TOKEN:
            return Response(
                401,
                {
                    "ErrorCode": 10,
                    "Message": "The Server Token you provided in the "
                    "X-Postmark-Server-Token request header was invalid.",
                },
            )
        if "application/json" not in request.headers.get("content-type", ""):
            return Response(422, {"ErrorCode": 409, "Message": "JSON required."})
        try:
            email = request.json()
        except ValueError:
            return Response(422, {"ErrorCode": 402, "Message": "Invalid JSON"})
        problem = _invalid(email)
        if problem:
            return Response(422, {"ErrorCode": 300, "Message": problem})
        to = str(email["To"])
        if to.lower() in self.inactive:
            return Response(
                422,
                {
                    "ErrorCode": 406,
                    "Message": "You tried to send to recipient(s) that have been marked as "
                    f"inactive. Found inactive addresses: {to.lower()}. Inactive recipients "
                    "are ones that have generated a hard bounce, a spam complaint, or a "
                    "manual suppression.",
                },
            )
        accepted = Accepted(str(uuid.uuid4()), email)
        self.accepted.append(accepted)
        time.sleep(delay)
        return Response(
            200,
            {
                "To": to,
                "SubmittedAt": dt.datetime.now(dt.UTC).isoformat(),
                "MessageID": accepted.message_id,
                "ErrorCode": 0,
                "Message": "OK",
            },
        )


def _invalid(email: Any) -> str | None:
    if not isinstance(email, dict):
        return "Invalid email request"
    for name in ("From", "To"):
        if not email.get(name):
            return "Zero recipients specified" if name == "To" else "Invalid 'From' address."
    if "@" not in str(email["To"]):
        return f"Invalid 'To' address: '{email['To']}'."
    if not (email.get("TextBody") or email.get("HtmlBody")):
        return "Provide either email TextBody or HtmlBody or both."
    headers = email.get("Headers", [])
    if not isinstance(headers, list) or not all(
        isinstance(h, dict) and set(h) == {"Name", "Value"} for h in headers
    ):
        return "Invalid 'Headers': each header is an object with Name and Value."
    return None
