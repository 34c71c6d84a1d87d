"""Amazon SES v2 ``SendEmail`` (``POST /v2/email/outbound-emails``), for boto3's ``sesv2``.

A request must be SigV4-signed for the ``ses`` service (403 otherwise); the
body is JSON with ``Content.Raw.Data`` base64-encoded; 200 answers
``{"MessageId"}``. Errors carry their code in ``x-amzn-ErrorType`` and the
text in ``{"message"}``, as restJson1 services do. Like SES, the fake
replaces the message's Message-ID with its own on the copy it delivers.
"""

from __future__ import annotations

import base64
import re
import time
import uuid
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import default
from typing import Any

from tests.integration.providers.server import Answer, FakeProvider, Request, Response

ACCESS_KEY = "AKIAOUTBOXTESTKEY000"
SECRET_KEY = "outbox-test-secret"
_SIGNATURE = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/\d{8}/([^/]+)/ses/aws4_request,")


def error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Answer:
    return Answer(status, {"message": message}, {"x-amzn-ErrorType": code, **(headers or {})})


@dataclass(frozen=True)
class Accepted:
    message_id: str
    params: dict[str, Any]  # the request, Raw.Data decoded
    delivered: bytes  # the raw message as SES passes it on


class FakeSes(FakeProvider):
    def __init__(self, *, latency: float = 0.0) -> None:
        super().__init__(latency=latency)
        self.accepted: list[Accepted] = []

    def process(self, request: Request, delay: float) -> Response:
        if request.path != "/v2/email/outbound-emails":
            failure = error(404, "NotFoundException", "Unknown operation")
            return Response(failure.status, failure.body, failure.headers)
        signed = _SIGNATURE.match(request.headers.get("authorization", ""))
        if not signed or signed.group(1) != ACCESS_KEY:
            failure = error(
                403, "UnrecognizedClientException", "The security token included is invalid."
            )
            return Response(failure.status, failure.body, failure.headers)
        params = request.json()
        raw = base64.b64decode(params["Content"]["Raw"]["Data"])
        message = BytesParser(policy=default).parsebytes(raw)
        to = params.get("Destination", {}).get("ToAddresses") or [message["To"]]
        if message["From"] is None or not all("@" in str(a) for a in to):
            failure = error(400, "BadRequestException", "Illegal address")
            return Response(failure.status, failure.body, failure.headers)
        message_id = f"0100{uuid.uuid4().hex[:12]}-{uuid.uuid4()}-000000"
        # SES documents that it replaces any Message-ID header with its own.
        del message["Message-ID"]
        message["Message-ID"] = f"<{message_id}@email.amazonses.com>"
        params["Content"]["Raw"]["Data"] = raw
        self.accepted.append(Accepted(message_id, params, message.as_bytes()))
        time.sleep(delay)
        return Response(200, {"MessageId": message_id})
