"""What every endpoint of `outbox web` shares: the headers sent with every
answer, a body read no further than its limit, and a plain answer (status,
text, type) as Starlette's response."""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus

from starlette.requests import Request
from starlette.responses import Response as StarletteResponse

MAX_BODY = 256 * 1024  # a Postmark bounce event may quote the whole message
TEXT = "text/plain; charset=utf-8"

# Sent with every answer. The pages are ours alone: no frame may hold them
# (clickjacking the unsubscribe button), nothing loads from elsewhere, and the
# token in the URL goes to no other site in a Referer.
SECURITY_HEADERS = (
    ("Cache-Control", "no-store"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
)


@dataclass(frozen=True, slots=True)
class Response:
    status: HTTPStatus
    body: str
    content_type: str = "text/html; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


TOO_LARGE = Response(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "body too large\n", TEXT)


async def bounded_body(request: Request, limit: int = MAX_BODY) -> bytes | None:
    """The body, or None when it is over ``limit`` (read no further than that)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def starlette_response(response: Response, *, head: bool) -> StarletteResponse:
    data = response.body.encode("utf-8")
    headers = dict(SECURITY_HEADERS)
    headers.update(response.headers)
    headers["Content-Length"] = str(len(data))
    return StarletteResponse(
        b"" if head else data,
        status_code=int(response.status),
        headers=headers,
        media_type=response.content_type,
    )
