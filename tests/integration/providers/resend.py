"""Resend's ``POST /emails`` as its documentation describes it, idempotency included.

``Authorization: Bearer`` (401 ``missing_api_key``, 403 ``invalid_api_key``);
errors as ``{"statusCode", "name", "message"}``; 200 with ``{"id"}``. An
``Idempotency-Key`` (1 to 256 characters, else 400 ``invalid_idempotency_key``)
makes a repeat of the same payload return the first response without
sending; another payload under the key is 409 ``invalid_idempotent_request``,
and a repeat while the first is still being processed is 409
``concurrent_idempotent_requests``.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from tests.integration.providers.server import FakeProvider, Request, Response

API_KEY = "re_test_key"


@dataclass(frozen=True)
class Accepted:
    id: str
    email: dict[str, Any]
    idempotency_key: str | None


def _error(status: int, name: str, message: str) -> Response:
    return Response(status, {"statusCode": status, "name": name, "message": message})


class FakeResend(FakeProvider):
    def __init__(self, *, latency: float = 0.0) -> None:
        super().__init__(latency=latency)
        self.accepted: list[Accepted] = []
        # key -> (payload digest, the response once it is known)
        self._keys: dict[str, tuple[str, Response | None]] = {}
        self._keys_lock = threading.Lock()

    def process(self, request: Request, delay: float) -> Response:
        if request.path != "/emails":
            return _error(404, "not_found", "The requested endpoint does not exist.")
        auth = request.headers.get("authorization", "")
        if not auth:
            return _error(401, "missing_api_key", "Missing API key in the authorization header.")
        if auth != f"Bearer {API_KEY}":
            return _error(403, "invalid_api_key", "API key is invalid.")
        key = request.headers.get("idempotency-key")
        if key is not None and not 1 <= len(key) <= 256:
            return _error(400, "invalid_idempotency_key", "The key must be between 1-256 chars.")
        digest = hashlib.sha256(request.body).hexdigest()
        if key is not None:
            with self._keys_lock:
                seen = self._keys.get(key)
                if seen is None:
                    self._keys[key] = (digest, None)
            if seen is not None:
                if seen[0] != digest:
                    return _error(
                        409,
                        "invalid_idempotent_request",
                        "Same idempotency key used with a different request payload.",
                    )
                if seen[1] is None:
                    return _error(
                        409,
                        "concurrent_idempotent_requests",
                        "Same idempotency key used while original request is still in progress.",
                    )
                return seen[1]
        response = self._send(request, key)
        time.sleep(delay)
        if key is not None:
            with self._keys_lock:
                if response.status < 300:
                    self._keys[key] = (digest, response)
                else:  # a refused request is not remembered: it may be corrected
                    del self._keys[key]
        return response

    def _send(self, request: Request, key: str | None) -> Response:
        try:
            email = request.json()
        except ValueError:
            return _error(400, "validation_error", "Invalid JSON body.")
        for name in ("from", "to", "subject"):
            if not email.get(name):
                return _error(422, "missing_required_field", f"The `{name}` field is missing.")
        recipients = email["to"] if isinstance(email["to"], list) else [email["to"]]
        if not 1 <= len(recipients) <= 50 or not all("@" in str(r) for r in recipients):
            return _error(
                422,
                "validation_error",
                "Invalid `to` field. The email address needs to follow the "
                "`email@example.com` or `Name <email@example.com>` format.",
            )
        if not (email.get("html") or email.get("text")):
            return _error(422, "validation_error", "Either `html` or `text` must be provided.")
        if not isinstance(email.get("headers", {}), dict):
            return _error(422, "validation_error", "`headers` must be an object.")
        accepted = Accepted(str(uuid.uuid4()), email, key)
        self.accepted.append(accepted)
        return Response(200, {"id": accepted.id})
